"""The results store: one directory per run, holding ReFrame's JSON run
report (the data) and ``run.json`` (our provenance: site, software stack,
nodes, time; collected by :mod:`hpc_health.run.provenance`).  Everything
that reads results reads from here; nothing re-runs a benchmark to answer a
question about the past."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpc_health import processes
from hpc_health.model.runs import runs_dir

if TYPE_CHECKING:
    from hpc_health.judge.verdicts import Verdict

#: The verdicts a run was judged with when it was stored.
VERDICTS_FILE = "verdicts.json"
#: Where a run keeps the retest of its one-night failures (ReFrame's stage,
#: output and report of it; hpc_health.judge.confirm).
RETEST_DIR = "retest"
#: Exit code of a run whose figures passed but some stayed worse over the
#: recent runs (hpc_health.judge.drift).
EXIT_DRIFTING = 3
#: Exit codes of runs whose report holds judged figures: healthy, unhealthy,
#: drifting, and stopped by a signal (what completed was judged).
JUDGED_EXITS = (0, 1, EXIT_DRIFTING, 130, 129, 143)


def new_run_dir(site: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = runs_dir(site)
    base.mkdir(parents=True, exist_ok=True)
    for i in range(1000):
        d = base / (stamp if i == 0 else f"{stamp}-{i}")
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot create a run directory under {base}")


#: Held in every run directory until the run is closed: when the disk fills
#: during a run, its verdicts and run.json still fit (4 MiB: a full local
#: run's verdicts.json and run.json are under 200 KiB).
RESERVE_FILE, RESERVE_BYTES = ".reserve", 4 << 20


def reserve_space(run_dir: Path) -> None:
    try:
        with open(run_dir / RESERVE_FILE, "wb") as fp:
            fp.write(bytes(RESERVE_BYTES))
            fp.flush()
            os.fsync(fp.fileno())
    except OSError:
        release_reserve(run_dir)    # the free-space check before the run saw 64 MiB


def release_reserve(run_dir: Path) -> None:
    try:
        (run_dir / RESERVE_FILE).unlink()
    except OSError:
        pass


def write_json(path: str | Path, data: Any) -> None:
    """Write atomically: an interrupted run or a full disk must not leave a
    truncated file that later reads take for data."""
    tmp = Path(str(path) + ".tmp")
    try:
        with open(tmp, "w") as fp:
            json.dump(data, fp, indent=1, sort_keys=True)
            fp.flush()
            os.fsync(fp.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)     # ours, half-written
        raise


def write_verdicts(run_dir: Path, verdict_list: Sequence[Verdict]) -> None:
    """The verdicts as judged tonight, kept with the run: what history,
    compare and exports show, whatever the references say later."""
    write_json(run_dir / VERDICTS_FILE, [
        {"check": v.measurement.check, "partition": v.measurement.partition_fullname,
         "environ": v.measurement.environ, "variable": v.measurement.variable,
         "verdict": v.verdict, "reason": v.reason} for v in verdict_list])


@dataclass
class Scan:
    """The runs of the store that can be read, and those that cannot, with
    why: a damaged run is named wherever runs are read, never dropped
    silently."""
    runs: list = field(default_factory=list)      # [(run_dir, run.json)], oldest first
    damaged: list = field(default_factory=list)   # [(run id, reason)]


def alive(meta: dict[str, Any]) -> bool:
    """Is the run's own process still running (a run in progress)?"""
    pid = meta.get("pid")
    if not isinstance(pid, int) or meta.get("hostname") != socket.gethostname():
        return False
    return processes.alive(pid)


def unfinished_before(run_dir: Path) -> tuple[str, dict[str, Any]] | None:
    """(run id, run.json) of the run stored just before *run_dir* when it
    never finished (killed with -9, the OOM killer, a machine that stopped),
    else None.  Only the previous directory is read: a run starts in a
    second, whatever the store holds."""
    earlier = [d.name for d in run_dir.parent.iterdir()
               if d.is_dir() and not d.name.startswith(".") and d.name < run_dir.name]
    if not earlier:
        return None
    prev = run_dir.parent / max(earlier)
    try:
        meta = json.loads((prev / "run.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or "exit_code" in meta or alive(meta):
        return None
    return prev.name, meta


def scan(site: str | None = None) -> Scan:
    """Every stored run of *site* (or all sites), sorted by start."""
    found = Scan()
    base = runs_dir(site)
    if not base.is_dir():
        return found
    pattern = "*/run.json" if site else "*/*/run.json"
    for path in sorted(base.glob(pattern)):
        try:
            meta = json.loads(path.read_text())
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as err:
            found.damaged.append((path.parent.name, f"run.json unreadable ({err})"))
            continue
        if "exit_code" not in meta:
            if not alive(meta):
                found.damaged.append((path.parent.name, "the run never finished (its process "
                                      "was killed, or the machine stopped): no verdicts"))
            continue
        if meta.get("exit_code") not in JUDGED_EXITS or \
                not (path.parent / "report.json").exists():
            continue    # a configuration error or a run stopped before any report
        found.runs.append((path.parent, meta))
    found.runs.sort(key=lambda r: r[1].get("started", ""))
    return found


def list_runs(site: str | None = None) -> list[tuple[Path, dict[str, Any]]]:
    """Stored runs with a report, oldest first: (run_dir, run.json data)."""
    return scan(site).runs
