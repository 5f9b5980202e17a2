"""IOR output, default text or ``-O summaryFormat=JSON`` (detected).

``parse_ior(text)`` returns::

    {"format": "text" | "json", "version": "4.1.0+dev", "command_line": str,
     "parameters": {"api", "blockSize", "transferSize", "segmentCount",
                    "numTasks", "tasksPerNode", "repetitions", "nodes",
                    "filePerProc": bool, "collective": bool, "testFileName"},
     "aggregate_bytes": int,
     "operations": {"write" | "read": {
         "bw_max_mib", "bw_min_mib", "bw_mean_mib", "bw_stddev_mib",
         "ops_max", "ops_min", "ops_mean", "ops_stddev",
         "mean_time_s", "aggregate_mib", "iterations",
         "bw_mib", "iops", "latency_s", "open_time_s", "wrrd_time_s",
         "close_time_s", "total_time_s",
         "bw_mib_iterations", ... "total_time_s_iterations"}}}

``parameters`` keep IOR's own names (those of its JSON "Parameters" and
"summary") so they can be looked up in IOR's documentation.  The figures from
``bw_max_mib`` to ``aggregate_mib`` are IOR's summary (MiB/s, OPs/s, s, MiB);
``bw_mib`` to ``total_time_s`` are means over the iterations of IOR's
per-iteration results, and each ``<figure>_iterations`` is the list of
those per-iteration values, in order (the samples of a run).  ``aggregate_bytes`` is what
IOR was asked to move per
operation, blockSize x segmentCount x numTasks (IOR's "aggregate filesize"),
the figure a Darshan check compares with the bytes Darshan saw.

Only single-test runs are read; an output holding several tests (-f script)
is refused rather than merged.
"""

import json
import re

from . import ParseError
from ._text import check_text, fail, integer, number
from .registry import BOOL, BYTES, MPI, POSINT, SPEC, Benchmark, strict

_TEXT_TITLE = re.compile(r"^IOR-(\S+): MPI Coordinated Test of Parallel I/O", re.MULTILINE)
_ERROR = re.compile(r"^ERROR:.*$", re.MULTILINE)
_SUMMARY_FILE = re.compile(r"^Writing output to (\S+)", re.MULTILINE)
_OPERATIONS = ("write", "read")

# Both formats are brought to the JSON names, then read by the same code.
# Text "Summary of all tests:" header, in IOR 4's order (StdDev twice).
_TEXT_SUMMARY = (
    ("Operation", "operation"), ("Max(MiB)", "bwMaxMIB"), ("Min(MiB)", "bwMinMIB"),
    ("Mean(MiB)", "bwMeanMIB"), ("StdDev", "bwStdMIB"), ("Max(OPs)", "OPsMax"),
    ("Min(OPs)", "OPsMin"), ("Mean(OPs)", "OPsMean"), ("StdDev", "OPsSD"),
    ("Mean(s)", "MeanTime"), ("Stonewall(s)", "StonewallTime"),
    ("Stonewall(MiB)", "StonewallMiB"), ("Test#", "TestID"), ("#Tasks", "numTasks"),
    ("tPN", "tasksPerNode"), ("reps", "repetitions"), ("fPP", "filePerProc"),
    ("reord", "reorderTasks"), ("reordoff", "taskPerNodeOffset"),
    ("reordrand", "reorderTasksRandom"), ("seed", "reorderTasksRandomSeed"),
    ("segcnt", "segmentCount"), ("blksiz", "blockSize"), ("xsize", "transferSize"),
    ("aggs(MiB)", "xsizeMiB"), ("API", "API"), ("RefNum", "ReferenceNumber"),
)
# Text "Results:" header -> JSON "Results" keys
_TEXT_RESULTS = {
    "access": "access", "bw(MiB/s)": "bwMiB", "IOPS": "iops", "Latency(s)": "latency",
    "block(KiB)": "blockKiB", "xfer(KiB)": "xferKiB", "open(s)": "openTime",
    "wr/rd(s)": "wrRdTime", "close(s)": "closeTime", "total(s)": "totalTime",
    "iter": "iter",
}
_SUMMARY_FIGURES = (
    ("bwMaxMIB", "bw_max_mib"), ("bwMinMIB", "bw_min_mib"),
    ("bwMeanMIB", "bw_mean_mib"), ("bwStdMIB", "bw_stddev_mib"),
    ("OPsMax", "ops_max"), ("OPsMin", "ops_min"),
    ("OPsMean", "ops_mean"), ("OPsSD", "ops_stddev"),
    ("MeanTime", "mean_time_s"), ("xsizeMiB", "aggregate_mib"),
)
_ITERATION_FIGURES = (
    ("bwMiB", "bw_mib"), ("iops", "iops"), ("latency", "latency_s"),
    ("openTime", "open_time_s"), ("wrRdTime", "wrrd_time_s"),
    ("closeTime", "close_time_s"), ("totalTime", "total_time_s"),
)
# a second test would repeat the operation names with other values of these
_PER_TEST = ("TestID", "numTasks", "tasksPerNode", "repetitions", "filePerProc",
             "segmentCount", "blockSize", "transferSize", "API")


def parse_ior(text):
    check_text(text, "IOR")
    # IOR reports every fatal problem as "ERROR: ..." and then aborts
    error = _ERROR.search(text)
    if error:
        raise ParseError(f"IOR failed: {error.group(0).strip()!r}")
    brace = re.search(r"^\s*\{", text, re.MULTILINE)
    title = _TEXT_TITLE.search(text)
    if brace and (not title or brace.start() < title.start()):
        return _parse_json(text, brace.start())
    if title:
        return _parse_text(text, title.group(1))
    written = _SUMMARY_FILE.search(text)
    if written:
        raise ParseError(
            f"IOR wrote its results to {written.group(1)}; parse that file instead"
        )
    raise fail("no IOR output (neither the text title nor a JSON document)", text)


# ---------------------------------------------------------------- text format

def _parse_text(text, version):
    lines = text.splitlines()
    options = _text_options(lines)
    summary = _text_summary(lines)
    results = _text_results(lines)
    test = {
        "nodes": _integer(_required(options, "nodes"), "nodes"),
        "collective": _required(options, "type") == "collective",
        "testFileName": _required(options, "test filename"),
    }
    return _build("text", version, _required(options, "Command line"),
                  test, summary, results)


def _text_options(lines):
    # "key   : value" lines of the header and of the "Options:" block
    options = {}
    for line in lines:
        match = re.match(r"^(\S.*?)\s*: (.*)$", line)
        if match and match.group(1) not in options:
            options[match.group(1)] = match.group(2).strip()
    return options


def _text_summary(lines):
    start = _index(lines, "Summary of all tests:",
                   "IOR output has no 'Summary of all tests:' table (truncated?)")
    labels = [label for label, _ in _TEXT_SUMMARY]
    if start + 1 >= len(lines) or lines[start + 1].split() != labels:
        raise ParseError("IOR summary header is missing or not in the IOR 4 layout")
    rows = []
    for line in lines[start + 2:]:
        if line.startswith("Finished"):
            return rows
        cells = line.split()
        if not cells:
            continue
        if len(cells) != len(labels) or cells[0] not in _OPERATIONS:
            raise ParseError(f"IOR summary row is garbled: {line.strip()!r}")
        rows.append({key: cell for (_, key), cell in zip(_TEXT_SUMMARY, cells)})
    # IOR prints "Finished" right after the summary; without it rows may be lost
    raise ParseError("IOR output has no 'Finished' line after the summary (truncated?)")


def _text_results(lines):
    start = _index(lines, "access    bw(MiB/s)",
                   "IOR output has no 'Results:' table (truncated?)")
    header = lines[start].split()
    unknown = [label for label in header if label not in _TEXT_RESULTS]
    if unknown:
        raise ParseError(f"IOR results table has unknown columns {unknown}")
    keys = [_TEXT_RESULTS[label] for label in header]
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("Summary of all tests"):
            break
        cells = line.split()
        if cells and cells[0] in _OPERATIONS:
            if len(cells) != len(keys):
                raise ParseError(f"IOR results row is garbled: {line.strip()!r}")
            rows.append(dict(zip(keys, cells)))
    return rows


def _index(lines, prefix, message):
    for index, line in enumerate(lines):
        if line.startswith(prefix):
            return index
    raise ParseError(message)


def _required(options, key):
    if key not in options:
        raise ParseError(f"IOR output has no {key!r} line")
    return options[key]


# ---------------------------------------------------------------- JSON format

def _parse_json(text, start):
    try:
        document, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as error:
        raise ParseError(f"IOR JSON output is truncated or garbled: {error}") from None
    if not isinstance(document, dict):
        raise ParseError("IOR JSON output is not an object")
    for key in ("tests", "summary", "Finished"):
        if key not in document:
            raise ParseError(f"IOR JSON output has no {key!r} (truncated?)")
    tests = document["tests"]
    if not isinstance(tests, list) or len(tests) != 1:
        raise ParseError("IOR JSON output must hold exactly one test")
    params = _get(tests[0], "Parameters")
    test = {
        "nodes": _integer(_get(params, "nodes"), "nodes"),
        "collective": bool(_integer(_get(params, "collective"), "collective")),
        "testFileName": _get(params, "testFileName"),
    }
    results = list(_flatten(_get(tests[0], "Results")))
    return _build("json", document.get("Version"), document.get("Command line"),
                  test, document["summary"], results)


def _flatten(results):
    # IOR prints one list per repetition in some versions, a flat list in others
    for item in results:
        if isinstance(item, list):
            yield from _flatten(item)
        else:
            yield item


def _get(mapping, key):
    if not isinstance(mapping, dict) or key not in mapping:
        raise ParseError(f"IOR JSON output has no {key!r}")
    return mapping[key]


# ---------------------------------------------------------------- shared

def _build(fmt, version, command_line, test, summary, results):
    by_op = {}
    for row in summary:
        op = _get(row, "operation")
        if op in by_op:
            raise ParseError("IOR output holds several tests; only single-test runs are read")
        by_op[op] = row
    if not by_op:
        raise ParseError("IOR summary has no rows")
    for key in _PER_TEST:
        values = {str(row.get(key)) for row in by_op.values()}
        if len(values) > 1:
            raise ParseError(f"IOR summary rows disagree on {key}; several tests?")

    first = next(iter(by_op.values()))
    parameters = {
        "api": str(_get(first, "API")),
        "blockSize": _integer(_get(first, "blockSize"), "blockSize"),
        "transferSize": _integer(_get(first, "transferSize"), "transferSize"),
        "segmentCount": _integer(_get(first, "segmentCount"), "segmentCount"),
        "numTasks": _integer(_get(first, "numTasks"), "numTasks"),
        "tasksPerNode": _integer(_get(first, "tasksPerNode"), "tasksPerNode"),
        "repetitions": _integer(_get(first, "repetitions"), "repetitions"),
        "nodes": test["nodes"],
        "filePerProc": bool(_integer(_get(first, "filePerProc"), "filePerProc")),
        "collective": test["collective"],
        "testFileName": test["testFileName"],
    }
    operations = {}
    for op, row in by_op.items():
        figures = {ours: _number(_get(row, key), f"{op} {key}")
                   for key, ours in _SUMMARY_FIGURES}
        iterations = [r for r in results if _get(r, "access") == op]
        figures.update(_means(op, iterations, parameters["repetitions"]))
        operations[op] = figures
    return {
        "format": fmt,
        "version": version,
        "command_line": command_line,
        "parameters": parameters,
        "aggregate_bytes": (parameters["blockSize"] * parameters["segmentCount"]
                            * parameters["numTasks"]),
        "operations": operations,
    }


def _means(op, rows, repetitions):
    if len(rows) != repetitions:
        raise ParseError(
            f"IOR shows {len(rows)} {op} result rows for {repetitions} repetitions"
        )
    means = {"iterations": len(rows)}
    for key, ours in _ITERATION_FIGURES:
        if any(key not in row for row in rows):
            means[ours] = None  # older IOR versions print fewer columns
            continue
        values = [_number(row[key], f"{op} {key}") for row in rows]
        non_finite = [value for value in values if isinstance(value, str)]
        means[ours] = non_finite[0] if non_finite else sum(values) / len(values)
        means[f"{ours}_iterations"] = values
    return means


def _number(value, what):
    if isinstance(value, bool):
        raise ParseError(f"IOR {what} is not a number: {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    return number(str(value), f"IOR {what}")


def _integer(value, what):
    if isinstance(value, bool):
        raise ParseError(f"IOR {what} is not an integer: {value!r}")
    if isinstance(value, int):
        return value
    return integer(str(value), f"IOR {what}")


_HINTS = re.compile(r"^hints (passed to MPI_File_open\(\)|returned from opened file) \{\n"
                    r"((?:[^\n}]*\n)*?)\}", re.MULTILINE)


def ior_hints(text):
    """The MPI-IO hints of each open IOR showed (``-H``): ``{"passed":
    [{hint: value}, ...], "returned": [...]}``, one dict per open, in order.
    "returned" is ``MPI_File_get_info`` on the open file: what the library
    says it holds (Open MPI 4 echoes what was passed; ROMIO elsewhere lists
    every hint it applied)."""
    out = {"passed": [], "returned": []}
    for kind, body in _HINTS.findall(text):
        hints = {}
        for line in body.splitlines():
            key, sep, value = line.strip().partition(" = ")
            if sep:
                hints[key] = value.strip()
        out["passed" if kind.startswith("passed") else "returned"].append(hints)
    return out


# --- what the core needs of IOR (and of Darshan around it) ---------------------------

SETTINGS = strict({
    "spec": {**SPEC, "default": "ior", "description": "Spack spec; also provides mdtest"},
    "darshan": {**BOOL, "default": True,
                "description": "instrument IOR and mdtest with Darshan"},
    "darshan_runtime_spec": {**SPEC, "default": "darshan-runtime +mpi"},
    "darshan_util_spec": {**SPEC, "default": "darshan-util"},
    "ranks_per_node": {**POSINT, "description": "null: the partition's ranks_per_node"},
    "block_size": {**BYTES, "default": "16m", "description": "-b per rank and segment"},
    "transfer_size": {**BYTES, "default": "1m", "description": "-t"},
    "segments": {**POSINT, "default": 4, "description": "-s"},
    "repetitions": {**POSINT, "default": 3, "description": "-i, each repetition a sample"},
    "direct_io": {**BOOL, "default": False,
                  "description": "--posix.odirect in the POSIX modes: the node's page "
                  "cache is not what is measured (node-local file systems)"},
    "posix_allowance": {"type": ["integer", "null"], "minimum": 0, "default": 65536,
                        "description": "bytes Darshan may see beyond IOR's own in the "
                        "POSIX module (MPI's shared-memory files)"},
})
HINTS_SETTINGS = strict({
    "mpi": {**MPI, "description": "settings that pick an Open MPI io component run only "
            "with auto or openmpi"},
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

BENCHMARK = Benchmark(parsers={"ior": parse_ior},
                      settings={"ior": SETTINGS, "ior_hints": HINTS_SETTINGS},
                      # IOR (with mdtest) in an offline kit's mirror: the
                      # version Spack picks and the one a site may pin.
                      mirrored=("ior@3.3.0", "ior@4.0.0"))
