"""``hpc-health run``: ReFrame does the running, we add judgement and memory."""

import dataclasses
import errno
import functools
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

from hpc_health import paths, processes
from hpc_health.cli import table
from hpc_health.errors import ConfigError
from hpc_health.judge import drift, results, verdicts
from hpc_health.judge.drift import DRIFT_NIGHTS
from hpc_health.paths import os_hint
from hpc_health.run import nodecare, prebuild
from hpc_health.run.command import (
    gather_early_logs,
    left_out_tags,
    reframe_command,
    reframe_environ,
    rounds_for,
)
from hpc_health.run.console import (
    Progress,
    ProgressFilter,
    adoption_lines,
    broad_line,
    drift_lines,
    header,
    next_step,
)
from hpc_health.run.preflight import check_free_space, check_note, check_run_tags, validate
from hpc_health.run.provenance import (
    base_provenance,
    collect_spack_records,
    site_capabilities,
    site_hardware,
    software_stack,
)
from hpc_health.run.signals import StopNow, Stopped, StopSignals, stop_process_group
from hpc_health.site.spack_kit import find_spack
from hpc_health.store import baseline, capture, index, rundirs

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


def _run(stop, site_name, partition=None, tags=(), extra=(), list_only=False, per_node=False,
         out=sys.stdout, rounds=None, adopt_baseline=False, chosen_because="--site",
         run_tags=(), note="", tuning=False, drain=False, resume_healthy=False):
    site, refs = validate(site_name, partition)
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

    check_free_space(paths.store_root())
    # Whatever the run starts and orphans (a benchmark whose launcher died)
    # becomes our child, so that nothing of it outlives the run.
    processes.become_subreaper()
    # Before the run exists: a Slurm that cannot be reached stops it here.
    reserved = nodecare.before(site, partition) if resume else None
    run_dir = rundirs.new_run_dir(site.name)
    rundirs.reserve_space(run_dir)
    report_path = run_dir / "report.json"
    extras = {"hpc_health_site": site.name, "hpc_health_run": run_dir.name}
    if run_tags:
        extras["hpc_health_tags"] = ";".join(run_tags)
    if note:
        extras["hpc_health_note"] = note.replace(",", ";")
    cmd = reframe_command(site, partition, tags, extra, prefix=run_dir,
                          report=report_path, per_node=per_node, rounds=rounds, extras=extras,
                          left_out=left_out)
    run_hw = site_hardware(site, partition)
    meta = {**base_provenance(site), "run_id": run_dir.name, "pid": os.getpid(),
            "partition": partition, "select_tags": list(tags), "tags": list(run_tags),
            "note": note, "per_node": per_node, "left_out_tags": list(left_out),
            "rounds": rounds, "hardware": run_hw, "reframe_args": list(extra),
            "capabilities": site_capabilities(site, partition),
            "command": cmd, "started": _now()}
    rundirs.write_json(run_dir / "run.json", meta)
    base = baseline.status(site, refs, run_hw, pending=True)
    for line in header(site, run_dir, run_hw, refs, base, rounds, partition):
        print(line, file=out)
    if left_out:
        print(f"  {TUNING_LEFT_OUT}", file=out)
    if reserved:
        print(f"  {reserved.describe()}", file=out)
    print(file=out, flush=True)

    env = {**reframe_environ(run_dir.name, run_dir / "reframe-debug.log"),
           **(reserved.env() if reserved else {})}
    began = time.time()
    shown = ProgressFilter()
    progress = Progress(previous_duration(site.name, meta))
    proc = None
    stop.arm()
    with _Kept(run_dir / "reframe.out") as log:
        try:
            sp = site.settings.get("spack") or {}
            parallel = prebuild.workers(sp.get("parallel_builds"))
            # Without Spack the fixtures skip, saying why: nothing to build.
            if parallel > 1 and find_spack(sp.get("spack_root")):
                dry = reframe_command(site, partition, tags, extra, prefix=run_dir / "prebuild",
                                      report=run_dir / "prebuild" / "report.json",
                                      per_node=per_node, dry_run=True, left_out=left_out)
                meta["prebuild"] = prebuild.prebuild(
                    dry, run_dir / "prebuild", env, parallel,
                    lambda line: print(line, file=out, flush=True))
                # The pace of the checks, not of the builds.
                progress.start = progress.clock()
            # ReFrame in its own process group: a stop reaches every benchmark
            # it started, and a Ctrl-C at the terminal reaches only us, who
            # pass it on.
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, bufsize=1, env=env, start_new_session=True,
                                    preexec_fn=functools.partial(processes.child_setup,
                                                                 os.getpid()))
            for line in proc.stdout:
                log.write(line)
                if shown(line):
                    out.write(line)
                    where = progress(line)
                    if where:
                        out.write(where + "\n")
                    out.flush()
            proc.wait()
        except Stopped as err:
            try:
                print(f"\nhpc-health: {err.name} received: stopping ReFrame and its jobs; the "
                      "checks that completed are judged and kept", file=sys.stderr, flush=True)
                if proc is not None:
                    stop_process_group(proc)
                    log.write(proc.stdout.read() if proc.stdout else "")
            except StopNow:
                if proc is not None:
                    processes.stop_group(proc, ((signal.SIGKILL, 1.0),))
    stop.closing()
    gather_early_logs(began, site.reframe_config, run_dir / "reframe-start.log")
    rundirs.release_reserve(run_dir)
    if log.lost is not None:
        print(f"hpc-health: {run_dir / 'reframe.out'}: {log.lost.strerror or log.lost} after "
              f"{log.kept} bytes: the rest of ReFrame's output was not kept "
              f"({os_hint(log.lost)})", file=sys.stderr)
    left = processes.stop_descendants(grace=1.0)
    if left:
        meta["left_behind"] = [f"{name} ({pid})" for pid, name in left]
        print(f"hpc-health: stopped {len(left)} process(es) the run left behind: "
              + ", ".join(meta["left_behind"]), file=sys.stderr)
    interrupted = stop.signum is not None
    exit_interrupted = 128 + (stop.signum or signal.SIGINT)

    spack = collect_spack_records(run_dir)
    stack, stack_hash = software_stack(spack)
    meta.update(finished=_now(), reframe_exit_code=proc.returncode if proc else None,
                interrupted=interrupted, spack=spack, stack=stack, stack_hash=stack_hash)
    if interrupted:
        meta["stopped_by"] = signal.Signals(stop.signum).name
    report, unreadable = None, None
    try:
        report = results.load_report(report_path)
    except ConfigError as err:
        unreadable = str(err)
    if report is None:
        if reserved:
            nodecare.restore(reserved, sys.stderr)
        meta["exit_code"] = exit_interrupted if interrupted else EXIT_USAGE
        rundirs.write_json(run_dir / "run.json", meta)
        if proc is None:
            print("\nhpc-health: stopped while Spack built, before any check ran; "
                  f"the builds' output is in {run_dir / 'prebuild'}", file=sys.stderr)
            return meta["exit_code"]
        if interrupted and log.lost is None and not _started_a_check(run_dir / "reframe.out"):
            print(f"\nhpc-health: stopped by {meta['stopped_by']} before ReFrame ran a check; "
                  f"its output is in {run_dir / 'reframe.out'}", file=sys.stderr)
            return meta["exit_code"]
        if proc.returncode == 0 and log.lost is None and \
                _ran_no_check(run_dir / "reframe.out"):
            chosen = " ".join([*(f"-t {t}" for t in tags), *extra]) or "the site's checks"
            print(f"\nhpc-health: no check matched {chosen}: ReFrame ran none (a build "
                  f"fixture such as StreamBuild is not a check of its own); "
                  f"`hpc-health run --site {site.name} --list` names them", file=sys.stderr)
            return meta["exit_code"]
        tail = "".join(_last_lines(run_dir / "reframe.out", 15))
        free = shutil.disk_usage(run_dir).free
        # The reserve released: a full store shows its 4 MiB free again.
        filled = getattr(log.lost, "errno", None) == errno.ENOSPC or \
            free < rundirs.RESERVE_BYTES + (1 << 20)
        full = (f"; the store's file system filled during the run ({free >> 20} MiB free "
                f"in {run_dir.parent} now): free space or point HPC_HEALTH_STORE elsewhere"
                if filled else "")
        print(f"\nhpc-health: ReFrame exited with {proc.returncode}: {unreadable}{full}; "
              f"ReFrame's last lines:\n{tail}", file=sys.stderr)
        return meta["exit_code"]

    measurements = results.measurements(report)
    base = baseline.status(site, refs, run_hw, pending=baseline.counts(meta) and not interrupted,
                           measurements=measurements)
    verdict_list = verdicts.judge_all(measurements, refs, run_hw,
                                      baseline=_baseline_labels(base))
    if per_node:
        verdict_list = verdicts.node_outliers(verdict_list,
                                              site.settings.get("per_node_min_change"))
    code = exit_interrupted if interrupted else verdicts.exit_code(verdict_list)
    meta.update(exit_code=code, verdicts=table.summary(verdict_list))
    # The table first: what was measured is shown whatever the store does.
    print("\n" + table.render(verdict_list), file=out, flush=True)
    rundirs.write_verdicts(run_dir, verdict_list)
    rundirs.write_json(run_dir / "run.json", meta)
    _index(run_dir)
    # Across nights: a per-node run's copies and a stopped run's half are
    # not nights of the series.
    drifts, whole = ([], None) if interrupted or per_node else \
        _across_nights(site, refs, run_dir.name)
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
    if per_node:
        try:
            meta["slurm"] = nodecare.after(
                site, refs, run_dir.name, report, verdict_list, drain=drain, resume=resume,
                reserved=reserved, interrupted=interrupted, rounds=rounds, out=out)
        except ConfigError as err:     # Slurm failed (exit 2): said, kept with the run
            meta["slurm_error"] = str(err)
            raise
        finally:
            rundirs.write_json(run_dir / "run.json", meta)
            _index(run_dir)
    if drifts or whole is not None:
        rundirs.write_json(run_dir / "run.json", meta)
        _index(run_dir)
    state = "INTERRUPTED" if interrupted else {
        EXIT_HEALTHY: "HEALTHY", EXIT_UNHEALTHY: "UNHEALTHY", EXIT_DRIFTING: "DRIFTING"}.get(
        code, "ERROR")
    summary = table.summary(verdict_list) + (f"; {len(drifts)} DRIFTING" if drifts else "") \
        + (f"; {whole.word}" if whole is not None and whole.word else "")
    print(f"\nhpc-health: {state} ({summary}); exit {code}", file=out)
    adopted = False
    if base.collecting and not interrupted:
        # This run counts now that it is stored with its verdicts.
        base = baseline.status(site, refs, run_hw, pending=False, measurements=measurements)
        if base.complete and adopt_baseline:
            written, proposals = baseline.adopt(site, base)
            adopted = capture.summary(proposals)[0] > 0
            for line in adoption_lines(base, written, proposals):
                print(line, file=out)
    print(next_step(site, verdict_list, base, run_dir, adopted, drifts, whole,
                    meta.get("stopped_by")), file=out)
    return code


def _ran_no_check(reframe_out):
    try:
        return "Running 0 check(s)" in reframe_out.read_text(errors="replace")
    except OSError:
        return False


def _started_a_check(reframe_out):
    """Whether ReFrame's output shows a test case started."""
    try:
        return "RUN     " in reframe_out.read_text(errors="replace")
    except OSError:
        return True     # unknown: say what is known, ReFrame's last lines


class _Kept:
    """ReFrame's output into reframe.out, as much of it as the disk takes
    (ReFrame's pipe is read to its end all the same)."""

    def __init__(self, path):
        self.fp, self.kept, self.lost = open(path, "w", buffering=1), 0, None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.fp.close()     # closed even when its last flush fails
        except OSError as err:
            self.lost = self.lost or err
        return False

    def write(self, text):
        if self.lost is None:
            try:
                self.fp.write(text)
                self.kept += len(text)
            except OSError as err:
                self.lost = err


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
            return drift.across_nights(idx, idx.listing(site.name).runs, refs, run_id)
    except Exception as err:     # any: the night is judged and kept already
        print(f"hpc-health: the drift test over the stored runs could not run "
              f"({type(err).__name__}: {err}); tonight's verdicts stand", file=sys.stderr)
        return [], None


def previous_duration(site_name, meta):
    """Seconds the checks of the last completed run of the same selection
    took (its Spack pre-build left out: the clock starts after this run's),
    or None."""
    same = ("partition", "select_tags", "reframe_args", "per_node", "rounds")
    for _, prev in reversed(rundirs.list_runs(site_name)):
        if prev.get("run_id") == meta.get("run_id") or prev.get("exit_code") not in \
                (EXIT_HEALTHY, EXIT_UNHEALTHY, EXIT_DRIFTING):
            continue
        if any(prev.get(k) != meta.get(k) for k in same):
            continue
        try:
            start = time.strptime(prev["started"], "%Y-%m-%dT%H:%M:%SZ")
            end = time.strptime(prev["finished"], "%Y-%m-%dT%H:%M:%SZ")
        except (KeyError, TypeError, ValueError):
            continue
        built = (prev.get("prebuild") or {}).get("seconds") or 0.0
        return max(time.mktime(end) - time.mktime(start) - float(built), 0.0)
    return None


def _baseline_labels(base):
    """What a figure without reference says of the baseline ("baseline 2/5")."""
    if not base.collecting:
        return ""
    return lambda m: (base.label_of(baseline.case_of(m))
                      if baseline.case_of(m) in base.cases else "")


def judge_report(report, refs=None, run_hardware=None, baseline=""):
    """Verdicts of a stored run report (``hpc-health report``)."""
    return verdicts.judge_all(results.measurements(report), refs, run_hardware,
                              baseline=baseline)


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _last_lines(path, count):
    """ReFrame's last lines, without the blocks Python's logging prints when
    a log file cannot be written (``--- Logging error ---`` ... ``Arguments:``:
    its debug log is in the run directory, so a full store makes every later
    log call print one)."""
    kept, skipping = [], False
    with open(path, errors="replace") as fp:
        for line in fp:
            if line.startswith("--- Logging error ---"):
                skipping = True
            elif skipping and line.startswith("Arguments:"):
                skipping = False
            elif not skipping:
                kept.append(line)
    return kept[-count:]

