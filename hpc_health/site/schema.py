"""The schema of ``site.yaml``: every setting, its type and its default.

The benchmarks' settings (``partitions.<p>.{kernels,stream,osu,ior,mdtest}``)
are here too, not beside their checks in :mod:`hpc_health.checklib`: loading
a site must not import ReFrame, and the check library does.
"""

import copy

_PATH = {"type": ["string", "null"]}
_POSINT = {"type": ["integer", "null"], "minimum": 1}
_SPEC = {"type": ["string", "null"], "minLength": 1}
_BOOL = {"type": ["boolean", "null"]}
# Message sizes must be powers of two: OSU doubles the size from -m MIN up
# to MAX, so any other size would never be measured.
_MSG_SIZES = {"type": ["array", "null"], "minItems": 1,
              "items": {"type": "integer", "minimum": 1}}
_BYTES = {"type": ["integer", "string", "null"],
          "pattern": r"^[0-9]+[kKmMgGtT]?$", "minimum": 1}


def _strict(properties):
    return {"type": ["object", "null"], "additionalProperties": False,
            "properties": properties, "default": {}}


#: Gated OSU message sizes per size set (bytes), unless the site says otherwise.
OSU_SIZES = {
    "latency": [8, 4096],
    "bw": [65536, 4194304],
    "bibw": [65536, 4194304],
    "mbw_mr": [8, 65536],
    "allreduce": [8, 1048576],
    "alltoall": [8, 65536],
    "bcast": [8, 1048576],
}


# Benchmark settings per partition.  Every key is optional, and null means
# the default: the schema's ``default`` is the one place defaults live
# (filled in by :func:`with_defaults` before a check sees them).  A key
# without a default is derived by the check from the partition (cores,
# caches), as its description says.
KERNELS_SCHEMA = _strict({
    "variants": {"type": ["string", "null"], "default": "",
                 "description": "variants of the Spack build, e.g. 'build_type=Debug' "
                 "(hpc-health-kernels is a CMakePackage)"},
    "samples": {**_POSINT, "default": 5, "description": "launches of halo and barrier per run, each "
                "a sample"},
    "halo_sizes": {"type": ["array", "null"], "minItems": 1,
                   "items": {"type": "integer", "minimum": 1},
                   "default": [8, 4096, 65536, 1048576], "description": "halo message sizes, bytes"},
    "halo_iters": {**_POSINT, "default": 200, "description": "timed exchanges per repetition"},
    "halo_warmup": {"type": ["integer", "null"], "minimum": 0, "default": 20,
                    "description": "untimed exchanges first"},
    "halo_repetitions": {**_POSINT, "default": 1, "description": "repetitions inside one "
                         "halo launch; the launch's figure is their median"},
    "barrier_iters": {**_POSINT, "default": 2000,
                      "description": "timed barriers per communicator size"},
    "barrier_warmup": {"type": ["integer", "null"], "minimum": 0, "default": 200,
                       "description": "untimed barriers first"},
})
STREAM_SCHEMA = _strict({
    "spec": {**_SPEC, "default": "stream +openmp", "description": "Spack spec; "
             "stream_array_size/ntimes are added by the check"},
    "array_size": {**_POSINT, "description": "elements per array (default: each "
                   "array >= 4x the node's last-level cache, from the processor topology)"},
    "ntimes": {"type": ["integer", "null"], "minimum": 2, "default": 20,
               "description": "repetitions of each kernel"},
    "threads": {**_POSINT, "description": "OpenMP threads (default: cores per node)"},
    "samples": {**_POSINT, "default": 5, "description": "STREAM executions per thread "
                "count, each a sample"},
    "thread_counts": {"type": ["array", "null"], "minItems": 1,
                      "items": {"type": "integer", "minimum": 1},
                      "description": "Triad series (default 1, 2, 4, ... and all cores)"},
    "proc_bind": {"enum": ["spread", "close", "primary", "master", "true", None],
                  "default": "spread", "description": "OMP_PROC_BIND"},
    "places": {"type": ["string", "null"], "default": "cores", "description": "OMP_PLACES"},
})
OSU_SCHEMA = _strict({
    "spec": {**_SPEC, "default": "osu-micro-benchmarks", "description": "Spack spec, "
             "e.g. 'osu-micro-benchmarks +cuda' on a GPU partition"},
    "validate": {**_BOOL, "default": True, "description": "one launch with -c (OSU 7 data "
                 "validation; set false for OSU < 7) before the timed launches"},
    "validation_iterations": {**_POSINT, "default": 10,
                              "description": "-i of the validation launch"},
    "device": {"enum": ["cuda", "rocm", None],
               "description": "run from device buffers (-d DEVICE; needs a +cuda/+rocm build)"},
    "iterations": {**_POSINT, "description": "-i (default: OSU's own)"},
    "warmup": {**_POSINT, "description": "-x (default: OSU's own)"},
    "pairs": {**_POSINT, "description": "osu_mbw_mr pairs (default: ranks per node / 2)"},
    "samples": {**_POSINT, "default": 3, "description": "launches per benchmark, each a sample"},
    "sizes": {"type": ["object", "null"], "additionalProperties": _MSG_SIZES,
              "description": "gated message sizes (bytes, powers of two) per size set; "
              "a check names its set (osu_latency and osu_put_latency: latency)",
              "properties": {k: {**_MSG_SIZES, "default": v} for k, v in OSU_SIZES.items()},
              "default": {}},
})
_ALGO_NAMES = {"type": ["array", "null"], "minItems": 1,
               "items": {"type": "string", "pattern": r"^[A-Za-z0-9_]+$"}}
OSU_ALGORITHMS_SCHEMA = _strict({
    "mpi": {"enum": ["auto", "openmpi", "mpich", "cray-mpich", None], "default": "auto",
            "description": "the MPI whose algorithms are forced (auto: Open MPI when the "
            "job finds ompi_info, else name it)"},
    "collectives": {"type": ["array", "null"],
                    "items": {"enum": ["osu_allreduce", "osu_bcast", "osu_alltoall"]},
                    "default": ["osu_allreduce", "osu_bcast", "osu_alltoall"],
                    "description": "collectives swept ([] turns the sweep off)"},
    "only": {"type": ["object", "null"], "additionalProperties": False,
             "properties": {k: _ALGO_NAMES for k in ("allreduce", "bcast", "alltoall")},
             "default": {}, "description": "algorithm names per collective (default: every "
             "one the MPI offers; MPICH: MPICH 4's named algorithms)"},
    "rounds": {**_POSINT, "default": 3, "description": "launches of each algorithm, "
               "round-robin, each a sample"},
    "finding_ratio": {"type": ["number", "null"], "minimum": 1, "default": 1.2,
                      "description": "a default this many times the best algorithm's "
                      "time is named as a finding"},
})
STARTUP_SCHEMA = _strict({
    "launchers": {"type": ["array", "null"], "items": {"enum": ["srun", "mpirun"]},
                  "default": ["srun", "mpirun"], "description": "launchers the start-up sweep "
                  "runs under (srun only on Slurm partitions; mpirun with Open MPI's "
                  "--map-by ppr:N:node)"},
    "srun_options": {"type": ["array", "null"], "items": {"type": "string"}, "default": [],
                     "description": "options of every srun launch, e.g. --mpi=pmix where "
                     "Slurm's MpiDefault is none"},
    "mpirun_options": {"type": ["array", "null"], "items": {"type": "string"}, "default": [],
                       "description": "options of every mpirun launch"},
    "samples": {**_POSINT, "default": 5, "description": "rounds over every scale point, each "
                "a sample"},
    "iters": {**_POSINT, "default": 20, "description": "timed barriers per launch (the figures "
              "are MPI_Init and the first barrier; these only end the launch cleanly)"},
})
IOR_HINTS_SCHEMA = _strict({
    "mpi": {"enum": ["auto", "openmpi", "mpich", "cray-mpich", None], "default": "auto",
            "description": "settings that pick an Open MPI io component run only with "
            "auto or openmpi"},
    "settings": {"type": ["array", "null"], "items": {"type": "string",
                                                      "pattern": r"^[a-z0-9_]+$"},
                 "default": ["default", "romio_cb_enable", "romio_cb_disable",
                             "romio_cb_automatic", "romio_one_aggregator",
                             "romio_one_aggregator_per_node", "romio_cb_buffer_1m",
                             "ompio_vulcan", "ompio_individual", "lustre_striped"],
                 "description": "the settings swept (hpc_health/checklib/iohints.py; [] "
                 "turns the sweep off)"},
    "env": {"type": ["array", "null"], "items": {"type": "string", "pattern": r"^[A-Za-z_]\w*=.*$"},
            "default": [], "description": "NAME=value set in every rank of every setting, e.g. "
            "Cray MPICH's MPICH_MPIIO_HINTS_DISPLAY=1 (the library prints what it applied)"},
    "stripe_count": {"type": ["integer", "null"], "minimum": -1,
                     "description": "lfs setstripe -c for lustre_striped (unset: no Lustre, "
                     "SKIPPED)"},
    "stripe_size": {"type": ["string", "null"], "pattern": r"^[0-9]+[kKmMgG]?$",
                    "default": "1m", "description": "lfs setstripe -S"},
})
IOR_SCHEMA = _strict({
    "spec": {**_SPEC, "default": "ior", "description": "Spack spec; also provides mdtest"},
    "darshan": {**_BOOL, "default": True,
                "description": "instrument IOR and mdtest with Darshan"},
    "darshan_runtime_spec": {**_SPEC, "default": "darshan-runtime +mpi"},
    "darshan_util_spec": {**_SPEC, "default": "darshan-util"},
    "ranks_per_node": {**_POSINT, "description": "null: the partition's ranks_per_node"},
    "block_size": {**_BYTES, "default": "16m", "description": "-b per rank and segment"},
    "transfer_size": {**_BYTES, "default": "1m", "description": "-t"},
    "segments": {**_POSINT, "default": 4, "description": "-s"},
    "repetitions": {**_POSINT, "default": 3, "description": "-i, each repetition a sample"},
    "direct_io": {**_BOOL, "default": False,
                  "description": "--posix.odirect in the POSIX modes: the node's page "
                  "cache is not what is measured (node-local file systems)"},
    "posix_allowance": {"type": ["integer", "null"], "minimum": 0, "default": 65536,
                        "description": "bytes Darshan may see beyond IOR's own in the "
                        "POSIX module (MPI's shared-memory files)"},
})
MDTEST_SCHEMA = _strict({
    "ranks_per_node": {**_POSINT, "description": "null: the partition's ranks_per_node"},
    "items": {**_POSINT, "default": 1000, "description": "-n files and directories per rank"},
    "samples": {**_POSINT, "default": 3, "description": "launches of mdtest, each a sample"},
    "write_bytes": {"type": ["integer", "null"], "minimum": 0, "default": 0,
                    "description": "-w bytes written to each file"},
})

_POSNUM = {"type": ["number", "null"], "exclusiveMinimum": 0}
#: What a partition's nodes can do at best, as the site declares it (data
#: sheets, acceptance figures): ``compare --normalise`` shows each figure as
#: a fraction of it, so different machines compare fairly.  Per node.
CAPABILITIES_SCHEMA = _strict({
    "memory_bandwidth_mbs": {**_POSNUM, "description": "peak memory bandwidth of a node, MB/s"},
    "cores": {**_POSINT, "description": "cores per node"},
    "link_bandwidth_mbs": {**_POSNUM, "description": "link bandwidth of a node, MB/s"},
    "link_latency_us": {**_POSNUM, "description": "link latency, us"},
    "fs_bandwidth_mibs": {**_POSNUM, "description": "file-system bandwidth a node can "
                          "reach, MiB/s"},
})

SITE_SCHEMA = {
    "type": "object",
    "required": ["site", "reframe_config", "partitions"],
    "additionalProperties": False,
    "properties": {
        "site": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"},
        "description": {"type": "string"},
        "reframe_config": {"type": "string"},
        "reframe_options": {"type": "array", "items": {"type": "string"}},
        # --per-node: smallest difference from the peers that names a node
        # (default hpc_health.judge.pernode.MIN_CHANGE).
        "per_node_min_change": {"type": "number", "exclusiveMinimum": 0},
        # Run the session this many times (ReFrame --reruns) and judge each
        # figure on the samples of all its rounds (default 1): the samples
        # of a check are then spread over the whole session, across noise
        # episodes.  Reference captures run with the same rounds.
        "rounds": {"type": "integer", "minimum": 1, "maximum": 100, "default": 1},
        # --per-node: the same for per-node runs (default 1).
        "per_node_rounds": {"type": "integer", "minimum": 1, "maximum": 100, "default": 1},
        # --per-node, nightly: drain the nodes named OUTLIER (as --drain) and
        # resume the nodes hpc-health drained once found healthy (as
        # --resume-healthy); off by default (docs/per-node.md).
        "per_node_drain": {"type": "boolean", "default": False},
        "per_node_resume_healthy": {"type": "boolean", "default": False},
        # At most this share of a partition's nodes drained by hpc-health at
        # once, at least one node (hpc_health.judge.nodeguard.DRAIN_SHARE).
        "per_node_drain_share": {"type": "number", "exclusiveMinimum": 0, "maximum": 1,
                                 "default": 0.1},
        # Runs on hardware no reference was measured on collect a baseline;
        # after this many, `reference capture` is proposed (or done, with
        # `run --adopt-baseline`).
        "baseline_runs": {"type": "integer", "minimum": 1, "maximum": 200, "default": 5},
        # A captured reference whose minimum detectable change is above this
        # (a fraction) is marked weak in the file and in every run's table,
        # with the number of baseline runs that would bring it under.
        "reference_max_mdc": {"type": "number", "exclusiveMinimum": 0, "maximum": 10,
                              "default": 0.5},
        # ReFrame's own results database (``reframe --list-stored-sessions``,
        # ``--performance-compare``); null: reframe-results.db in the store.
        "reframe_results_db": _PATH,
        "spack": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "environment": {"type": "string"},
                "install_tree": _PATH,
                "env_dir": _PATH,
                "builtin_repo": _PATH,
                "bootstrap_mirror": _PATH,
                "source_mirror": _PATH,
                "spack_root": _PATH,
                # An offline kit to bootstrap Spack from when none is found
                # (or $HPC_HEALTH_SPACK_KIT): `hpc-health spack setup`.
                "kit": _PATH,
                # Spec sets built at once before the checks (null: two, one
                # more per 8 cores up to 4); 1: each built by ReFrame just
                # before its first check.
                "parallel_builds": {"type": ["integer", "null"], "minimum": 1, "maximum": 16},
                # Packages built from a local source tree (Spack's `stream`
                # has no tarball, only a git URL): name -> "path@version".
                "develop": {
                    "type": ["object", "null"],
                    "additionalProperties": {"type": "string",
                                             "pattern": r"^.+@[^@/]+$"},
                },
            },
        },
        "partitions": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "nodes": {**_POSINT, "default": 1},
                    # What the partition's nodes are: references are bound
                    # to it.  `detect`: this host (sites whose jobs run here).
                    "hardware": {"oneOf": [
                        {"const": "detect"},
                        {"type": "null"},
                        {"type": "object", "additionalProperties": False,
                         "required": ["cpu"],
                         "properties": {"cpu": {"type": "string", "minLength": 1},
                                        "cpus": {"type": "integer", "minimum": 1},
                                        "memory_gib": {"type": "number", "exclusiveMinimum": 0}}},
                    ]},
                    "ranks_per_node": _POSINT,
                    "scratch": _PATH,
                    # The Slurm partition (default: the same name): whose
                    # nodes --per-node --resume-healthy tests again.
                    "slurm_partition": {"type": "string", "minLength": 1},
                    "capabilities": CAPABILITIES_SCHEMA,
                    "kernels": KERNELS_SCHEMA,
                    "stream": STREAM_SCHEMA,
                    "osu": OSU_SCHEMA,
                    "osu_algorithms": OSU_ALGORITHMS_SCHEMA,
                    "startup": STARTUP_SCHEMA,
                    "ior": IOR_SCHEMA,
                    "ior_hints": IOR_HINTS_SCHEMA,
                    "mdtest": MDTEST_SCHEMA,
                },
            },
        },
    },
}



def with_defaults(schema, value):
    """*value* (validated against *schema*) with every missing or null key
    that has a ``default`` set to it: the one place defaults come from."""
    if value is None and "default" in schema:
        value = copy.deepcopy(schema["default"])
    if not isinstance(value, dict):
        return value
    props = schema.get("properties") or {}
    out = dict(value)
    for key, sub in props.items():
        filled = with_defaults(sub, out.get(key))
        if filled is not None or key in out:
            out[key] = filled
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key in out:
            if key not in props:
                out[key] = with_defaults(extra, out[key])
    return out
