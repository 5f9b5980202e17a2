"""``hpc-health run``: ReFrame does the running, we add judgement and memory."""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from typing import Any

from hpc_health import paths, processes
from hpc_health.errors import ConfigError
from hpc_health.judge import drift, verdicts
from hpc_health.judge.drift import DRIFT_NIGHTS
from hpc_health.model import results
from hpc_health.paths import os_hint
from hpc_health.render import table
from hpc_health.run import nodecare, retest
from hpc_health.run.command import (
    gather_early_logs,
    left_out_tags,
    reframe_command,
    reframe_environ,
    rounds_for,
    start_reframe,
)
from hpc_health.run.console import (
    Progress,
    ProgressFilter,
    adoption_lines,
    broad_line,
    drift_lines,
    header,
    next_step,
    previous_duration,
)
from hpc_health.run.preflight import check_free_space, check_note, check_run_tags, validate
from hpc_health.run.provenance import (
    base_provenance,
    collect_spack_records,
    site_capabilities,
    site_hardware,
    software_stack,
)
from hpc_health.run.reframe_output import Kept, last_lines, ran_no_check, relay, started_a_check
from hpc_health.run.signals import StopNow, Stopped, StopSignals, stop_process_group
from hpc_health.spack import prebuild
from hpc_health.spack.kit import find_spack
from hpc_health.stats.gate import FALSE_ALARM_BUDGET
from hpc_health.store import baseline, capture, index, judged, rundirs, runsets

EXIT_HEALTHY, EXIT_UNHEALTHY, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
#: Tonight passed, but a figure has stayed worse over the recent runs.
EXIT_DRIFTING = rundirs.EXIT_DRIFTING
# Stopped by a signal: 128 + its number (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
TUNING_LEFT_OUT = ("tuning:     the sweeps (tag tuning) are left out: run them after an upgrade "
                   "or weekly with --tuning (docs/tuning.md)")


def run(*args, **kwargs):
    """Run a site's checks.  *tags* select checks (ReFrame's ``-t``);
    *run_tags* and *note* label the run for run sets (``tag:NAME``)."""
    with StopSignals() as stop:
        return _run(stop, *args, **kwargs)


@dataclasses.dataclass
class _Night:
    """One run on its way: what the phases below hand each other."""
    site: Any
    refs: Any
    partition: str | None
    tags: tuple
    extra: tuple
    per_node: bool
    out: Any
    left_out: tuple
    run_dir: Any = None
    meta: dict = dataclasses.field(default_factory=dict)
    run_hw: dict = dataclasses.field(default_factory=dict)
    cmd: list = dataclasses.field(default_factory=list)
    rounds: int | None = None
    drain: bool = False             # --per-node --drain (or the site's setting)
    resume: bool = False            # --per-node --resume-healthy
    reserved: Any = None            # nodecare's reservation of drained nodes, tested again
    stop: Any = None                # the run's StopSignals


def _run(stop, site_name, partition=None, tags=(), extra=(), list_only=False, per_node=False,
         out=sys.stdout, rounds=None, adopt_baseline=False, chosen_because="--site",
         run_tags=(), note="", tuning=False, drain=False, resume_healthy=False):
    site, refs = validate(site_name, partition, figures=True)
    drain, resume = nodecare.wanted(site, drain, resume_healthy) if per_node else (False, False)
    left_out = left_out_tags(tags, extra, tuning)
    run_tags = check_run_tags(run_tags)
    note = check_note(note)
    site.chosen_because = chosen_because
    rounds = rounds_for(site, per_node, rounds)
    if list_only:
        cmd = reframe_command(site, partition, tags, extra, list_only=True, per_node=per_node,
                              left_out=left_out)
        began = time.time()
        code = subprocess.call(cmd, env=reframe_environ())
        gather_early_logs(began, site.reframe_config)
        if left_out:
            print(TUNING_LEFT_OUT, file=out)
        return code
    night = _Night(site, refs, partition, tuple(tags), tuple(extra), per_node, out,
                   tuple(left_out), rounds=rounds, drain=drain, resume=resume, stop=stop)
    _start(night, rounds, run_tags, note)
    proc, log = _reframe(night, stop)
    interrupted = stop.signum is not None
    exit_interrupted = 128 + (stop.signum or signal.SIGINT)
    spack = collect_spack_records(night.run_dir)
    stack, stack_hash = software_stack(spack)
    night.meta.update(finished=_now(), reframe_exit_code=proc.returncode if proc else None,
                      interrupted=interrupted, spack=spack, stack=stack, stack_hash=stack_hash)
    if interrupted:
        night.meta["stopped_by"] = signal.Signals(stop.signum).name
    report, unreadable = None, None
    try:
        report = results.load_report(night.run_dir / "report.json")
    except ConfigError as err:
        unreadable = str(err)
    if report is None:
        if night.reserved:
            nodecare.restore(night.reserved, sys.stderr)
        night.meta["exit_code"] = exit_interrupted if interrupted else EXIT_USAGE
        rundirs.write_json(night.run_dir / "run.json", night.meta)
        _said_why_no_report(night, proc, log, unreadable, interrupted)
        return night.meta["exit_code"]
    return _judged(night, report, interrupted, exit_interrupted, adopt_baseline)


def _start(night, rounds, run_tags, note):
    """The run's directory, its run.json and its header."""
    site, partition = night.site, night.partition
    check_free_space(paths.store_root())
    # Whatever the run starts and orphans (a benchmark whose launcher died)
    # becomes our child, so that nothing of it outlives the run.
    processes.become_subreaper()
    # Before the run exists: a Slurm that cannot be reached stops it here.
    night.reserved = nodecare.before(site, partition) if night.resume else None
    night.run_dir = run_dir = rundirs.new_run_dir(site.name)
    rundirs.reserve_space(run_dir)
    extras = {"hpc_health_site": site.name, "hpc_health_run": run_dir.name}
    if run_tags:
        extras["hpc_health_tags"] = ";".join(run_tags)
    if note:
        extras["hpc_health_note"] = note.replace(",", ";")
    night.cmd = reframe_command(site, partition, night.tags, night.extra, prefix=run_dir,
                                report=run_dir / "report.json", per_node=night.per_node,
                                rounds=rounds, extras=extras, left_out=night.left_out)
    night.run_hw = site_hardware(site, partition)
    night.meta = {**base_provenance(site), "run_id": run_dir.name, "pid": os.getpid(),
                  "partition": partition, "select_tags": list(night.tags),
                  "tags": list(run_tags), "note": note, "per_node": night.per_node,
                  "left_out_tags": list(night.left_out), "rounds": rounds,
                  "hardware": night.run_hw, "reframe_args": list(night.extra),
                  "capabilities": site_capabilities(site, partition),
                  "command": night.cmd, "started": _now()}
    rundirs.write_json(run_dir / "run.json", night.meta)
    base = baseline.status(site, night.refs, night.run_hw, pending=True)
    for line in header(site, run_dir, night.run_hw, night.refs, base, rounds, partition):
        print(line, file=night.out)
    if night.left_out:
        print(f"  {TUNING_LEFT_OUT}", file=night.out)
    if night.reserved:
        print(f"  {night.reserved.describe()}", file=night.out)
    print(file=night.out, flush=True)


def _reframe(night, stop):
    """Spack's pre-build, then ReFrame, its output shown and kept, until it
    ends or a stop signal ends it; (ReFrame's process or None, the log)."""
    site, run_dir, out = night.site, night.run_dir, night.out
    env = {**reframe_environ(run_dir.name, run_dir / "reframe-debug.log"),
           **(night.reserved.env() if night.reserved else {})}
    began = time.time()
    shown = ProgressFilter()
    progress = Progress(previous_duration(site.name, night.meta))
    proc = None
    with Kept(run_dir / "reframe.out") as log:
        try:
            # Armed inside the try: a signal while the log opened raised
            # Stopped where nothing caught it (a traceback and exit 1).
            stop.arm()
            if _prebuild(night, env):
                # The pace of the checks, not of the builds.
                progress.start = progress.clock()
            proc = start_reframe(night.cmd, env)
            relay(proc, log, out, shown, progress)
        except Stopped as err:
            _stopping(err, proc, log)
        finally:
            stop.closing()
    _after_reframe(night, began, log)
    return proc, log


def _prebuild(night, env):
    """The run's Spack spec sets built side by side before the checks;
    whether there were any (without Spack the fixtures skip, saying why)."""
    sp = night.site.settings.get("spack") or {}
    parallel = prebuild.workers(sp.get("parallel_builds"))
    if parallel <= 1 or not find_spack(sp.get("spack_root")):
        return False
    run_dir = night.run_dir
    dry = reframe_command(night.site, night.partition, night.tags, night.extra,
                          prefix=run_dir / "prebuild", report=run_dir / "prebuild" / "report.json",
                          per_node=night.per_node, dry_run=True, left_out=night.left_out)
    night.meta["prebuild"] = prebuild.prebuild(
        dry, run_dir / "prebuild", env, parallel,
        lambda line: print(line, file=night.out, flush=True))
    return True


def _stopping(err, proc, log):
    """A stop signal during the run: ReFrame and its jobs stopped."""
    try:
        print(f"\nhpc-health: {err.name} received: stopping ReFrame and its jobs; the "
              "checks that completed are judged and kept", file=sys.stderr, flush=True)
        if proc is not None:
            stop_process_group(proc)
            log.write(proc.stdout.read() if proc.stdout else "")
    except StopNow:
        if proc is not None:
            processes.stop_group(proc, ((signal.SIGKILL, 1.0),))


def _after_reframe(night, began, log):
    """ReFrame's early logs gathered, the store's reserve released, what
    was lost of its output and what it left running said."""
    run_dir = night.run_dir
    gather_early_logs(began, night.site.reframe_config, run_dir / "reframe-start.log")
    rundirs.release_reserve(run_dir)
    if log.lost is not None:
        print(f"hpc-health: {run_dir / 'reframe.out'}: {log.lost.strerror or log.lost} after "
              f"{log.kept} bytes: the rest of ReFrame's output was not kept "
              f"({os_hint(log.lost)})", file=sys.stderr)
    left = processes.stop_descendants(grace=1.0)
    if left:
        night.meta["left_behind"] = [f"{name} ({pid})" for pid, name in left]
        print(f"hpc-health: stopped {len(left)} process(es) the run left behind: "
              + ", ".join(night.meta["left_behind"]), file=sys.stderr)


def _said_why_no_report(night, proc, log, unreadable, interrupted):
    """Why a run has no report to judge, on stderr and in run.json."""
    run_dir, meta = night.run_dir, night.meta
    if proc is None:
        print("\nhpc-health: stopped while Spack built, before any check ran; "
              f"the builds' output is in {run_dir / 'prebuild'}", file=sys.stderr)
        _keep_why(run_dir, meta, f"stopped by {meta.get('stopped_by')} while Spack built, "
                  "before any check ran")
        return
    if interrupted and log.lost is None and not started_a_check(run_dir / "reframe.out"):
        print(f"\nhpc-health: stopped by {meta['stopped_by']} before ReFrame ran a check; "
              f"its output is in {run_dir / 'reframe.out'}", file=sys.stderr)
        _keep_why(run_dir, meta, f"stopped by {meta['stopped_by']} before ReFrame ran a check")
        return
    if proc.returncode == 0 and log.lost is None and ran_no_check(run_dir / "reframe.out"):
        chosen = " ".join([*(f"-t {t}" for t in night.tags), *night.extra]) \
            or "the site's checks"
        print(f"\nhpc-health: no check matched {chosen}: ReFrame ran none (a build "
              f"fixture such as StreamBuild is not a check of its own); "
              f"`hpc-health run --site {night.site.name} --list` names them", file=sys.stderr)
        return
    tail = "".join(last_lines(run_dir / "reframe.out", 15))
    free = shutil.disk_usage(run_dir).free
    # The reserve released: a full store shows its 4 MiB free again.
    filled = getattr(log.lost, "errno", None) == errno.ENOSPC or \
        free < rundirs.RESERVE_BYTES + (1 << 20)
    full = (f"; the store's file system filled during the run ({free >> 20} MiB free "
            f"in {run_dir.parent} now): free space or point HPC_HEALTH_STORE elsewhere"
            if filled else "")
    print(f"\nhpc-health: ReFrame exited with {proc.returncode}: {unreadable}{full}; "
          f"ReFrame's last lines:\n{tail}", file=sys.stderr)
    _keep_why(run_dir, meta, f"ReFrame exited with {proc.returncode}: {unreadable}{full}")


def _judged(night, report, interrupted, exit_interrupted, adopt_baseline):
    """The run judged, shown, stored, looked at across nights; its exit code."""
    site, refs, run_dir, meta, out = night.site, night.refs, night.run_dir, night.meta, night.out
    measurements = results.measurements(report)
    base = baseline.status(site, refs, night.run_hw,
                           pending=baseline.counts(meta) and not interrupted,
                           measurements=measurements)
    past = {} if night.per_node else judged.past_nights(site.name, run_dir.name,
                                                        meta.get("started"))
    verdict_list = verdicts.judge_all(measurements, refs, night.run_hw,
                                      baseline=_baseline_labels(base), past=past,
                                      settings=site.settings)
    if night.per_node:
        verdict_list = verdicts.node_outliers(verdict_list,
                                              site.settings.get("per_node_min_change"))
    elif not interrupted:
        verdict_list = retest.retest(night, report, verdict_list, past)
        if night.stop.signum is not None:
            interrupted, exit_interrupted = True, 128 + night.stop.signum
    code = exit_interrupted if interrupted else verdicts.exit_code(verdict_list)
    meta.update(exit_code=code, verdicts=table.summary(verdict_list))
    # The table first: what was measured is shown whatever the store does.
    print("\n" + table.render(verdict_list), file=out, flush=True)
    rundirs.write_verdicts(run_dir, verdict_list)
    rundirs.write_json(run_dir / "run.json", meta)
    _index(run_dir)
    # Across nights: a per-node run's copies and a stopped run's half are
    # not nights of the series.
    drifts, whole = ([], None) if interrupted or night.per_node else \
        _across_nights(site, refs, run_dir.name)
    code = _said_across_nights(night, drifts, whole, code)
    if night.per_node:
        _cared_for_nodes(night, report, verdict_list, interrupted)
    state = "INTERRUPTED" if interrupted else {
        EXIT_HEALTHY: "HEALTHY", EXIT_UNHEALTHY: "UNHEALTHY", EXIT_DRIFTING: "DRIFTING"}.get(
        code, "ERROR")
    summary = table.summary(verdict_list) + (f"; {len(drifts)} DRIFTING" if drifts else "") \
        + (f"; {whole.word}" if whole is not None and whole.word else "")
    print(f"\nhpc-health: {state} ({summary}); exit {code}", file=out)
    adopted = False
    if base.collecting and not interrupted:
        # This run counts now that it is stored with its verdicts.
        base = baseline.status(site, refs, night.run_hw, pending=False,
                               measurements=measurements)
        if base.complete and adopt_baseline:
            written, proposals = baseline.adopt(site, base, refs)
            adopted = capture.summary(proposals)[0] > 0
            for line in adoption_lines(base, written, proposals):
                print(line, file=out)
    print(next_step(site, verdict_list, base, run_dir, adopted, drifts, whole,
                    meta.get("stopped_by")), file=out)
    return code


def _cared_for_nodes(night, report, verdict_list, interrupted):
    """A per-node run's nodes drained, resumed or said (docs/per-node.md),
    kept with the run; Slurm failing is exit 2, said and kept too."""
    meta = night.meta
    try:
        meta["slurm"] = nodecare.after(
            night.site, night.refs, night.run_dir.name, report, verdict_list,
            drain=night.drain, resume=night.resume, reserved=night.reserved,
            interrupted=interrupted, rounds=night.rounds, out=night.out)
    except ConfigError as err:     # Slurm failed (exit 2): said, kept with the run
        meta["slurm_error"] = str(err)
        raise
    finally:
        rundirs.write_json(night.run_dir / "run.json", meta)
        _index(night.run_dir)


def _said_across_nights(night, drifts, whole, code):
    """BROADLY WORSE and DRIFTING after the table, kept in run.json; the
    exit code they make."""
    meta, out = night.meta, night.out
    if whole is not None:
        meta["broad"] = dataclasses.asdict(whole)
        if whole.word:
            print("\n" + broad_line(whole), file=out)
            if code in (EXIT_HEALTHY, EXIT_DRIFTING):
                code = meta["exit_code"] = EXIT_UNHEALTHY
    if drifts:
        print("\n" + "\n".join(drift_lines(drifts, DRIFT_NIGHTS)), file=out)
        meta["drifting"] = [{"check": d.trend.check, "variable": d.trend.variable,
                             "partition": d.trend.partition, "since": d.run,
                             "change": d.change, "runs": d.nights,
                             "stack_changed_at": d.stack_changed_at} for d in drifts]
        if code == EXIT_HEALTHY:
            code = meta["exit_code"] = EXIT_DRIFTING
    if drifts or whole is not None:
        rundirs.write_json(night.run_dir / "run.json", meta)
        _index(night.run_dir)
    return code


def _keep_why(run_dir, meta, why):
    """Why a run ended without a report, in its run.json: what ``runs``
    says of it later.  A disk still full keeps the line unsaid, not the run
    (run.json with its exit code is written already)."""
    meta["why"] = why
    try:
        rundirs.write_json(run_dir / "run.json", meta)
    except OSError:
        pass


def _index(run_dir):
    """The run into the store's index, which is derived: a failure costs
    nothing the next command does not rebuild from the run directory."""
    try:
        index.index_run(run_dir)
    except (OSError, sqlite3.Error) as err:
        print(f"hpc-health: the store's index was not updated ({err}); the run is kept and "
              "the next command adds it", file=sys.stderr)


def _across_nights(site, refs, run_id):
    """Figures of run *run_id* that have stayed worse over the stored runs,
    and the night as a whole against the recent ones.  Tonight's verdicts
    are stored already: a store that cannot be read across runs costs these
    tests, said on stderr, not the night."""
    try:
        with index.open_index() as idx:
            # A run dated in the future would be the last of every series,
            # and tonight never: it is no night of the series.
            stored = [r for r in idx.listing(site.name).runs
                      if r.run_id == run_id or runsets.ahead(r) is None]
            return drift.across_nights(idx, stored, refs, run_id,
                                       site.settings.get("false_alarm_budget")
                                       or FALSE_ALARM_BUDGET)
    except Exception as err:     # any: the night is judged and kept already
        print(f"hpc-health: the drift test over the stored runs could not run "
              f"({type(err).__name__}: {err}); tonight's verdicts stand", file=sys.stderr)
        return [], None


def _baseline_labels(base):
    """What a figure without reference says of the baseline ("baseline 2/5")."""
    if not base.collecting:
        return ""
    return lambda m: (base.label_of(baseline.case_of(m))
                      if baseline.case_of(m) in base.cases else "")


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
