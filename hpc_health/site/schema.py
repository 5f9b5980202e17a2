"""The schema of ``site.yaml``: every setting, its type and its default.

Only the site-wide keys are here.  Each benchmark declares its own settings
(``partitions.<p>.<section>``, e.g. ``stream``, ``osu``) beside its parser
(:mod:`hpc_health.parsers.registry`), and :data:`SITE_SCHEMA` is assembled
from those declarations: a new benchmark edits no module here, and loading a
site imports no ReFrame.  Every key is optional, and null means the default:
the schema's ``default`` is the one place defaults live (filled in by
:func:`with_defaults` before a check sees them).  A key without a default is
derived by the check from the partition (cores, caches), as its description
says.
"""

import copy

from hpc_health.parsers import registry
from hpc_health.parsers.registry import PATH, POSINT, strict

_POSNUM = {"type": ["number", "null"], "exclusiveMinimum": 0}
#: What a partition's nodes can do at best, as the site declares it (data
#: sheets, acceptance figures): ``compare --normalise`` shows each figure as
#: a fraction of it, so different machines compare fairly.  Per node.
CAPABILITIES_SCHEMA = strict({
    "memory_bandwidth_mbs": {**_POSNUM, "description": "peak memory bandwidth of a node, MB/s"},
    "cores": {**POSINT, "description": "cores per node"},
    "link_bandwidth_mbs": {**_POSNUM, "description": "link bandwidth of a node, MB/s"},
    "link_latency_us": {**_POSNUM, "description": "link latency, us"},
    "fs_bandwidth_mibs": {**_POSNUM, "description": "file-system bandwidth a node can "
                          "reach, MiB/s"},
})

#: A partition's own keys; each benchmark's sections come beside them, as its
#: parser module declares them (a section may not take one of these names).
PARTITION_KEYS = {
    "nodes": {**POSINT, "default": 1},
    # What the partition's nodes are: references are bound to it.  `detect`:
    # this host (sites whose jobs run here).
    "hardware": {"oneOf": [
        {"const": "detect"},
        {"type": "null"},
        {"type": "object", "additionalProperties": False,
         "required": ["cpu"],
         "properties": {"cpu": {"type": "string", "minLength": 1},
                        "cpus": {"type": "integer", "minimum": 1},
                        "memory_gib": {"type": "number", "exclusiveMinimum": 0}}},
    ]},
    "ranks_per_node": POSINT,
    "scratch": PATH,
    # The Slurm partition (default: the same name): whose nodes
    # --per-node --resume-healthy tests again.
    "slurm_partition": {"type": "string", "minLength": 1},
    "capabilities": CAPABILITIES_SCHEMA,
}

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
        # Failing nights per site-month the gate may raise on a healthy
        # machine: its one-night rule, its persistence rule and BROADLY WORSE
        # share it, and the gated checks share each night's part (budget_weights).
        "false_alarm_budget": {"type": "number", "exclusiveMinimum": 0, "maximum": 15,
                               "default": 1.0},
        # How the checks share that budget, per check (1 each unless given):
        # {StreamBandwidth: 3} gives STREAM three checks' share, and so more
        # power, and every other check a little less; the whole stays the
        # budget.
        "budget_weights": {"type": "object",
                           "additionalProperties": {"type": "number", "exclusiveMinimum": 0,
                                                    "maximum": 1000}},
        # A figure that fails on one night alone is measured again before
        # the night is closed, and fails only if its retest does too
        # (hpc_health.judge.confirm); false: no retest.
        "retest": {"type": "boolean", "default": True},
        # A site's own tolerance per check or figure ("Check" or
        # "Check/variable"), ReFrame's convention: -0.1 fails a figure 10 %
        # worse, when the noise allows the gate to see that much.
        "tolerance": {"type": "object",
                      "additionalProperties": {"type": "number", "minimum": -0.99,
                                               "maximum": 10}},
        # ReFrame's own results database (``reframe --list-stored-sessions``,
        # ``--performance-compare``); null: reframe-results.db in the store.
        "reframe_results_db": PATH,
        "spack": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "environment": {"type": "string"},
                "install_tree": PATH,
                "env_dir": PATH,
                "builtin_repo": PATH,
                "bootstrap_mirror": PATH,
                "source_mirror": PATH,
                "spack_root": PATH,
                # An offline kit to bootstrap Spack from when none is found
                # (or $HPC_HEALTH_SPACK_KIT): `hpc-health spack setup`.
                "kit": PATH,
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
                "properties": {**PARTITION_KEYS, **registry.settings()},
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
