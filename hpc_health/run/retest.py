"""The retest: the checks whose figures failed on one night alone run again
by ReFrame, minutes later, before the night is closed; each such failure
stands only if its retest fails too (:mod:`hpc_health.judge.confirm` says
why).  Site setting ``retest: false`` turns it off.

The retest runs the failed test cases only (ReFrame's ``-n /HASH``), with
the night's partition, rounds and ReFrame options but none of its
selections, in ``<run>/retest`` (its stage, output and report: what
``report`` and the exports read again later).  A stop during it stops
ReFrame as during the night; the failures then stand unconfirmed.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

from hpc_health import processes
from hpc_health.errors import ConfigError
from hpc_health.judge import confirm
from hpc_health.run.command import reframe_command, reframe_environ, start_reframe
from hpc_health.run.console import ProgressFilter
from hpc_health.run.reframe_output import Kept, relay
from hpc_health.run.signals import Stopped, stop_process_group
from hpc_health.store import judged, rundirs

#: ReFrame options that choose checks: the retest chooses its own.
_SELECTING = ("-n", "--name", "-t", "--tag", "-x", "--exclude", "-T", "--exclude-tag",
              "--failed")


def retest(night: Any, report: dict[str, Any], verdict_list: list, past: dict) -> list:
    """*verdict_list* with its one-night failures confirmed or withdrawn by
    a retest of their checks (unchanged when there are none, or the site
    has no retest)."""
    todo = confirm.wanted(verdict_list)
    if not todo or night.site.settings.get("retest", True) is False or \
            night.stop.late is not None:
        return verdict_list
    hashes = _hashes(report, {v.measurement.check for v in todo})
    names = sorted({v.measurement.check for v in todo})
    out, rdir = night.out, night.run_dir / rundirs.RETEST_DIR
    if not hashes:      # a report without ReFrame's hashes: nothing to select them by
        print("hpc-health: no retest: the run report names no test case hash", file=out)
        return verdict_list
    print(f"\nhpc-health: {len(todo)} figure(s) failed on this night alone: measuring "
          f"{len(names)} check(s) again before judging them ({'; '.join(names)})",
          file=out, flush=True)
    extra = [*_not_selecting(night.extra), *(f"-n/{h}" for h in hashes)]
    cmd = reframe_command(night.site, night.partition, (), extra, prefix=rdir,
                          report=rdir / "report.json", rounds=night.rounds or 1,
                          extras={"hpc_health_site": night.site.name,
                                  "hpc_health_run": night.run_dir.name,
                                  "hpc_health_retest": "1"})
    night.meta["retest"] = said = {"checks": names, "figures": len(todo)}
    said["reframe_exit_code"] = _reframe(cmd, night, rdir)
    if night.stop.signum is not None:
        said["stopped_by"] = signal.Signals(night.stop.signum).name
        return verdict_list
    try:
        after = judged.with_retest(verdict_list, night.run_dir, night.refs, night.run_hw,
                                   past, night.site.settings)
    except ConfigError as err:      # a reference file that changed meanwhile: say, keep
        said["error"] = str(err)
        return verdict_list
    said["confirmed"] = sum(1 for v in after if v.retest == "confirmed")
    said["withdrawn"] = sum(1 for v in after if v.retest == "withdrawn")
    print(f"hpc-health: retest: {said['confirmed']} of {len(todo)} confirmed", file=out,
          flush=True)
    return after


def _hashes(report: dict[str, Any], checks: set[str]) -> list[str]:
    """ReFrame's hash of each test case named *checks* in the night's report."""
    found = set()
    for run in report.get("runs") or []:
        for case in run.get("testcases") or []:
            if case.get("display_name") in checks and case.get("hashcode"):
                found.add(case["hashcode"])
    return sorted(found)


def _not_selecting(extra: tuple) -> list[str]:
    """The night's ReFrame options without those that choose checks."""
    kept, skip = [], False
    for arg in extra:
        if skip:
            skip = False
            continue
        name = arg.split("=")[0]
        if name in _SELECTING:
            skip = "=" not in arg
            continue
        if arg[:2] in ("-n", "-t", "-x", "-T") and len(arg) > 2 and not arg.startswith("--"):
            continue
        kept.append(arg)
    return kept


def _reframe(cmd: list[str], night: Any, rdir: Any) -> int | None:
    """ReFrame for the retest, its progress shown and its output kept;
    its exit code (None when a stop ended it)."""
    rdir.mkdir(parents=True, exist_ok=True)
    env = reframe_environ(night.run_dir.name, rdir / "reframe-debug.log")
    shown, proc = ProgressFilter(), None
    with Kept(rdir / "reframe.out") as log:
        try:
            night.stop.arm()
            proc = start_reframe(cmd, env)
            relay(proc, log, night.out, shown)
        except Stopped as err:
            print(f"\nhpc-health: {err.name} received: stopping the retest; the night's "
                  "failures stand, unconfirmed", file=sys.stderr, flush=True)
            if proc is not None:
                stop_process_group(proc)
            return None
        finally:
            night.stop.closing()
            processes.stop_descendants(grace=1.0)
    return proc.returncode
