"""OSU Micro-Benchmarks output (5.x and 7.x, point-to-point and collectives).

``parse_osu(text)`` returns::

    {"benchmark": "OSU MPI Latency Test", "version": "7.4",
     "kind": "latency" | "bandwidth" | "bibw" | "mbw_mr" | "collective" | "barrier",
     "datatype": "MPI_CHAR" | None, "pairs": int | None, "window_size": int | None,
     "columns": ["size", "avg_latency_us", ...],
     "rows": [{"size": 1, "avg_latency_us": 0.14, ...}, ...],
     "max_size": int | None}

Column keys: ``size``; ``avg_latency_us`` (OSU 7 "Avg Latency(us)", and also
the 5.x pt2pt "Latency (us)" column, which holds the same mean, so checks need
not care about the version); ``min_latency_us``, ``max_latency_us``,
``iterations`` (-f); ``bandwidth_mbs`` ("Bandwidth (MB/s)" and mbw_mr's
"MB/s"); ``messages_per_s``; ``p50_latency_us``/``p99_bandwidth_mbs``... (-z);
``validation`` ("Pass"/"Fail", -c); other headers are slugged ("Pure
Comm.(us)" -> ``pure_comm_us``).  ``size``, ``iterations`` and
``transmit_size`` are ints, ``validation`` a string, the rest floats.

Barrier prints no size column: its rows have no "size" and max_size is None.

A table that stops early at a line boundary looks exactly like a run with a
smaller -m, so parse_osu cannot see it; :func:`require_complete` does, given
the size the check asked for.
"""

import re

from . import ParseError
from ._text import check_text, fail, fatal_line, integer, number, require_terminated
from .registry import BOOL, MPI, POSINT, SPEC, Benchmark, KitSource, strict

_TITLE = re.compile(r"^# (OSU .+?) v(\d+(?:\.\d+)*\S*)\s*$")
_DATATYPE = re.compile(r"^# Datatype:\s*(\S+?)\.?\s*$")
_PAIRS = re.compile(r"^# \[ pairs: (\d+) \] \[ window size: (\d+) \]")
_INT_COLUMNS = {"size", "iterations", "transmit_size"}
_STR_COLUMNS = {"validation"}
_KNOWN = {
    "size": "size",
    "latency (us)": "avg_latency_us",
    "avg latency(us)": "avg_latency_us",
    "min latency(us)": "min_latency_us",
    "max latency(us)": "max_latency_us",
    "iterations": "iterations",
    "bandwidth (mb/s)": "bandwidth_mbs",
    "mb/s": "bandwidth_mbs",
    "messages/s": "messages_per_s",
    "validation": "validation",
}
_TAIL = re.compile(r"^p(\d+) tail (lat\(us\)|bw\(mb/s\))$")
_COLLECTIVE_WORDS = re.compile(
    r"reduce|bcast|broadcast|gather|scatter|all-?to-?all|scan|neighbo", re.IGNORECASE
)


def parse_osu(text):
    check_text(text, "OSU")
    killed = fatal_line(text)
    title = datatype = pairs = header = None
    rows = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            if rows:
                raise ParseError(
                    f"OSU output holds more than one result table (at {stripped!r})"
                )
            if _TITLE.match(stripped):
                title = _TITLE.match(stripped)
            elif _DATATYPE.match(stripped):
                datatype = _DATATYPE.match(stripped).group(1)
            elif _PAIRS.match(stripped):
                pairs = _PAIRS.match(stripped)
            elif title:
                # the column header is the last comment line before the rows
                header = stripped
            continue
        if header and _looks_numeric(stripped.split()[0]):
            rows.append(stripped)

    if killed:
        # quote the first complaint: the benchmark's own reason precedes mpirun's
        raise fail("OSU run was aborted", text)
    if not title:
        raise fail("no OSU result table (no '# OSU ... vX.Y' title)", text)
    if not header:
        raise fail(f"no OSU result table after {title.group(0)!r}", text)
    if not rows:
        raise fail(f"OSU table header but no result rows ({header!r})", text)
    require_terminated(text, "OSU")

    columns = _columns(header)
    parsed_rows = [_row(line, columns) for line in rows]
    sized = columns[0] == "size"
    if sized:
        sizes = [row["size"] for row in parsed_rows]
        if sizes != sorted(set(sizes)):
            raise ParseError(f"OSU message sizes are not strictly increasing: {sizes}")
    name = title.group(1)
    return {
        "benchmark": name,
        "version": title.group(2),
        "kind": _kind(name),
        "datatype": datatype,
        "pairs": int(pairs.group(1)) if pairs else None,
        "window_size": int(pairs.group(2)) if pairs else None,
        "columns": columns,
        "rows": parsed_rows,
        "max_size": parsed_rows[-1]["size"] if sized else None,
    }


def value_at(parsed, size, column):
    """The *column* figure of the row for message *size*."""
    if column not in parsed["columns"]:
        raise ParseError(
            f"{parsed['benchmark']} has no column {column!r}; it has {parsed['columns']}"
        )
    for row in parsed["rows"]:
        if row.get("size") == size:
            return row[column]
    sizes = [row.get("size") for row in parsed["rows"]]
    raise ParseError(f"{parsed['benchmark']} has no row for size {size}; sizes: {sizes}")


def require_complete(parsed, max_size):
    """Raise unless the table reaches *max_size* (the run was not cut short)."""
    if parsed["max_size"] is None:
        raise ParseError(f"{parsed['benchmark']} has no message sizes to check")
    if parsed["max_size"] < max_size:
        raise ParseError(
            f"{parsed['benchmark']} table stops at {parsed['max_size']} bytes, "
            f"expected up to {max_size} (run cut short?)"
        )
    return parsed


def _looks_numeric(token):
    return bool(re.match(r"^[-+]?(\d|\.\d|inf|nan)", token, re.IGNORECASE))


def _columns(header):
    # OSU pads every header to a fixed width, so labels are separated by at
    # least two spaces while a label itself has at most one ("Latency (us)").
    labels = re.split(r"\s{2,}", header.lstrip("#").strip())
    columns = [_column_key(label) for label in labels]
    if len(set(columns)) != len(columns):
        raise ParseError(f"OSU table header has repeated columns: {header!r}")
    return columns


def _column_key(label):
    low = label.strip().lower()
    if low in _KNOWN:
        return _KNOWN[low]
    tail = _TAIL.match(low)
    if tail:
        unit = "latency_us" if tail.group(2).startswith("lat") else "bandwidth_mbs"
        return f"p{tail.group(1)}_{unit}"
    low = low.replace("(us)", " us").replace("(%)", " pct").replace("(mb/s)", " mbs")
    return re.sub(r"[^a-z0-9]+", "_", low).strip("_")


def _row(line, columns):
    cells = line.split()
    if len(cells) != len(columns):
        raise ParseError(
            f"OSU row has {len(cells)} values for {len(columns)} columns: {line!r}"
        )
    row = {}
    for column, cell in zip(columns, cells):
        what = f"OSU {column} in {line!r}"
        if column in _INT_COLUMNS:
            row[column] = integer(cell, what)
        elif column in _STR_COLUMNS:
            row[column] = cell
        else:
            row[column] = number(cell, what)
    return row


def _kind(name):
    low = name.lower()
    if "barrier" in low:
        return "barrier"
    if "bi-directional" in low:
        return "bibw"
    if "message rate" in low:
        return "mbw_mr"
    if "bandwidth" in low:
        return "bandwidth"
    if _COLLECTIVE_WORDS.search(name):
        return "collective"
    return "latency"


# --- what the core needs of OSU --------------------------------------------------

#: Gated OSU message sizes per size set (bytes), unless the site says otherwise.
SIZES = {
    "latency": [8, 4096],
    "bw": [65536, 4194304],
    "bibw": [65536, 4194304],
    "mbw_mr": [8, 65536],
    "allreduce": [8, 1048576],
    "alltoall": [8, 65536],
    "bcast": [8, 1048576],
}
# Message sizes must be powers of two (check_settings): OSU doubles the size
# from -m MIN up to MAX, so any other size would never be measured.
_MSG_SIZES = {"type": ["array", "null"], "minItems": 1,
              "items": {"type": "integer", "minimum": 1}}
SETTINGS = strict({
    "spec": {**SPEC, "default": "osu-micro-benchmarks", "description": "Spack spec, "
             "e.g. 'osu-micro-benchmarks +cuda' on a GPU partition"},
    "validate": {**BOOL, "default": True, "description": "one launch with -c (OSU 7 data "
                 "validation; set false for OSU < 7) before the timed launches"},
    "validation_iterations": {**POSINT, "default": 10,
                              "description": "-i of the validation launch"},
    "device": {"enum": ["cuda", "rocm", None],
               "description": "run from device buffers (-d DEVICE; needs a +cuda/+rocm build)"},
    "iterations": {**POSINT, "description": "-i (default: OSU's own)"},
    "warmup": {**POSINT, "description": "-x (default: OSU's own)"},
    "pairs": {**POSINT, "description": "osu_mbw_mr pairs (default: ranks per node / 2)"},
    "samples": {**POSINT, "default": 3, "description": "launches per benchmark, each a sample"},
    "sizes": {"type": ["object", "null"], "additionalProperties": _MSG_SIZES,
              "description": "gated message sizes (bytes, powers of two) per size set; "
              "a check names its set (osu_latency and osu_put_latency: latency)",
              "properties": {k: {**_MSG_SIZES, "default": v} for k, v in SIZES.items()},
              "default": {}},
})
_ALGO_NAMES = {"type": ["array", "null"], "minItems": 1,
               "items": {"type": "string", "pattern": r"^[A-Za-z0-9_]+$"}}
ALGORITHMS_SETTINGS = strict({
    "mpi": {**MPI, "description": "the MPI whose algorithms are forced (auto: Open MPI "
            "when the job finds ompi_info, else name it)"},
    "collectives": {"type": ["array", "null"],
                    "items": {"enum": ["osu_allreduce", "osu_bcast", "osu_alltoall"]},
                    "default": ["osu_allreduce", "osu_bcast", "osu_alltoall"],
                    "description": "collectives swept ([] turns the sweep off)"},
    "only": {"type": ["object", "null"], "additionalProperties": False,
             "properties": {k: _ALGO_NAMES for k in ("allreduce", "bcast", "alltoall")},
             "default": {}, "description": "algorithm names per collective (default: every "
             "one the MPI offers; MPICH: MPICH 4's named algorithms)"},
    "rounds": {**POSINT, "default": 3, "description": "launches of each algorithm, "
               "round-robin, each a sample"},
    "finding_ratio": {"type": ["number", "null"], "minimum": 1, "default": 1.2,
                      "description": "a default this many times the best algorithm's "
                      "time is named as a finding"},
})


def check_settings(partition):
    """Every gated size a power of two."""
    sizes = (partition.get("osu") or {}).get("sizes") or {}
    for size_set, values in sizes.items():
        for i, size in enumerate(values or []):
            if size & (size - 1):
                yield (["osu", "sizes", size_set, i], f"{size} is not a power of two; OSU "
                       "measures only powers of two between -m MIN and MAX")


#: An offline kit holds OSU's release tarball, checked by the sha256
#: Spack's recipe holds, and Spack builds it as a develop tree (the
#: archive's file times keep automake from regenerating ``aclocal.m4``).
KIT = KitSource("osu-micro-benchmarks-7.4.tar.gz",
                "https://mvapich.cse.ohio-state.edu/download/mvapich/osu-micro-benchmarks-7.4.tar.gz",
                "OSU Micro-Benchmarks 7.4, the release tarball of Ohio State's MVAPICH project "
                "(sha256 from Spack's osu-micro-benchmarks recipe)",
                sha256="1edd0c2efa61999409bfb28740a7f39689a5b42b1a1b4c66d1656e5637f7cefc",
                develop="osu-micro-benchmarks")

BENCHMARK = Benchmark(parsers={"osu": parse_osu},
                      settings={"osu": SETTINGS, "osu_algorithms": ALGORITHMS_SETTINGS},
                      check_settings=check_settings, kit=(KIT,))
