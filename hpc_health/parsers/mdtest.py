"""mdtest output (the mdtest shipped with IOR 3.3/4.x).

``parse_mdtest(text)`` returns::

    {"version": "4.1.0+dev", "tasks": 2, "nodes": 1, "items": 400,
     "iterations": 1,
     "rates": {"directory_creation": {"max", "min", "mean", "stddev"}, ...},
     "times": {...same shape, only when mdtest printed a "SUMMARY time" table}}

``rates`` are ops/s, keyed by mdtest's own row labels in snake case:
directory_creation/stat/rename/removal, file_creation/stat/read/removal,
tree_creation/removal (whichever phases ran).  ``items`` is the
"N files/directories" total mdtest reports for all tasks.
"""

import re

from . import ParseError
from ._text import check_text, fail, fatal_line, number
from .registry import POSINT, Benchmark, strict

_LAUNCH = re.compile(
    r"^mdtest-(\S+) was launched with (\d+) total task\(s\) on (\d+) node\(s\)", re.MULTILINE
)
_ITEMS = re.compile(r"^(\d+) tasks?, (\d+) (?:files/directories|files|directories)", re.MULTILINE)
_SECTION = re.compile(r"^SUMMARY (rate|time)\b.*?\(of (\d+) iterations?\)")
_ROW = re.compile(r"^\s+([A-Za-z][A-Za-z ()]*?)\s*:?\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")
_ERROR = re.compile(r"^.*\bERROR\b.*$", re.MULTILINE)


def parse_mdtest(text):
    check_text(text, "mdtest")
    error = _ERROR.search(text)
    if error:
        raise ParseError(f"mdtest failed: {error.group(0).strip()!r}")
    killed = fatal_line(text)
    if killed:
        raise ParseError(f"mdtest run was aborted: {killed!r}")
    launch = _LAUNCH.search(text)
    if not launch:
        raise fail("no mdtest output ('mdtest-X was launched with N total task(s)')", text)
    items = _ITEMS.search(text)
    if not items:
        raise ParseError("mdtest output has no 'N tasks, M files/directories' line")

    tables, iterations = _tables(text.splitlines())
    if "rate" not in tables:
        raise ParseError("mdtest output has no 'SUMMARY rate' table (truncated?)")
    if not re.search(r"^-- finished at", text, re.MULTILINE):
        # mdtest closes every run with this line; without it rows may be lost
        raise ParseError("mdtest output has no '-- finished at' line (truncated?)")
    result = {
        "version": launch.group(1),
        "tasks": int(launch.group(2)),
        "nodes": int(launch.group(3)),
        "items": int(items.group(2)),
        "iterations": iterations,
        "rates": tables["rate"],
    }
    if "time" in tables:
        result["times"] = tables["time"]
    return result


def _tables(lines):
    tables, iterations, current = {}, None, None
    for line in lines:
        section = _SECTION.match(line)
        if section:
            current = tables.setdefault(section.group(1), {})
            iterations = int(section.group(2))
            continue
        if current is None or not line.strip():
            continue
        stripped = line.strip()
        if stripped.startswith(("Operation", "---")):
            continue
        row = _ROW.match(line)
        if not row:
            if line.startswith((" ", "\t")):
                raise ParseError(f"mdtest summary row is garbled: {stripped!r}")
            current = None  # the table ended
            continue
        key = re.sub(r"[^a-z0-9]+", "_", row.group(1).lower()).strip("_")
        what = f"mdtest {row.group(1)}"
        current[key] = {
            "max": number(row.group(2), what),
            "min": number(row.group(3), what),
            "mean": number(row.group(4), what),
            "stddev": number(row.group(5), what),
        }
    for name, table in tables.items():
        if not table:
            raise ParseError(f"mdtest SUMMARY {name} table has no rows")
    return tables, iterations


SETTINGS = strict({
    "ranks_per_node": {**POSINT, "description": "null: the partition's ranks_per_node"},
    "items": {**POSINT, "default": 1000, "description": "-n files and directories per rank"},
    "samples": {**POSINT, "default": 3, "description": "launches of mdtest, each a sample"},
    "write_bytes": {"type": ["integer", "null"], "minimum": 0, "default": 0,
                    "description": "-w bytes written to each file"},
})

BENCHMARK = Benchmark(parsers={"mdtest": parse_mdtest}, settings={"mdtest": SETTINGS})
