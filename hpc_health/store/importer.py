"""``hpc-health import``: the runs of an export added to this store.

Everything is verified before anything is written (:func:`hpc_health.store.portable.read`);
each new run is written into a staging directory of the store and renamed
into place, so a run is there whole or not at all; imports hold
``<store>/.import.lock`` one at a time.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import shutil
import tempfile
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hpc_health import paths, processes
from hpc_health.errors import ConfigError
from hpc_health.store import rundirs
from hpc_health.store.portable import (
    _PATH_KEYS,
    LOCK_FILE,
    STAGING,
    _now,
    _testcases,
    checksum,
    read,
    run_files,
)


def import_lock(root: Path, wait: float,
                say: Callable[[str], Any]) -> AbstractContextManager[None]:
    """One import into a store at a time: wait up to *wait* seconds for
    another, saying so, then refuse."""
    root.mkdir(parents=True, exist_ok=True)
    lock = root / LOCK_FILE
    return processes.held(
        lock, wait,
        lambda holder: say(f"another import into {root} is running ({holder}): waiting up "
                           f"to {wait:g} s for it to finish"),
        lambda holder: ConfigError(lock, f"another import ({holder}) still holds the lock "
                                   f"after {wait:g} s: nothing imported; try again when it "
                                   "has finished"))


@dataclass
class Imported:
    path: Path
    added: list = field(default_factory=list)       # [(Entry, run_dir)]
    present: list = field(default_factory=list)     # [Entry] already in the store
    notes: list = field(default_factory=list)


def _localised(entry, exp, run_dir):
    """The run's files as this store keeps them: testcase paths under
    *run_dir*, and run.json saying where the run came from."""
    files = copy.deepcopy(entry.files)
    meta = files["run.json"]
    meta.setdefault("site", entry.site)
    meta.setdefault("run_id", entry.run_id)
    meta["imported"] = {"from_file": exp.path.name, "at": _now(), "hostname": exp.hostname,
                        "exported": exp.created, "hpc_health": exp.hpc_health,
                        "sha256": entry.sha256}
    for tc in _testcases(files["report.json"]):
        for key in _PATH_KEYS:
            if tc.get(key) is not None:
                tc[key] = str(run_dir) if tc[key] == "." else str(run_dir / tc[key])
    return files


def _stored_sum(run_dir, site, run_id):
    try:
        files, _ = run_files(run_dir, site, run_id)
    except ConfigError as err:
        return None, str(err).split(": ", 1)[-1]
    return checksum(files), None


def import_file(path: str | Path, wait: float = 300,
                say: Callable[[str], Any] = print) -> Imported:
    """Verify the export *path* and add its new runs to the store."""
    exp = read(path)        # before the lock: a bad file writes nothing at all
    root = paths.store_root()
    done = Imported(exp.path)
    with import_lock(root, wait, say):
        new, conflicts = [], []
        for e in exp.runs:
            d = rundirs.runs_dir(e.site) / e.run_id
            if not os.path.lexists(d):
                new.append(e)
                continue
            local, why = _stored_sum(d, e.site, e.run_id)
            if local == e.sha256:
                done.present.append(e)
            else:
                conflicts.append((e, d, why or "with other content"))
        if conflicts:
            e, d, why = conflicts[0]
            more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
            raise ConfigError(exp.path, f"run {e.name} is already in the store ({d}) {why}"
                              f"{more}: a stored run is never overwritten; nothing imported")
        staging = root / STAGING
        if staging.is_dir() and any(staging.iterdir()):
            done.notes.append(f"{staging} holds what an interrupted import left: nothing reads "
                              "it, and it may be deleted when no import is running")
        for site in sorted({e.site for e in new}):
            if _measured_here(site):
                done.notes.append(f"site {site} also has runs measured in this store: the "
                                  "imported ones join its history and run sets")
        if new:
            _place(exp, new, root, done)
    if done.added:
        from hpc_health.store import index
        try:
            with index.open_index() as idx:
                for _, d in done.added:
                    idx.add(d)
        except Exception as err:   # the runs are stored; the index can wait
            done.notes.append(f"the runs are stored, but the index was not updated ({err}); "
                              "it is brought up to date when next read")
    return done


def _measured_here(site):
    base = rundirs.runs_dir(site)
    if not base.is_dir():
        return False
    for d in base.iterdir():
        try:
            meta = json.loads((d / "run.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and "imported" not in meta:
            return True
    return False


def _place(exp, entries, root, done):
    """Stage every new run, then rename each into place; on any failure
    undo what this import did, and only that."""
    staging = root / STAGING
    made_staging = not staging.exists()
    staging.mkdir(parents=True, exist_ok=True)
    staged, placed, made_sites = [], [], []
    try:
        for e in entries:
            final = rundirs.runs_dir(e.site) / e.run_id
            tmp = Path(tempfile.mkdtemp(prefix=f"{e.site}+{e.run_id}.", dir=staging))
            staged.append((e, tmp, final))
            for rel, content in _localised(e, exp, final).items():
                target = tmp / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                rundirs.write_json(target, content)
        for e, tmp, final in staged:
            site_dir = final.parent
            if not site_dir.exists():
                site_dir.mkdir(parents=True)
                made_sites.append(site_dir)
            if os.path.lexists(final):      # appeared since the check above
                raise FileExistsError(errno.EEXIST, "a run appeared meanwhile", str(final))
            os.rename(tmp, final)
            placed.append((e, tmp, final))
        done.added = [(e, final) for e, _, final in placed]
    except BaseException:
        for _, tmp, final in reversed(placed):
            try:
                os.rename(final, tmp)
            except OSError:
                pass
        for site_dir in made_sites:
            try:
                site_dir.rmdir()
            except OSError:
                pass
        raise
    finally:
        for _, tmp, _ in staged:
            shutil.rmtree(tmp, ignore_errors=True)
        if made_staging:
            try:
                staging.rmdir()
            except OSError:
                pass
