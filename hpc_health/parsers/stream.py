"""STREAM output (C stream.c 5.10; the Fortran stream.f output is read too).

``parse_stream(text)`` returns::

    {"version": "5.10", "variant": "c" | "fortran",
     "array_size": int, "offset": int, "bytes_per_element": int,
     "memory_per_array_mib": float | None, "total_memory_mib": float | None,
     "ntimes": int,
     "threads_requested": int | None, "threads_counted": int | None,
     "kernels": {"copy" | "scale" | "add" | "triad":
                 {"best_rate_mbs", "avg_time_s", "min_time_s", "max_time_s"}},
     "validated": bool, "validation_message": str,
     "non_finite": ["triad.best_rate_mbs", ...]}

Fields STREAM did not print are None: thread counts only exist in OpenMP
builds (the Fortran code prints one count, stored as both), per-array memory
only in the C code.  Non-finite figures (STREAM prints ``inf`` when a kernel
ran faster than the clock tick) follow the rule in ``_text``: they are the
strings "inf"/"nan", and ``non_finite`` lists where they are so a check can
refuse them without walking the dict.
"""

import re

from . import ParseError
from ._text import check_text, fail, fatal_line, is_finite, number
from .registry import POSINT, SPEC, Benchmark, KitSource, strict

KERNELS = ("copy", "scale", "add", "triad")

_ROW = re.compile(r"^(Copy|Scale|Add|Triad):(.*)$")
_VERSION = re.compile(r"STREAM [Vv]ersion \$Revision:\s*([\d.]+)\s*\$")
_FIELDS = {
    # name: (pattern, converter); the first match in the output wins
    "array_size": (r"^\s*Array size\s*=\s*(\d+)", int),
    "offset": (r"Offset\s*=\s*(\d+)", int),
    "bytes_per_element": (
        r"(?:uses|Assuming)\s+(\d+)\s+bytes per (?:array element|DOUBLE PRECISION word)",
        int,
    ),
    "memory_per_array_mib": (r"^Memory per array\s*=\s*([\d.]+)\s*MiB", float),
    "total_memory_mib": (
        r"^(?:Total memory required\s*=|\s*The total memory requirement is)\s*([\d.]+)\s*Mi?B",
        float,
    ),
    "ntimes": (
        r"(?:Each kernel will be executed|You are running each test)\s+(\d+)\s+times", int
    ),
    "threads_requested": (r"Number of Threads requested\s*=\s*(\d+)", int),
    "threads_counted": (r"Number of Threads counted\s*=\s*(\d+)", int),
    "fortran_threads": (r"^\s*Number of Threads\s*=\s*(\d+)", int),
}
_REQUIRED = ("array_size", "bytes_per_element", "ntimes")
# stream.c prints "Failed Validation on array a[]", stream.f "... a()"
_FAILED = re.compile(r"Failed Validation on array.*|.*errors were found.*")
# the whole line, so that output cut inside it does not count as validated
_VALIDATES = re.compile(
    r"Solution Validates(?:: avg error less than \S+ on all three arrays$|!)", re.MULTILINE
)


def parse_stream(text):
    check_text(text, "STREAM")
    version = _VERSION.search(text)
    if not version:
        raise fail("no STREAM header ('STREAM version $Revision: ...$')", text)
    killed = fatal_line(text)
    if killed:
        raise ParseError(f"STREAM run was killed: {killed!r}")

    result = {"version": version.group(1),
              "variant": "c" if "STREAM version" in version.group(0) else "fortran"}
    for name, (pattern, convert) in _FIELDS.items():
        found = re.search(pattern, text, re.MULTILINE)
        result[name] = convert(found.group(1)) if found else None
    for name in _REQUIRED:
        if result[name] is None:
            raise ParseError(f"STREAM output has no {name.replace('_', ' ')} line")
    fortran_threads = result.pop("fortran_threads")
    if result["threads_counted"] is None and fortran_threads is not None:
        result["threads_requested"] = result["threads_counted"] = fortran_threads

    result["kernels"] = _kernels(text)
    result.update(_validation(text))
    result["non_finite"] = [
        f"{kernel}.{key}"
        for kernel in KERNELS
        for key, value in result["kernels"][kernel].items()
        if not is_finite(value)
    ]
    return result


def _kernels(text):
    kernels = {}
    for line in text.splitlines():
        row = _ROW.match(line)
        if not row:
            continue
        name = row.group(1).lower()
        cells = row.group(2).split()
        if len(cells) != 4:
            raise ParseError(f"STREAM {row.group(1)} row is garbled: {line.strip()!r}")
        if name in kernels:
            raise ParseError(f"STREAM output holds more than one {row.group(1)} row")
        what = f"STREAM {row.group(1)}"
        kernels[name] = {
            "best_rate_mbs": number(cells[0], what),
            "avg_time_s": number(cells[1], what),
            "min_time_s": number(cells[2], what),
            "max_time_s": number(cells[3], what),
        }
    missing = [k.capitalize() for k in KERNELS if k not in kernels]
    if missing:
        raise ParseError(f"STREAM output is missing the {', '.join(missing)} row(s)")
    return kernels


def _validation(text):
    failed = _FAILED.search(text)
    if failed:
        return {"validated": False, "validation_message": failed.group(0).strip()}
    ok = _VALIDATES.search(text)
    if ok:
        return {"validated": True, "validation_message": ok.group(0).strip()}
    # STREAM always prints one or the other after the table
    raise ParseError("STREAM output has no validation line (truncated?)")


# --- what the core needs of STREAM ---------------------------------------------------

SETTINGS = strict({
    "spec": {**SPEC, "default": "stream +openmp", "description": "Spack spec; "
             "stream_array_size/ntimes are added by the check"},
    "array_size": {**POSINT, "description": "elements per array (default: each "
                   "array >= 4x the node's last-level cache, from the processor topology)"},
    "ntimes": {"type": ["integer", "null"], "minimum": 2, "default": 20,
               "description": "repetitions of each kernel"},
    "threads": {**POSINT, "description": "OpenMP threads (default: cores per node)"},
    "samples": {**POSINT, "default": 5, "description": "STREAM executions per thread "
                "count, each a sample"},
    "thread_counts": {"type": ["array", "null"], "minItems": 1,
                      "items": {"type": "integer", "minimum": 1},
                      "description": "Triad series (default 1, 2, 4, ... and all cores)"},
    "proc_bind": {"enum": ["spread", "close", "primary", "master", "true", None],
                  "default": "spread", "description": "OMP_PROC_BIND"},
    "places": {"type": ["string", "null"], "default": "cores", "description": "OMP_PLACES"},
})


def check_settings(partition):
    """The spec must not set what the check derives."""
    spec = (partition.get("stream") or {}).get("spec") or ""
    for variant in ("stream_array_size", "ntimes"):
        if variant in spec:
            yield (["stream", "spec"], f"sets {variant}; the check derives it (use "
                   "stream.array_size / stream.ntimes instead)")


#: STREAM has no release tarball and Spack's ``stream`` recipe names only
#: its git repository: an offline kit holds this commit's archive, checked
#: by the sha256 of its files, and Spack builds it as a develop tree.
STREAM_COMMIT = "6703f7504a38a8da96b353cadafa64d3c2d7a2d3"
KIT = KitSource("STREAM-5.10-6703f75.tar.gz",
                f"https://github.com/jeffhammond/STREAM/archive/{STREAM_COMMIT}.tar.gz",
                "STREAM 5.10, commit 6703f75 of jeffhammond/STREAM (the repository Spack's "
                "stream recipe names)",
                files_sha256="ffe58f23aee69cc2d1fda64394d478ebfbae8d7b84adbb2f416362acbda6c3c5",
                develop="stream")

BENCHMARK = Benchmark(parsers={"stream": parse_stream}, settings={"stream": SETTINGS},
                      check_settings=check_settings, kit=(KIT,))
