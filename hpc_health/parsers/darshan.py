"""darshan-parser output: base (default), --total, --perf, --file, or --all.

``parse_darshan(text)`` returns::

    {"views": ["base" | "total" | "perf" | "file", ...],   # what the output holds
     "header": {"log_version", "lib_version", "compression", "exe", "uid",
                "jobid", "nprocs", "run_time_s", "start_time", "end_time",
                "start_time_asci", "end_time_asci", "metadata": {...}},
     "modules": ["POSIX", "MPI-IO", "STDIO", "HEATMAP", ...],  # log regions
     "mpiio": bool,
     "base":  {module: {"records", "bytes_read", "bytes_written",  # I/O modules
                        "read_time_s", "write_time_s", "meta_time_s",
                        <rank fields>, "shared_files": [...]}},
     "total": {module: {"bytes_read", ..., <rank fields>, "counters": {...}}},
     "perf":  {module: {"total_bytes", "slowest_rank_io_time",
                        "slowest_rank_meta_only_time", "slowest_rank_rw_only_time",
                        "slowest_rank", "time_by_slowest",
                        "agg_time_by_slowest", "agg_perf_by_slowest"}},
     "file":  {module: {"total" | "read_only" | "write_only" | "read_write" |
                        "unique" | "shared": {"files", "bytes", "max_byte_offset"}}}}

<rank fields> are fastest_rank, fastest_rank_bytes, fastest_rank_time_s,
slowest_rank, slowest_rank_bytes, slowest_rank_time_s, variance_rank_time,
variance_rank_bytes.  Darshan only measures them for shared files.  In
"total" they are what darshan's own accumulator printed; in "base" they are
those of the shared file (rank -1 record) that moved the most bytes, and
``shared_files`` lists every shared record with its bytes and rank fields.

"base" sums each counter over a module's records.  darshan-parser prints a
file shared by all ranks once, as a rank -1 record already reduced over the
ranks, and a file used by one rank as that rank's record, so no byte is
counted twice.  Times (seconds) are cumulative over ranks, as darshan's.
"perf" keeps darshan's names and units (seconds; agg_perf_by_slowest in
MiB/s).  Darshan writes -1 for a counter it could not monitor; those exposed
figures are None ("counters" keeps the raw values).  Views absent from the
output are empty dicts.

Truncation: every module listed under "log file regions" must have its
section, each --total/--perf/--file section all its lines, every record of a
module the same counters, and the output must end with a newline.  A base
output cut exactly between two records of its last module would still pass;
Darshan 3.4+ logs end with the HEATMAP module, which is why its records are
checked although they are not reported.
"""

import re

from . import ParseError
from ._text import check_text, fail, number, require_terminated
from .registry import Benchmark, Split

# darshan-parser prints --total/--perf/--file sections only for these
_DETAILED = ("POSIX", "MPI-IO", "STDIO", "DFS", "DAOS")
# counter suffix -> our key; the counter prefix is the module name without "-"
_FIELDS = (
    ("BYTES_READ", "bytes_read"), ("BYTES_WRITTEN", "bytes_written"),
    ("F_READ_TIME", "read_time_s"), ("F_WRITE_TIME", "write_time_s"),
    ("F_META_TIME", "meta_time_s"),
)
_RANK_FIELDS = (
    ("FASTEST_RANK", "fastest_rank"), ("FASTEST_RANK_BYTES", "fastest_rank_bytes"),
    ("F_FASTEST_RANK_TIME", "fastest_rank_time_s"),
    ("SLOWEST_RANK", "slowest_rank"), ("SLOWEST_RANK_BYTES", "slowest_rank_bytes"),
    ("F_SLOWEST_RANK_TIME", "slowest_rank_time_s"),
    ("F_VARIANCE_RANK_TIME", "variance_rank_time"),
    ("F_VARIANCE_RANK_BYTES", "variance_rank_bytes"),
)
# modules whose counter set we know; for these every field must be printed
_KNOWN_COUNTERS = ("POSIX", "MPI-IO", "STDIO")
_PERF = {
    "total_bytes": re.compile(r"^# total_bytes: (\S+)$"),
    "slowest_rank_io_time": re.compile(r"^# unique files: slowest_rank_io_time: (\S+)$"),
    "slowest_rank_meta_only_time": re.compile(
        r"^# unique files: slowest_rank_meta_only_time: (\S+)$"),
    "slowest_rank_rw_only_time": re.compile(
        r"^# unique files: slowest_rank_rw_only_time: (\S+)$"),
    "slowest_rank": re.compile(r"^# unique files: slowest_rank: (\S+)$"),
    "time_by_slowest": re.compile(r"^# shared files: time_by_slowest: (\S+)$"),
    "agg_time_by_slowest": re.compile(r"^# agg_time_by_slowest: (\S+) # seconds$"),
    "agg_perf_by_slowest": re.compile(r"^# agg_perf_by_slowest: (\S+) # MiB/s$"),
}
_FILE_ROW = re.compile(
    r"^# (total|read_only|write_only|read_write|unique|shared): (-?\d+) (-?\d+) (-?\d+)$")
_FILE_KINDS = ("total", "read_only", "write_only", "read_write", "unique", "shared")
_HEADER = {
    "log_version": (r"^# darshan log version: (\S+)$", str),
    "compression": (r"^# compression method: (\S+)$", str),
    "exe": (r"^# exe: (.*)$", str),
    "uid": (r"^# uid: (-?\d+)$", int),
    "jobid": (r"^# jobid: (-?\d+)$", int),
    "start_time": (r"^# start_time: (-?\d+)$", int),
    "start_time_asci": (r"^# start_time_asci: (.*)$", str),
    "end_time": (r"^# end_time: (-?\d+)$", int),
    "end_time_asci": (r"^# end_time_asci: (.*)$", str),
    "nprocs": (r"^# nprocs: (\d+)$", int),
    "run_time_s": (r"^# run time: (\S+)$", float),
}
_REGION = re.compile(r"^# (\S+) module: \d+ bytes \(compressed\), ver=\d+$")
_SECTION = re.compile(r"^# (\S+) module data$")
_BROKEN = re.compile(
    r"^Error: failed to parse .*$"
    r"|^# \*(?:ERROR|WARNING)\*: The \S+ module contains incomplete data!$",
    re.MULTILINE,
)


def parse_darshan(text):
    check_text(text, "darshan-parser")
    if re.search(r"^# DXT, file_id:", text, re.MULTILINE):
        raise ParseError("this is darshan-dxt-parser output; parse darshan-parser output")
    if not re.search(r"^# darshan log version:", text, re.MULTILINE):
        raise fail("not darshan-parser output (no '# darshan log version:' line)", text)
    broken = _BROKEN.search(text)
    if broken:
        raise ParseError(f"darshan log is incomplete or unreadable: {broken.group(0)!r}")
    require_terminated(text, "darshan-parser")

    lines = text.splitlines()
    header = _header(text)
    modules = [m.group(1) for m in map(_REGION.match, lines) if m]
    # the mounts block follows the regions, so its heading proves the module
    # list is whole
    for heading in ("# log file regions", "# mounted file systems (mount point and fs type)"):
        if heading not in lines:
            raise ParseError(f"darshan-parser output has no {heading!r} block (truncated?)")
    sections = _sections(lines)

    views = []
    if "# description of columns:" in text:
        views.append("base")
    if any(line.startswith("total_") for line in lines):
        views.append("total")
    if "# performance" in lines:
        views.append("perf")
    if "# Total file counts" in lines:
        views.append("file")
    _require_sections(modules, sections, views, lines)

    result = {"views": views, "header": header, "modules": modules,
              "mpiio": "MPI-IO" in modules,
              "base": {}, "total": {}, "perf": {}, "file": {}}
    for module, body in sections.items():
        if "base" in views:
            summary = _base(module, body)
            if summary:
                result["base"][module] = summary
        if module not in _DETAILED:
            continue
        if "total" in views:
            result["total"][module] = _total(module, body)
        if "perf" in views:
            result["perf"][module] = _perf(module, body)
        if "file" in views:
            result["file"][module] = _file(module, body)
    return result


def mpiio_enabled(parsed):
    """Whether the log holds MPI-IO module data (Darshan ran with MPI-IO support)."""
    return "MPI-IO" in parsed["modules"]


def bytes_moved(parsed, module):
    """{"read", "written", "total"} bytes of *module*, from whichever view is present.

    --perf and --file only give the total; read and written are then None.
    """
    for view in ("base", "total"):
        summary = parsed[view].get(module)
        if summary and "bytes_read" in summary:
            read, written = summary["bytes_read"], summary["bytes_written"]
            total = None if read is None or written is None else read + written
            return {"read": read, "written": written, "total": total}
    if module in parsed["perf"]:
        return {"read": None, "written": None, "total": parsed["perf"][module]["total_bytes"]}
    if module in parsed["file"]:
        return {"read": None, "written": None, "total": parsed["file"][module]["total"]["bytes"]}
    raise ParseError(f"darshan log has no {module} data (modules: {parsed['modules']})")


def file_rank_counters(text, module, path):
    """{rank: {counter: value}} of *module*'s records of the file *path*,
    from darshan-parser's base view.  Rank -1 is a record Darshan reduced
    over the ranks that shared the file; a run with
    ``DARSHAN_DISABLE_SHARED_REDUCTION=1`` keeps one record per rank, which
    is how one tells the ranks that wrote from those that did not."""
    sections = _sections(text.splitlines())
    if module not in sections:
        raise ParseError(f"darshan log has no {module} records")
    found = {r["rank"]: r["counters"] for r in _records(module, sections[module])
             if r["file"] == path}
    if not found:
        raise ParseError(f"darshan {module} has no record of {path}")
    return found


# ---------------------------------------------------------------- structure

def _header(text):
    header = {}
    for key, (pattern, convert) in _HEADER.items():
        found = re.search(pattern, text, re.MULTILINE)
        if not found:
            raise ParseError(f"darshan-parser header has no {key} line")
        value = found.group(1)
        header[key] = value if convert is str else convert(value)
    # non-MPI logs print the command line with a trailing blank
    header["exe"] = header["exe"].rstrip()
    header["metadata"] = dict(
        re.findall(r"^# metadata: (\S+) = (.*)$", text, re.MULTILINE))
    header["lib_version"] = header["metadata"].get("lib_ver")
    return header


def _sections(lines):
    # a section starts at "# <MODULE> module data" between two rows of stars
    sections, current = {}, None
    for index, line in enumerate(lines):
        found = _SECTION.match(line)
        if found and index > 0 and lines[index - 1].startswith("# ****"):
            current = found.group(1)
            if current in sections:
                raise ParseError(f"darshan-parser output repeats the {current} section")
            sections[current] = []
        elif current:
            sections[current].append(line)
    return sections


def _require_sections(modules, sections, views, lines):
    if not modules:
        if "# no module data available." not in lines:
            raise ParseError("darshan-parser output lists no modules and no"
                             " 'no module data available' line (truncated?)")
        return
    if not views:
        raise ParseError("darshan-parser output has no module data (truncated?)")
    if "base" in views:
        # DXT data is left to darshan-dxt-parser
        expected = [m for m in modules if not m.startswith("DXT_")]
    else:
        expected = [m for m in modules if m in _DETAILED]
    missing = [m for m in expected if m not in sections]
    if missing:
        raise ParseError(
            f"darshan-parser output lacks the {', '.join(missing)} section(s) (truncated?)")


def _value(token, what):
    if re.fullmatch(r"-?\d+", token):
        return int(token)
    return number(token, what)


def _known(value):
    # darshan's "could not monitor" marker
    return None if value == -1 else value


# ---------------------------------------------------------------- base view

def _records(module, body):
    records = {}
    for line in body:
        # --all interleaves the total_ lines with the records
        if not line or line.startswith(("#", "total_")):
            continue
        cells = line.split("\t")
        if len(cells) != 8 or cells[0] != module:
            raise ParseError(f"darshan {module} record line is garbled: {line[:120]!r}")
        key = (int(cells[1]), cells[2])
        record = records.setdefault(key, {"rank": key[0], "record_id": cells[2],
                                          "file": cells[5], "counters": {}})
        if cells[3] in record["counters"]:
            raise ParseError(f"darshan {module} record {cells[2]} repeats {cells[3]}")
        record["counters"][cells[3]] = _value(cells[4], f"darshan {cells[3]}")
    if not records:
        raise ParseError(f"darshan {module} section has no records (truncated?)")
    counts = {len(r["counters"]) for r in records.values()}
    # every record of a module carries the same counters; a cut record has fewer
    if len(counts) > 1 and module != "HEATMAP":
        raise ParseError(f"darshan {module} records have unequal counter sets (truncated?)")
    return list(records.values())


def _base(module, body):
    records = _records(module, body)
    prefix = module.replace("-", "") + "_"
    if prefix + "BYTES_READ" not in records[0]["counters"]:
        return None  # not an I/O module (HEATMAP...): checked, not reported
    summary = {"records": len(records)}
    for suffix, key in _FIELDS:
        values = [_known(r["counters"].get(prefix + suffix)) for r in records]
        summary[key] = None if None in values else _sum(values)
    shared = [_shared_file(prefix, r) for r in records if r["rank"] == -1]
    shared.sort(key=lambda f: -((f["bytes_read"] or 0) + (f["bytes_written"] or 0)))
    for _, key in _RANK_FIELDS:
        summary[key] = shared[0][key] if shared else None
    summary["shared_files"] = shared
    return summary


def _sum(values):
    if any(isinstance(v, str) for v in values):
        return "nan"
    total = sum(values)
    # darshan prints times with 6 decimals; don't invent digits beyond them
    return round(total, 6) if isinstance(total, float) else total


def _shared_file(prefix, record):
    counters = record["counters"]
    entry = {"file": record["file"], "record_id": record["record_id"]}
    for suffix, key in _FIELDS[:2] + _RANK_FIELDS:
        entry[key] = _known(counters.get(prefix + suffix))
    return entry


# ---------------------------------------------------------------- other views

def _total(module, body):
    counters = {}
    for line in body:
        found = re.match(r"^total_(\w+): (\S+)$", line)
        if found:
            counters[found.group(1)] = _value(found.group(2), f"darshan {found.group(1)}")
    prefix = module.replace("-", "") + "_"
    summary = {}
    for suffix, key in _FIELDS + _RANK_FIELDS:
        name = prefix + suffix
        if name not in counters and module in _KNOWN_COUNTERS:
            raise ParseError(f"darshan --total output lacks total_{name} (truncated?)")
        summary[key] = _known(counters.get(name))
    summary["counters"] = counters
    return summary


def _perf(module, body):
    perf = {}
    for line in body:
        for key, pattern in _PERF.items():
            found = pattern.match(line)
            if found:
                perf[key] = _value(found.group(1), f"darshan {module} {key}")
    missing = [key for key in _PERF if key not in perf]
    if missing:
        raise ParseError(f"darshan --perf {module} section lacks {', '.join(missing)}")
    return perf


def _file(module, body):
    counts = {}
    for line in body:
        found = _FILE_ROW.match(line)
        if found:
            counts[found.group(1)] = {
                "files": int(found.group(2)),
                "bytes": int(found.group(3)),
                "max_byte_offset": _known(int(found.group(4))),
            }
    missing = [kind for kind in _FILE_KINDS if kind not in counts]
    if missing:
        raise ParseError(f"darshan --file {module} section lacks {', '.join(missing)}")
    return counts


# Darshan's view of each I/O run in the report: the share of the slowest
# rank's time in data transfer against metadata, per module, with the bytes
# moved (its settings are IOR's: parsers/ior.py).
BENCHMARK = Benchmark(
    parsers={"darshan": parse_darshan},
    mirrored=("darshan-runtime@3.5.0", "darshan-util@3.5.0"),     # an offline kit's mirror
    plots=(Split("Darshan, share of I/O time (bytes moved)", groups=("posix", "mpiio"),
                 parts=(("io_time_slowest_rank", "data transfer"), ("meta_time", "metadata")),
                 axis="% of the slowest rank's I/O time", note="bytes"),))
