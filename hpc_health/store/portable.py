"""Carrying stored runs between sites: ``hpc-health export`` writes one
portable, versioned file; ``hpc-health import`` verifies it and adds its runs
to this store under their own site name.

The file is one JSON document, gzip-compressed unless its name ends in
``.json`` (the reader tells the two apart by their first bytes)::

    {"format": "hpc-health-export", "version": 1, "created": "2026-11-02T08:00:00Z",
     "hpc_health": "0.1.0", "hostname": "login1",
     "sites": {SITE: {"capabilities": {"SITE:PART": {...}}}},
     "runs": [{"site": SITE, "run_id": RUN_ID, "sha256": HEX,
               "files": {"run.json": {...}, "report.json": {...},
                         "verdicts.json": [...],
                         "output/.../hpc-health-samples.json": {...}},
               "imported": {...}}]}

``files`` holds every file of the run that hpc-health reads, by its path
under the run directory; ``sha256`` is the SHA-256 of the canonical JSON of
``files`` (sorted keys, no spaces).  It is made portable before it is
summed: the testcases' ``outputdir``/``stagedir`` are relative to the run
directory (null when outside it), and run.json leaves out how the run came
here (``imported``, kept beside ``files``).  The same run therefore has the
same checksum in every store it reaches, which is how an import knows a run
it already has.

An import verifies everything before it writes anything: format, version,
the shape of every run, every checksum, and that no run id it would add
exists here with other content (a stored run is never overwritten: such a
conflict refuses the whole import).  It then writes each new run into a
staging directory of the store and renames it into place, so a run is there
whole or not at all; imports hold ``<store>/.import.lock`` one at a time.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import os
import re
import socket
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from hpc_health import __version__
from hpc_health.errors import ConfigError
from hpc_health.model import results
from hpc_health.store import bounded_gzip, rundirs

FORMAT = "hpc-health-export"
#: Bumped when a reader of this version would misread a newer file.
VERSION = 1
LOCK_FILE = ".import.lock"
#: Where an import builds runs before renaming them into place: in the
#: store (one file system, so the rename is atomic), outside runs/ (so no
#: reader takes a half-written run for one).
STAGING = ".import-tmp"
RUN_FILES = ("run.json", "report.json", rundirs.VERDICTS_FILE)
_PATH_KEYS = ("outputdir", "stagedir")
# A site name or run id: one directory name, never '.', '..' or hidden.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+@-]*")
_GZIP_MAGIC = b"\x1f\x8b"


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def checksum(files: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(files)).hexdigest()


# --- a stored run as portable files -------------------------------------------------

def _relative(where, run_dir, site, run_id):
    """*where* (a testcase's absolute outputdir or stagedir) relative to the
    run directory, as a POSIX path; None when it is not inside it.  A store
    that moved since the run still matches by its ``SITE/RUN_ID/`` part."""
    if not isinstance(where, str) or not where.startswith("/"):
        return None
    p = PurePosixPath(where)
    rel = None
    for base in {str(run_dir), os.path.realpath(run_dir)}:
        try:
            rel = str(p.relative_to(base))
            break
        except ValueError:
            pass
    marker = f"/{site}/{run_id}/"
    if rel is None and marker in where + "/":
        rel = (where + "/")[(where + "/").rfind(marker) + len(marker):].strip("/") or "."
    return rel if rel is not None and _safe_relative(rel) else None


#: Characters no text from another store may carry to a terminal or a path:
#: NUL, escape sequences (ESC, C1 controls) and the other C0 controls but
#: tab and newline (a carriage return rewrites a printed line).
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _unsafe_text(value, where="run.json"):
    """Where *value* (a JSON document) holds an unsafe character, else None."""
    if isinstance(value, str):
        return where if _UNSAFE.search(value) else None
    items = (value.items() if isinstance(value, dict) else
             enumerate(value) if isinstance(value, list) else ())
    for key, item in items:
        if isinstance(key, str) and _UNSAFE.search(key):
            return f"{where}.{key!r}"
        found = _unsafe_text(item, f"{where}.{key}")
        if found:
            return found
    return None


def _safe_relative(rel):
    if not isinstance(rel, str) or not rel or rel.startswith("/") or _UNSAFE.search(rel):
        return False
    parts = PurePosixPath(rel).parts
    return rel == "." or (bool(parts) and all(x not in ("..", ".", "") for x in parts))


def _testcases(report):
    for run in report.get("runs") or []:
        if isinstance(run, dict):
            for tc in run.get("testcases") or []:
                if isinstance(tc, dict):
                    yield tc


def _read_json(path, what):
    try:
        return json.loads(Path(path).read_text())
    except OSError as err:
        raise ConfigError(path, f"cannot read the {what}: {err.strerror or err}") from None
    except ValueError as err:
        raise ConfigError(path, f"the {what} is not valid JSON ({err})") from None


def run_files(run_dir: Path, site: str, run_id: str) -> tuple[dict[str, Any], Any]:
    """({relative path: content} of a stored run, made portable; what the
    run's run.json says about its import, or None)."""
    run_dir = Path(run_dir)
    meta = _read_json(run_dir / "run.json", "run's provenance (run.json)")
    report = _read_json(run_dir / "report.json", "run report")
    if not isinstance(meta, dict) or not isinstance(report, dict):
        raise ConfigError(run_dir, "run.json or report.json is not a JSON object")
    meta = dict(meta)
    imported = meta.pop("imported", None)
    report = copy.deepcopy(report)
    files = {"run.json": meta, "report.json": report}
    if (run_dir / rundirs.VERDICTS_FILE).exists():
        files[rundirs.VERDICTS_FILE] = _read_json(run_dir / rundirs.VERDICTS_FILE, "verdicts")
    for tc in _testcases(report):
        for key in _PATH_KEYS:
            if key not in tc or tc[key] is None:
                continue
            rel = _relative(tc[key], run_dir, site, run_id)
            tc[key] = rel
            if rel is None:
                continue
            name = str(PurePosixPath(rel) / results.SAMPLES_FILE)
            if name not in files and (run_dir / name).is_file():
                files[name] = _read_json(run_dir / name, "samples")
    return files, imported


def _declared(site_name):
    """{'site:partition': declared capabilities} of a site known here."""
    from hpc_health.site import sites
    try:
        s = sites.load(site_name)
    except ConfigError:
        return None
    found = {}
    for p, settings in s.partitions.items():
        caps = {k: v for k, v in ((settings or {}).get("capabilities") or {}).items()
                if v is not None}
        if caps:
            found[f"{s.name}:{p}"] = caps
    return found


# --- export -------------------------------------------------------------------------

@dataclass
class Written:
    path: Path
    runs: list
    size: int

    def sites(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for site, _ in self.runs:
            found[site] = found.get(site, 0) + 1
        return found


def export(runs: Sequence[Any], out: str | Path,
           tick: Callable[[], Any] = lambda: None) -> Written:
    """Write the stored *runs* (:class:`hpc_health.model.runs.Run`, or (site,
    run_id, run_dir) triples) to *out*, atomically; *tick* is called once a
    run (progress)."""
    out = Path(out)
    entries, seen = [], set()
    for r in runs:
        tick()
        site, run_id, run_dir = (r.site, r.run_id, r.dir) if hasattr(r, "site") else r
        if (site, run_id) in seen:
            continue
        seen.add((site, run_id))
        files, imported = run_files(run_dir, site, run_id)
        entry = {"site": site, "run_id": run_id, "sha256": checksum(files), "files": files}
        if imported:
            entry["imported"] = imported
        entries.append(entry)
    if not entries:
        raise ConfigError(out, "no run to export")
    site_info = {}
    for site in sorted({e["site"] for e in entries}):
        caps = _declared(site)
        if caps is not None:
            site_info[site] = {"capabilities": caps}
    doc = {"format": FORMAT, "version": VERSION, "created": _now(), "hpc_health": __version__,
           "hostname": socket.gethostname(), "sites": site_info, "runs": entries}
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    if not out.name.endswith(".json"):
        data = gzip.compress(data, mtime=0)
    _write_atomically(out, data)
    return Written(out, [(e["site"], e["run_id"]) for e in entries], len(data))


def _write_atomically(path, data):
    """A full disk or a stop leaves the old file (or none), never half a file."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fp:
            fp.write(data)
            fp.flush()
            os.fsync(fp.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# --- reading and verifying an export --------------------------------------------------

@dataclass
class Entry:
    site: str
    run_id: str
    sha256: str
    files: dict

    @property
    def name(self) -> str:
        return f"{self.site}:{self.run_id}"


@dataclass
class Export:
    path: Path
    created: str | None
    hostname: str | None
    hpc_health: str | None
    runs: list = field(default_factory=list)    # Entry
    sites: dict = field(default_factory=dict)


def _foreign(path, why):
    return ConfigError(path, f"not an hpc-health export ({why})")


_MAX_VAR = "HPC_HEALTH_IMPORT_MAX_MIB"


def max_import_bytes() -> int:
    """Largest export (uncompressed) that is read: the whole document is held
    in memory, and a 2 MB file that unpacks to 2 GiB took 4-6 GB before."""
    try:
        return max(1, int(os.environ.get(_MAX_VAR) or 512)) << 20
    except ValueError:
        raise ConfigError(_MAX_VAR, f"{os.environ[_MAX_VAR]!r} is not a number of MiB") from None


def read(path: str | Path) -> Export:
    """The verified :class:`Export` in *path*; ConfigError naming the file
    (and the run) when it is foreign, truncated, damaged, of a newer format
    version or altered since it was written."""
    path = Path(path)
    raw, compressed = _unpacked(path, max_import_bytes())
    inside = " inside gzip" if compressed else ""
    if raw[257:262] == b"ustar":
        raise _foreign(path, f"a tar archive{inside}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _foreign(path, f"binary data{inside}") from None
    try:
        doc = json.loads(text)
    except ValueError as err:
        if f'"format":"{FORMAT}"' in text[:4096].replace(" ", ""):
            raise ConfigError(path, f"truncated or damaged export: invalid JSON ({err}); copy "
                              "the file again") from None
        raise _foreign(path, f"not JSON{inside}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise _foreign(path, f'a JSON document without "format": "{FORMAT}"')
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ConfigError(path, f"damaged export: format version {version!r}")
    if version > VERSION:
        raise ConfigError(path, f"export format version {version} (written by hpc-health "
                          f"{doc.get('hpc_health', '?')}); this hpc-health {__version__} reads "
                          f"version {VERSION}: import it with a newer hpc-health")
    sites = doc.get("sites")
    return Export(path, doc.get("created"), doc.get("hostname"), doc.get("hpc_health"),
                  _entries(path, doc), sites if isinstance(sites, dict) else {})


def _unpacked(path: Path, limit: int) -> tuple[bytes, bool]:
    """(the file's bytes, gunzipped if they were, and whether they were),
    never more than *limit* of them; ConfigError naming the file."""
    try:
        if path.stat().st_size > limit:
            raise ConfigError(path, f"holds more than {limit >> 20} MiB: export fewer runs per "
                              f"file, or set {_MAX_VAR} (MiB) higher")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(path, "no such file") from None
    except IsADirectoryError:
        raise ConfigError(path, "is a directory, not an export file") from None
    except OSError as err:
        raise ConfigError(path, f"cannot read: {err.strerror or err}") from None
    compressed = raw[:2] == _GZIP_MAGIC
    too_big = False
    if compressed:
        try:
            unpacked = bounded_gzip.gunzip(raw, limit)
        except EOFError:
            raise ConfigError(path, "truncated: the compressed data ends early (an "
                              "interrupted copy?); copy the file again") from None
        except (OSError, zlib.error) as err:
            raise ConfigError(path, f"damaged compressed data ({err}); copy the file "
                              "again") from None
        except MemoryError:
            raise ConfigError(path, f"needs more memory to unpack than this process may use "
                              f"(a memory limit, ulimit -v?): export fewer runs per file, or "
                              f"set {_MAX_VAR} (MiB) lower") from None
        too_big, raw = unpacked is None, unpacked or b""
    if too_big or len(raw) > limit:
        raise ConfigError(path, f"unpacks to more than {limit >> 20} MiB (a year of nightly "
                          "runs is far less): export fewer runs per file, or set "
                          f"{_MAX_VAR} (MiB) higher")
    return raw, compressed


def _entries(path, doc):
    runs = doc.get("runs")
    if not isinstance(runs, list) or not runs:
        raise ConfigError(path, "damaged export: no runs", keypath="runs")
    out, seen = [], set()
    for i, e in enumerate(runs):
        where = f"runs[{i}]"
        if not isinstance(e, dict):
            raise ConfigError(path, "damaged export: not a run", keypath=where)
        site, run_id = e.get("site"), e.get("run_id")
        for what, value in (("site", site), ("run_id", run_id)):
            if not isinstance(value, str) or not _NAME.fullmatch(value):
                raise ConfigError(path, f"damaged export: {what} {value!r} is not a "
                                  "directory name", keypath=f"{where}.{what}")
        name = f"run {site}:{run_id}"
        if (site, run_id) in seen:
            raise ConfigError(path, f"damaged export: {name} is there twice")
        seen.add((site, run_id))
        files = e.get("files")
        if not isinstance(files, dict):
            raise ConfigError(path, f"damaged export: {name} has no files")
        if checksum(files) != e.get("sha256"):
            raise ConfigError(path, f"{name}: checksum mismatch: its content was altered "
                              "or damaged after export; nothing imported")
        _check_files(path, name, site, run_id, files)
        out.append(Entry(site, run_id, e["sha256"], files))
    return out


def _check_files(path, name, site, run_id, files):
    def bad(why):
        return ConfigError(path, f"damaged export: {name}: {why}")

    meta, report = files.get("run.json"), files.get("report.json")
    if not isinstance(meta, dict):
        raise bad("run.json is missing or not a JSON object")
    if not isinstance(report, dict) or not isinstance(report.get("runs"), list):
        raise bad("report.json is missing or not a ReFrame run report")
    if rundirs.VERDICTS_FILE in files and not isinstance(files[rundirs.VERDICTS_FILE], list):
        raise bad(f"{rundirs.VERDICTS_FILE} is not a list")
    for key, value in (("site", site), ("run_id", run_id)):
        if meta.get(key, value) != value:
            raise bad(f"run.json says {key} {meta[key]!r}")
    if "exit_code" not in meta:
        raise bad("run.json has no exit code (a run that never finished)")
    unsafe = _unsafe_text(meta)
    if unsafe:
        raise bad(f"{unsafe} holds control characters (a terminal escape sequence?); "
                  "nothing imported")
    for rel, content in files.items():
        if rel in RUN_FILES:
            continue
        if not (_safe_relative(rel) and PurePosixPath(rel).name == results.SAMPLES_FILE):
            raise bad(f"unexpected file {rel!r}")
        if not isinstance(content, dict):
            raise bad(f"{rel} is not a JSON object")
    for tc in _testcases(report):
        for key in _PATH_KEYS:
            if tc.get(key) is not None and not _safe_relative(tc[key]):
                raise bad(f"a testcase's {key} {tc[key]!r} is not relative to the run")
