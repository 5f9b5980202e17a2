"""Sites: one folder under site_configs/ holds everything site-specific.

``site.yaml`` is validated before anything runs so that a mistake is reported
with its file, key path and line instead of surfacing as a ReFrame traceback
in the middle of the night.
"""

import ast
import copy
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path

from hpc_health import paths
from hpc_health.errors import ConfigError
from hpc_health.site import hardware, yamlio

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
    "validate": {**_BOOL, "default": True, "description": "pass -c (OSU 7 data "
                 "validation; set false for OSU < 7)"},
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
        # (default hpc_health.pernode.MIN_CHANGE).
        "per_node_min_change": {"type": "number", "exclusiveMinimum": 0},
        # Run the session this many times (ReFrame --reruns) and judge each
        # figure on the samples of all its rounds (default 1): the samples
        # of a check are then spread over the whole session, across noise
        # episodes.  Reference captures run with the same rounds.
        "rounds": {"type": "integer", "minimum": 1, "maximum": 100, "default": 1},
        # --per-node: the same for per-node runs (default 1).
        "per_node_rounds": {"type": "integer", "minimum": 1, "maximum": 100, "default": 1},
        # Runs on hardware no reference was measured on collect a baseline;
        # after this many, `reference capture` is proposed (or done, with
        # `run --adopt-baseline`).
        "baseline_runs": {"type": "integer", "minimum": 1, "maximum": 200, "default": 5},
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
                    "capabilities": CAPABILITIES_SCHEMA,
                    "kernels": KERNELS_SCHEMA,
                    "stream": STREAM_SCHEMA,
                    "osu": OSU_SCHEMA,
                    "ior": IOR_SCHEMA,
                    "mdtest": MDTEST_SCHEMA,
                },
            },
        },
    },
}


@dataclass
class Site:
    name: str
    dir: Path
    settings: dict
    reframe_config: Path
    spack_env: Path = None
    partitions: dict = field(default_factory=dict)
    chosen_because: str = "--site"

    @property
    def settings_file(self):
        return self.dir / "site.yaml"

    @property
    def reference_file(self):
        return paths.repo_root() / "reference" / f"{self.name}.yaml"

    def spack_setting(self, key):
        value = (self.settings.get("spack") or {}).get(key)
        return None if value is None else str(paths.expand(value, self.dir))


def sites_dir():
    return paths.repo_root() / "site_configs"


def available():
    d = sites_dir()
    return sorted(p.name for p in d.iterdir() if (p / "site.yaml").is_file()) if d.is_dir() else []


def site_dir(name_or_path):
    p = Path(name_or_path)
    if p.is_dir() and (p / "site.yaml").is_file():
        return p.resolve()
    d = sites_dir() / str(name_or_path)
    if not (d / "site.yaml").is_file():
        known = ", ".join(available()) or "none"
        raise ConfigError(d / "site.yaml",
                          f"no such site {name_or_path!r} (known sites: {known})")
    return d.resolve()


def hostname_patterns(site_name):
    """The ``hostnames`` patterns of a site's ReFrame configuration, read
    without running it (it may import ReFrame or probe the machine)."""
    path = sites_dir() / site_name / "reframe_config.py"
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (OSError, SyntaxError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if (isinstance(key, ast.Constant) and key.value == "hostnames"
                        and isinstance(value, (ast.List, ast.Tuple))):
                    found += [e.value for e in value.elts
                              if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return found


def _matches_host(patterns, host):
    """ReFrame's rule (re.match), ignoring catch-all patterns: a site that
    matches any host (``local``) is never chosen for a host by its name."""
    probe = "hpc-health-no-such-host-0"
    return any(re.match(p, host) and not re.match(p, probe) for p in patterns)


def choose(explicit=None, host=None):
    """(site name, why) for a command without a usable ``--site``:
    ``$HPC_HEALTH_SITE``, else the one site whose ReFrame hostnames match
    this host, else ``local``.  A login node of a real site must not run the
    suite as ``local`` (mpirun on the login node) by accident."""
    if explicit:
        return explicit, "--site"
    env = os.environ.get("HPC_HEALTH_SITE")
    if env:
        return env, "$HPC_HEALTH_SITE"
    host = host or socket.gethostname()
    matches = [s for s in available() if _matches_host(hostname_patterns(s), host)]
    if len(matches) > 1:
        raise ConfigError(sites_dir(), f"host {host} matches the ReFrame hostnames of "
                          f"sites {', '.join(matches)}: choose one with --site or "
                          "$HPC_HEALTH_SITE")
    if matches:
        return matches[0], f"chosen because its ReFrame hostnames match {host}"
    return "local", f"chosen because no site's ReFrame hostnames match {host}"


def load(name_or_path):
    """Load and validate a site; raises ConfigError naming file and line."""
    d = site_dir(name_or_path)
    doc = yamlio.load(d / "site.yaml")
    yamlio.validate(doc, SITE_SCHEMA)
    s = doc.data
    if s["site"] != d.name:
        raise doc.error(["site"], f"is {s['site']!r} but the folder is {d.name!r}; "
                        "they must match (the ReFrame system is named after the site)")
    _check_benchmark_settings(doc)
    rcfg = d / s["reframe_config"]
    if not rcfg.is_file():
        raise doc.error(["reframe_config"], f"file {rcfg} does not exist")
    spack_env = None
    spack = s.get("spack") or {}
    if spack.get("environment"):
        spack_env = d / spack["environment"]
        if not spack_env.is_file():
            raise doc.error(["spack", "environment"], f"file {spack_env} does not exist")
        env_doc = yamlio.load(spack_env)
        if not isinstance(env_doc.data, dict) or "spack" not in env_doc.data:
            raise env_doc.error([], "a Spack environment file needs a top-level 'spack:' key")
    s = with_defaults(SITE_SCHEMA, s)
    return Site(name=s["site"], dir=d, settings=s, reframe_config=rcfg,
                spack_env=spack_env, partitions=s["partitions"])


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


def _check_benchmark_settings(doc):
    """What the schema cannot say about the benchmark settings."""
    for pname, part in (doc.data.get("partitions") or {}).items():
        part = part or {}
        sizes = ((part.get("osu") or {}).get("sizes") or {})
        for bench, values in sizes.items():
            for i, size in enumerate(values or []):
                if size & (size - 1):
                    raise doc.error(["partitions", pname, "osu", "sizes", bench, i],
                                    f"{size} is not a power of two; OSU measures only "
                                    "powers of two between -m MIN and MAX")
        spec = (part.get("stream") or {}).get("spec") or ""
        for variant in ("stream_array_size", "ntimes"):
            if variant in spec:
                raise doc.error(["partitions", pname, "stream", "spec"],
                                f"sets {variant}; the check derives it (use "
                                "stream.array_size / stream.ntimes instead)")


def _bootstrap_defaults(spack):
    """Where the checks will use a Spack bootstrapped from a kit, what the
    site leaves unset comes from the kit: the builtin repository, the source
    mirror, the trees built from local sources."""
    from hpc_health.site import spack_kit
    rec = spack_kit.record()
    if not rec or spack_kit.find_spack(spack.get("spack_root")) != rec["spack"]:
        return
    for key in ("builtin_repo", "source_mirror"):
        spack[key] = spack.get(key) or rec.get(key)
    spack["develop"] = {**(rec.get("develop") or {}), **spack["develop"]}


def results_db(site):
    """Where ReFrame keeps this site's sessions: the site setting, else
    ``reframe-results.db`` in the store (next to the runs it judged)."""
    given = site.settings.get("reframe_results_db")
    if given:
        return paths.expand(given, site.dir)
    return paths.store_root() / "reframe-results.db"


def reframe_storage(site_dir_path):
    """ReFrame's ``storage`` configuration for a site's ReFrame config:
    results storage on, in :func:`results_db`."""
    site = load(site_dir_path)
    return [{"enable": True, "backend": "sqlite",
             "sqlite_db_file": str(results_db(site))}]


def partition_extras(site_dir_path, partition):
    """Partition ``extras`` for a site's ReFrame configuration.

    Checks read every site setting from here, so check code never names a
    site, a partition or a path.
    """
    site = load(site_dir_path)
    if partition not in site.partitions:
        raise ConfigError(site.settings_file,
                          f"partition {partition!r} of the ReFrame configuration is not "
                          "listed under 'partitions'", keypath="partitions")
    settings = dict(site.partitions[partition] or {})
    settings["hardware"] = hardware.of_partition(settings.get("hardware"), settings["nodes"])
    if settings.get("scratch"):
        settings["scratch"] = str(paths.expand(settings["scratch"], site.dir))
    spack = {k: site.spack_setting(k) for k in
             ("install_tree", "env_dir", "builtin_repo", "bootstrap_mirror",
              "source_mirror", "spack_root")}
    spack["environment"] = str(site.spack_env) if site.spack_env else None
    # Develop paths stay as written: spackenv resolves relative ones against
    # the site folder on the machine that builds.
    spack["develop"] = dict((site.settings.get("spack") or {}).get("develop") or {})
    _bootstrap_defaults(spack)
    return {"hpc_health": {
        "site": site.name,
        "site_dir": str(site.dir),
        "repo_root": str(paths.repo_root()),
        "spack": spack,
        **settings,
    }}
