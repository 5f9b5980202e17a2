"""An index of the store: every stored figure with its samples, verdict and
the run's provenance, in SQLite, so that history, compare and run sets cost
a query instead of parsing every ReFrame report ever kept.

The run directories stay the truth.  The index is brought up to date
whenever it is opened: a run directory that is new or changed since it was
indexed (its files' sizes and times) is read again, one that is gone is
dropped, and a missing or older-format index is rebuilt, each with a line
saying so.  Deleting ``index.sqlite`` loses nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hpc_health import paths
from hpc_health.errors import ConfigError
from hpc_health.model import results
from hpc_health.model.runs import Run
from hpc_health.store import rundirs

INDEX_FILE = "index.sqlite"
#: Bumped whenever the tables or what is read into them change: an index
#: of another version is rebuilt from the run directories.
SCHEMA_VERSION = 3
#: Files whose change means a run must be read again.
_WATCHED = ("run.json", "report.json", rundirs.VERDICTS_FILE)

_SCHEMA = """
CREATE TABLE runs (
    site TEXT NOT NULL, run_id TEXT NOT NULL, started TEXT, signature TEXT NOT NULL,
    state TEXT NOT NULL,          -- ok | damaged | incomplete
    reason TEXT, exit_code INTEGER, meta TEXT,
    PRIMARY KEY (site, run_id));
CREATE TABLE tags (site TEXT NOT NULL, run_id TEXT NOT NULL, tag TEXT NOT NULL);
CREATE TABLE figures (
    site TEXT NOT NULL, run_id TEXT NOT NULL, test TEXT, check_name TEXT, system TEXT,
    partition TEXT, environ TEXT, variable TEXT, value REAL, unit TEXT, better TEXT,
    capability TEXT, samples TEXT, params TEXT, nodes TEXT, rounds INTEGER,
    verdict TEXT, reason TEXT);
CREATE INDEX figures_by_variable ON figures (site, variable);
CREATE INDEX figures_by_run ON figures (site, run_id);
CREATE INDEX tags_by_tag ON tags (site, tag);
"""


@dataclass
class Listing:
    """Readable runs (oldest first) and the damaged ones, with why."""
    runs: list = field(default_factory=list)
    damaged: list = field(default_factory=list)     # [(site, run id, reason)]
    # Runs that ended without a report (a configuration error, a stop
    # before any check, a store that filled): [(site, run id, why)].
    incomplete: list = field(default_factory=list)

    def note(self) -> str:
        if not self.damaged:
            return ""
        n = len(self.damaged)
        return (f"skipped {n} damaged run{'s' if n > 1 else ''}: " +
                "; ".join(f"{rid}: {why}" for _, rid, why in self.damaged))


def _signature(run_dir):
    parts = []
    for name in _WATCHED:
        try:
            st = os.stat(run_dir / name)
            parts.append(f"{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append("-")
    return "/".join(parts)


#: Seconds before a lock held by another process is said, and at most waited for.
LOCK_NOTICE_S, LOCK_WAIT_S = 5.0, 60.0


def _locked(err: BaseException) -> bool:
    return isinstance(err, sqlite3.OperationalError) and "locked" in str(err)


def _say(line):
    print(f"hpc-health: {line}", file=sys.stderr)


class Index:
    def __init__(self, say=_say):
        self.root = paths.store_root()
        self.path = self.root / INDEX_FILE
        self.say = say
        self.db = self._open()
        self._fresh = set()     # sites refreshed by this instance (None: all)

    def _connect(self) -> tuple[sqlite3.Connection, int]:
        """The index and its schema version; a lock held by another process
        is said after a few seconds, waited for up to a minute."""
        db = sqlite3.connect(self.path, timeout=LOCK_NOTICE_S)
        try:
            return db, db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.OperationalError as err:
            db.close()
            if not _locked(err):
                raise
        self.say(f"index {self.path} is locked by another process (an import, a run being "
                 f"stored): waiting up to {LOCK_WAIT_S} s")
        db = sqlite3.connect(self.path, timeout=LOCK_WAIT_S)
        try:
            return db, db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.Error:
            db.close()
            raise

    def _open(self):
        existed = self.path.exists()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            db, version = self._connect()
        except (OSError, sqlite3.DatabaseError) as err:
            if _locked(err):
                # Busy is not damaged: the index stays as it is for its holder.
                return self._in_memory(f"still locked after {LOCK_WAIT_S} s", "read")
            if existed and isinstance(err, sqlite3.DatabaseError) and self._writable():
                self.say(f"index {self.path} is damaged ({err}): rebuilding it from the "
                         "run directories")
                os.replace(self.path, f"{self.path}.damaged")
                return self._open()
            return self._in_memory(err)
        if version != SCHEMA_VERSION:
            if existed:
                self.say(f"index {self.path} is of another version: rebuilding it from the "
                         "run directories")
            try:
                _create(db)
            except sqlite3.OperationalError as err:
                db.close()
                return self._in_memory(err)
        return db

    def _in_memory(self, err, what="write"):
        """A store we may not write (read-only, full) or an index another
        process holds: an index in memory, built from the run directories
        for this command only."""
        self.say(f"cannot {what} the index {self.path} ({err}): reading the run directories "
                 "instead")
        db = sqlite3.connect(":memory:")
        _create(db)
        return db

    def _writable(self):
        return os.access(self.root, os.W_OK)

    def close(self) -> None:
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- bringing it up to date --------------------------------------------

    def refresh(self, site: str | None = None) -> None:
        """Read what changed in the run directories of *site* (or all), once
        per opened index: a command reads the store as it was when it began."""
        if None in self._fresh or site in self._fresh:
            return
        self._fresh.add(site)
        on_disk = {}
        base = rundirs.runs_dir()
        sites = [site] if site else (sorted(p.name for p in base.iterdir() if p.is_dir())
                                     if base.is_dir() else [])
        for s in sites:
            d = rundirs.runs_dir(s)
            if d.is_dir():
                for run_dir in d.iterdir():
                    if run_dir.is_dir() and not run_dir.name.startswith("."):
                        on_disk[(s, run_dir.name)] = run_dir
        where, args = ("WHERE site = ?", (site,)) if site else ("", ())
        known = dict(((s, r), sig) for s, r, sig in self.db.execute(
            f"SELECT site, run_id, signature FROM runs {where}", args))
        gone = [k for k in known if k not in on_disk]
        todo = [(k, d) for k, d in sorted(on_disk.items())
                if known.get(k) != _signature(d)]
        if not gone and not todo:
            return
        if known and (gone or len(todo) > 1):
            self.say(f"index: {len(todo)} run(s) new or changed, {len(gone)} gone since it "
                     "was last updated: updating it")
        elif not known and len(todo) > 1:
            self.say(f"index: building it from {len(todo)} run directories ({self.path})")
        try:
            with self.db:
                for s, r in gone:
                    self._forget(s, r)
                for (s, _), run_dir in todo:
                    self._ingest(s, run_dir)
        except sqlite3.OperationalError as err:
            if "readonly" not in str(err) and "disk" not in str(err):
                raise
            self.db.close()
            self.db = self._in_memory(err)
            self._fresh = set()
            self.refresh(site)

    def add(self, run_dir: Path) -> None:
        """Index one run just stored (by ``run`` or ``import``)."""
        with self.db:
            self._ingest(run_dir.parent.name, run_dir)

    def _forget(self, site, run_id):
        for table in ("runs", "tags", "figures"):
            self.db.execute(f"DELETE FROM {table} WHERE site = ? AND run_id = ?",
                            (site, run_id))

    def _ingest(self, site, run_dir):
        self._forget(site, run_dir.name)
        sig = _signature(run_dir)
        state, reason, meta, report = _read_run(run_dir)
        if state is None:
            return          # still running: looked at again next time
        self.db.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (site, run_dir.name, (meta or {}).get("started", ""), sig, state,
                         reason, (meta or {}).get("exit_code"),
                         json.dumps(meta) if meta else None))
        if state != "ok":
            return
        self.db.executemany("INSERT INTO tags VALUES (?, ?, ?)",
                            [(site, run_dir.name, t) for t in meta.get("tags") or []])
        judged = _stored_verdicts(run_dir)
        rows = []
        for m in results.measurements(report):
            if m.variable is None or m.value is None:
                continue
            # A per-node copy's verdict is stored under "check @node" (the
            # table's name for it), and its node is the one it was pinned to.
            check = f"{m.check} @{m.node}" if m.node else m.check
            v, why = judged.get((check, m.partition_fullname, m.environ, m.variable),
                                (None, None))
            rows.append((site, run_dir.name, m.test, m.check, m.system, m.partition,
                         m.environ, m.variable, m.value, m.unit, m.better, m.capability,
                         json.dumps(m.samples or [m.value]), json.dumps(m.params, default=str),
                         json.dumps([m.node] if m.node else m.nodes), m.rounds, v, why))
        self.db.executemany("INSERT INTO figures VALUES "
                            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    # --- reading -------------------------------------------------------------

    def listing(self, site: str | None = None) -> Listing:
        """Readable runs of *site* (or every site), oldest first, and the
        damaged ones."""
        self.refresh(site)
        where, args = ("WHERE site = ?", (site,)) if site else ("", ())
        out = Listing()
        for s, rid, started, state, reason, meta in self.db.execute(
                f"SELECT site, run_id, started, state, reason, meta FROM runs {where} "
                "ORDER BY started, run_id", args):
            if state == "ok":
                out.runs.append(Run(s, rid, started, json.loads(meta)))
            elif state == "damaged":
                out.damaged.append((s, rid, reason))
            elif state == "incomplete":
                out.incomplete.append((s, rid, reason))
        return out

    def sites(self) -> list[str]:
        self.refresh()
        return [s for (s,) in self.db.execute("SELECT DISTINCT site FROM runs ORDER BY site")]

    def figures(self, runs: Sequence[Run], variable: str | None = None, check: str | None = None,
                partition: str | None = None, samples: bool = True) -> list[Any]:
        """The figures of *runs* (:class:`Run`), as
        :class:`hpc_health.model.results.Measurement` with ``run`` set (the Run)
        and ``verdict``/``verdict_reason`` as judged when stored.  Without
        *samples* their samples and nodes are left empty: a year of a site's
        figures is 80 000 rows, and decoding those two fields was most of
        the time ``history --all`` took."""
        by_key = {(r.site, r.run_id): r for r in runs}
        columns = "*" if samples else _LIGHT_COLUMNS
        decoded: dict[str, Any] = {}
        out = []
        for site in sorted({r.site for r in runs}):
            ids = [r.run_id for r in runs if r.site == site]
            for chunk in range(0, len(ids), 500):
                part = ids[chunk:chunk + 500]
                # One variable: its rows by the variable's index (the run
                # index would visit every figure of every run, per query).
                table = "figures INDEXED BY figures_by_variable" if variable else "figures"
                sql = (f"SELECT {columns} FROM {table} WHERE site = ? AND run_id IN "
                       f"({','.join('?' * len(part))})")
                args: list[Any] = [site, *part]
                if variable:
                    sql += " AND variable = ?"
                    args.append(variable)
                if partition:
                    sql += " AND partition = ?"
                    args.append(partition)
                if check:
                    # The class name, the display name, or the display name
                    # without some trailing parameters: in SQL, so that only
                    # this figure's rows are decoded.
                    sql += (" AND (test = ? OR check_name = ? OR "
                            "substr(check_name, 1, ?) = ?)")
                    args += [check, check, len(check) + 1, check + " "]
                for row in self.db.execute(sql, args):
                    m = _measurement(row, decoded)
                    m.run = by_key[(row[0], row[1])]
                    out.append(m)
        order = {(r.site, r.run_id): i for i, r in enumerate(runs)}
        out.sort(key=lambda m: order[(m.run.site, m.run.run_id)])
        return out


    def partitions(self, runs: Sequence[Run]) -> list[str]:
        """The partitions the figures of *runs* were measured on."""
        found = set()
        for r in runs:
            found |= {p for (p,) in self.db.execute(
                "SELECT DISTINCT partition FROM figures WHERE site = ? AND run_id = ?",
                (r.site, r.run_id))}
        return sorted(found)


def _create(db):
    with db:
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")\
                .fetchall():
            db.execute(f"DROP TABLE {name}")
        db.executescript(_SCHEMA)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


#: The figures' columns with samples and nodes left empty (``'[]'``).
_LIGHT_COLUMNS = ("site, run_id, test, check_name, system, partition, environ, variable, "
                  "value, unit, better, capability, '[]', params, '[]', rounds, verdict, reason")


def _measurement(row, decoded=None):
    """A Measurement of an index row; *decoded* (JSON text to value) is
    shared by the rows of one query: a check's parameters repeat every run."""
    (_, _, test, check, system, partition, environ, variable, value, unit, better,
     capability, samples, params, nodes, rounds, verdict, reason) = row
    decoded = {} if decoded is None else decoded
    for text in (params, nodes):
        if text not in decoded:
            decoded[text] = json.loads(text)
    m = results.Measurement(test=test, check=check, system=system, partition=partition,
                            environ=environ, variable=variable, value=value, unit=unit or "",
                            better=better, capability=capability or "",
                            samples=[] if samples == "[]" else json.loads(samples),
                            params=dict(decoded[params]),
                            nodes=list(decoded[nodes]), rounds=rounds or 1, result="pass")
    m.verdict, m.verdict_reason = verdict, reason
    return m


def _read_run(run_dir):
    """(state, reason, run.json, report) by the rules of
    :func:`hpc_health.store.scan`; state None for a run still in progress."""
    try:
        meta = json.loads((run_dir / "run.json").read_text())
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as err:
        return "damaged", f"run.json unreadable ({err})", None, None
    if "exit_code" not in meta:
        if rundirs.alive(meta):
            return None, None, meta, None
        return "damaged", ("the run never finished (its process was killed, or the machine "
                           "stopped): no verdicts"), meta, None
    if meta.get("exit_code") not in rundirs.JUDGED_EXITS or \
            not (run_dir / "report.json").exists():
        return "incomplete", str(meta.get("why") or "no run report (a configuration error or "
                                 "an early stop)"), meta, None
    try:
        report = results.load_report(run_dir / "report.json")
    except ConfigError as err:
        return "damaged", str(err).split(": ", 1)[-1], meta, None
    return "ok", None, meta, report


def _stored_verdicts(run_dir):
    try:
        data = json.loads((run_dir / rundirs.VERDICTS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for v in data if isinstance(data, list) else []:
        if isinstance(v, dict):
            out[(v.get("check"), v.get("partition"), v.get("environ"), v.get("variable"))] = \
                (v.get("verdict"), v.get("reason"))
    return out


def open_index(say: Callable[[str], Any] = _say) -> closing[Index]:
    return closing(Index(say))


def index_run(run_dir: str | Path) -> None:
    """Add a stored run to the store's index; a failure to index loses
    nothing (the index is rebuilt from the run directories when read)."""
    try:
        with open_index() as idx:
            idx.add(Path(run_dir))
    except Exception as err:   # the run is stored; the index can wait
        print(f"hpc-health: the run is stored, but the index was not updated ({err}); "
              "it is brought up to date when next read", file=sys.stderr)
