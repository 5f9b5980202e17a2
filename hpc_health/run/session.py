"""``hpc-health run``: ReFrame does the running, we add judgement and memory."""

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from hpc_health import paths, processes
from hpc_health.cli import table
from hpc_health.errors import ConfigError
from hpc_health.judge import results, verdicts
from hpc_health.site import hardware, sites, spack_kit
from hpc_health.store import baseline, references, rundirs

EXIT_HEALTHY, EXIT_UNHEALTHY, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# Stopped by a signal: 128 + its number (130 SIGINT, 143 SIGTERM, 129 SIGHUP).


def reframe_executable():
    beside = os.path.join(os.path.dirname(sys.executable), "reframe")
    if os.path.isfile(beside):
        return beside
    found = shutil.which("reframe")
    if not found:
        raise ConfigError("reframe", "the reframe command is not installed "
                          "(pip install -e . installs the pinned reframe-hpc)")
    return found


def check_files():
    return sorted(glob.glob(str(paths.repo_root() / "reframe_checks" / "*.py")))


def validate(site_name, partition=None):
    """Everything that can be checked before ReFrame starts; ConfigError
    names file, key and line."""
    site = sites.load(site_name)
    if partition and partition not in site.partitions:
        raise ConfigError(site.settings_file, f"no partition {partition!r} "
                          f"(known: {', '.join(site.partitions)})", keypath="partitions")
    check_site_paths(site)
    refs = None
    if site.reference_file.exists():
        refs = references.load(site.reference_file)
        unknown = sorted(set(refs.tests) - set(check_classes()))
        if unknown:
            raise ConfigError(refs.path, f"references for {', '.join(unknown)}, which no check "
                              f"in {paths.repo_root() / 'reframe_checks'} defines (known: "
                              f"{', '.join(sorted(check_classes()))}): a renamed check?",
                              line=refs.line_of(unknown[0]), keypath=unknown[0])
    return site, refs


def check_classes():
    """Names of the test classes the check files define (read, not run)."""
    import ast
    found = set()
    for path in check_files():
        try:
            tree = ast.parse(open(path).read(), path)
        except (OSError, SyntaxError):
            continue
        found |= {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    return found


#: Free space a run needs in the store: stage directories, builds, outputs
#: (a full local run with its CMake build takes ~20 MiB; Spack builds live
#: in the install tree, elsewhere).
MIN_FREE_MIB = 64


def check_free_space(path, need_mib=MIN_FREE_MIB):
    """Refuse to start a run that would fill the file system mid-way."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free / 2**20
    if free < need_mib:
        raise ConfigError(path, f"only {free:.1f} MiB free in {probe}; a run needs "
                          f"{need_mib} MiB (builds, stage directories, outputs): free space "
                          "or point HPC_HEALTH_STORE elsewhere")


def check_site_paths(site):
    """Every directory a run writes into or builds from, before anything
    starts: the store, this checkout, the partitions' scratch and the Spack
    paths."""
    paths.check_path(paths.store_root(), "HPC_HEALTH_STORE", "the results store")
    paths.check_path(paths.repo_root(), "HPC_HEALTH_ROOT", "the hpc-health checkout")
    for name, part in site.partitions.items():
        if (part or {}).get("scratch"):
            paths.check_path(paths.expand(part["scratch"], site.dir),
                             f"partitions.{name}.scratch", site.settings_file)
    for key in ("install_tree", "env_dir", "builtin_repo", "source_mirror", "spack_root"):
        if site.spack_setting(key):
            paths.check_path(site.spack_setting(key), f"spack.{key}", site.settings_file)


def reframe_command(site, partition=None, tags=(), extra=(), list_only=False,
                    prefix=None, report=None, per_node=False, rounds=1, extras=None):
    system = f"{site.name}:{partition}" if partition else site.name
    cmd = [reframe_executable(), "-C", str(site.reframe_config), "--system", system]
    for c in check_files():
        cmd += ["-c", c]
    for t in tags:
        cmd += ["-t", t]
    if per_node:
        # Every node of the partition runs the single-node checks; the
        # checks confine themselves to one node when per_node is set.
        cmd += ["--distribute=all", "-t", "single_node", "-S", "per_node=1"]
    if rounds > 1:
        # The whole session again, node after node each time: a disturbance
        # that passes (another job, an episode on shared hardware) hits one
        # round of one node, and the median over rounds outvotes it.
        cmd += [f"--reruns={rounds - 1}"]
    if list_only:
        cmd += ["-l"]
    else:
        cmd += ["-r", "--prefix", str(prefix), "--report-file", str(report)]
        if extras:
            # In ReFrame's own results database too, so its stored sessions
            # can be found by the run id and tags hpc-health knows them by.
            cmd += ["--session-extras", ",".join(f"{k}={v}" for k, v in extras.items())]
    cmd += list(site.settings.get("reframe_options") or [])
    cmd += list(extra)
    return cmd


def reframe_environ():
    """ReFrame reads the references next to the checks unless told; tell it,
    so a run always gates on this checkout's reference files."""
    env = dict(os.environ)
    env["RFM_REFERENCE_PREFIX"] = str(paths.repo_root() / "reference")
    return env


def rounds_for(site, per_node, rounds=None):
    """Rounds asked for, else the site's setting: per_node_rounds for
    --per-node runs, rounds for the others (reference captures included)."""
    if rounds is not None:
        return max(1, int(rounds))
    return int(site.settings.get("per_node_rounds" if per_node else "rounds") or 1)


def run(site_name, partition=None, tags=(), extra=(), list_only=False, per_node=False,
        out=sys.stdout, rounds=None, adopt_baseline=False, chosen_because="--site",
        run_tags=(), note=""):
    """Run a site's checks.  *tags* select checks (ReFrame's ``-t``);
    *run_tags* and *note* label the run for run sets (``tag:NAME``)."""
    site, refs = validate(site_name, partition)
    run_tags = check_run_tags(run_tags)
    note = check_note(note)
    site.chosen_because = chosen_because
    rounds = rounds_for(site, per_node, rounds)
    if list_only:
        cmd = reframe_command(site, partition, tags, extra, list_only=True, per_node=per_node)
        return subprocess.call(cmd, env=reframe_environ())

    check_free_space(paths.store_root())
    run_dir = rundirs.new_run_dir(site.name)
    report_path = run_dir / "report.json"
    extras = {"hpc_health_site": site.name, "hpc_health_run": run_dir.name}
    if run_tags:
        extras["hpc_health_tags"] = ";".join(run_tags)
    if note:
        extras["hpc_health_note"] = note.replace(",", ";")
    cmd = reframe_command(site, partition, tags, extra, prefix=run_dir,
                          report=report_path, per_node=per_node, rounds=rounds, extras=extras)
    run_hw = site_hardware(site, partition)
    meta = {**rundirs.base_provenance(site), "run_id": run_dir.name, "pid": os.getpid(),
            "partition": partition, "select_tags": list(tags), "tags": list(run_tags),
            "note": note, "per_node": per_node,
            "rounds": rounds, "hardware": run_hw, "reframe_args": list(extra),
            "capabilities": site_capabilities(site, partition),
            "command": cmd, "started": _now()}
    rundirs.write_json(run_dir / "run.json", meta)
    whole = baseline.counts(meta)
    base = baseline.status(site, refs, run_hw, pending=True if whole else None)
    for line in header(site, run_dir, run_hw, refs, base, rounds, partition):
        print(line, file=out)
    print(file=out, flush=True)

    # ReFrame in its own process group: a stop reaches every benchmark it
    # started, and a Ctrl-C at the terminal reaches only us, who pass it on.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1, env=reframe_environ(),
                            start_new_session=True)
    shown = ProgressFilter()
    with open(run_dir / "reframe.out", "w") as log, StopSignals() as stop:
        try:
            for line in proc.stdout:
                log.write(line)
                if shown(line):
                    out.write(line)
                    out.flush()
            proc.wait()
        except Stopped as err:
            print(f"\nhpc-health: {err.name} received: stopping ReFrame and its jobs; the "
                  "checks that completed are judged and kept", file=sys.stderr, flush=True)
            stop_process_group(proc)
            log.write(proc.stdout.read() if proc.stdout else "")
    interrupted = stop.signum is not None
    exit_interrupted = 128 + (stop.signum or signal.SIGINT)

    spack = rundirs.collect_spack_records(run_dir)
    stack, stack_hash = rundirs.software_stack(spack)
    meta.update(finished=_now(), reframe_exit_code=proc.returncode,
                interrupted=interrupted, spack=spack, stack=stack, stack_hash=stack_hash)
    if interrupted:
        meta["stopped_by"] = signal.Signals(stop.signum).name
    if not report_path.exists():
        meta["exit_code"] = exit_interrupted if interrupted else EXIT_USAGE
        rundirs.write_json(run_dir / "run.json", meta)
        tail = "".join(open(run_dir / "reframe.out").readlines()[-15:])
        print(f"\nhpc-health: ReFrame exited with {proc.returncode} and wrote no run "
              f"report; its last lines:\n{tail}", file=sys.stderr)
        return meta["exit_code"]

    verdict_list = judge_report(results.load_report(report_path), refs, run_hw,
                                baseline=base.label if base.collecting else "")
    if per_node:
        verdict_list = verdicts.node_outliers(verdict_list,
                                              site.settings.get("per_node_min_change"))
    code = exit_interrupted if interrupted else verdicts.exit_code(verdict_list)
    meta.update(exit_code=code, verdicts=table.summary(verdict_list))
    rundirs.write_verdicts(run_dir, verdict_list)
    rundirs.write_json(run_dir / "run.json", meta)
    rundirs.index_run(run_dir)
    print("\n" + table.render(verdict_list), file=out)
    state = "INTERRUPTED" if interrupted else {0: "HEALTHY", 1: "UNHEALTHY"}.get(code, "ERROR")
    print(f"\nhpc-health: {state} ({table.summary(verdict_list)}); exit {code}", file=out)
    if base.collecting and not interrupted:
        # This run counts now that it is stored with its verdicts.
        base = baseline.status(site, refs, run_hw, pending=False if whole else None)
        if base.complete and adopt_baseline:
            written = baseline.adopt(site, base)
            print(f"hpc-health: baseline of {len(base.chosen())} runs adopted: wrote {written}",
                  file=out)
    print(next_step(site, verdict_list, base, run_dir, adopt_baseline), file=out)
    return code


#: A run tag: what ``tag:NAME`` run sets and ReFrame's session extras carry.
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")


def check_run_tags(tags):
    for t in tags:
        if not _TAG.match(t):
            raise ConfigError("--tag", f"{t!r} is not a run tag: letters, digits and _.+- "
                              "(up to 64, starting with a letter or digit)")
    return list(dict.fromkeys(tags))


def check_note(note):
    note = (note or "").strip()
    if any(ord(c) < 32 for c in note):
        raise ConfigError("--note", "a note is one line of text (no control characters)")
    return note


class Stopped(Exception):
    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP -- Ctrl-C, a scheduler's time limit, a CI
    job's cancel button, ``systemctl stop``, a closed terminal -- all stop a
    run the same way: they raise :class:`Stopped` in the main thread once,
    and ``signum`` remembers which came first."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.signum = None
        self._old = {}

    def _handle(self, signum, frame):
        if self.signum is None:
            self.signum = signum
            raise Stopped(signum)

    def __enter__(self):
        for s in self.SIGNALS:
            self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc):
        for s, handler in self._old.items():
            signal.signal(s, handler)
        return False


#: How long ReFrame gets to stop its jobs and write its report after SIGINT.
STOP_GRACE_S = 60


def stop_process_group(proc, grace=STOP_GRACE_S):
    """SIGINT to ReFrame's process group (ReFrame then cancels its jobs and
    writes its report), then SIGTERM, then SIGKILL, each after a grace."""
    processes.stop_group(proc, ((signal.SIGINT, grace), (signal.SIGTERM, 10),
                                (signal.SIGKILL, 10)))


def site_hardware(site, partition=None):
    """{'site:partition': hardware} of the partitions this run uses."""
    parts = [partition] if partition else list(site.partitions)
    found = {}
    for p in parts:
        settings = site.partitions[p] or {}
        hw = hardware.of_partition(settings.get("hardware"), settings.get("nodes"))
        if hw:
            found[f"{site.name}:{p}"] = hw
    return found


def site_capabilities(site, partition=None):
    """{'site:partition': declared capabilities} of this run's partitions:
    kept with the run, so a comparison elsewhere can normalise by them."""
    parts = [partition] if partition else list(site.partitions)
    found = {}
    for p in parts:
        caps = {k: v for k, v in ((site.partitions[p] or {}).get("capabilities") or {}).items()
                if v is not None}
        if caps:
            found[f"{site.name}:{p}"] = caps
    return found


def header(site, run_dir, run_hw, refs, base, rounds, partition=None):
    """What this run is about to do, before ReFrame's progress lines."""
    lines = [f"hpc-health: site {site.name} ({site.chosen_because}), run {run_dir.name}",
             f"  results:    {run_dir}"]
    for p in ([partition] if partition else site.partitions):
        full = f"{site.name}:{p}"
        lines.append(f"  partition:  {full}: {hardware.describe(run_hw.get(full))}")
    if base.collecting:
        lines.append(f"  references: {base.why}; collecting a baseline on this hardware: "
                     f"this run is {base.label}")
    else:
        lines.append(f"  references: {refs.path}")
    lines.append(f"  Spack:      {spack_line(site)}")
    if rounds > 1:
        lines.append(f"  rounds:     {rounds} (the session runs {rounds} times)")
    return lines


def spack_line(site):
    found, how, fix = spack_kit.status(site)
    return how if found else f"{how}: STREAM, OSU and IOR/mdtest will be SKIPPED. To fix: {fix}"


def next_step(site, verdict_list, base, run_dir, adopted=False):
    """One sentence on what to do now."""
    counts = {}
    for v in verdict_list:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    if counts.get(verdicts.DEGRADED) or counts.get(verdicts.OUTLIER):
        worst = next(v for v in verdict_list if v.verdict in (verdicts.DEGRADED, verdicts.OUTLIER))
        m = worst.measurement
        return (f"Next: look at the {worst.verdict} figures above; when it started: "
                f"hpc-health history --site {site.name} --check '{m.test}' --var {m.variable}")
    if counts.get(verdicts.FAIL):
        return (f"Next: the FAIL lines above give each reason; ReFrame's full output is "
                f"{run_dir / 'reframe.out'}")
    if base.complete and adopted:
        return "Next: the next run is judged against the references just written."
    if base.complete:
        return (f"Next: the baseline is complete ({len(base.runs)} runs on this hardware); "
                f"make it the reference: {base.capture_command()}")
    if base.collecting:
        return (f"Next: run again: {base.label} on this hardware; after "
                f"{base.needed} runs, `hpc-health reference capture` turns them into references "
                "(or run with --adopt-baseline)")
    if counts.get(verdicts.SKIPPED):
        return "Next: the SKIPPED lines above say what is missing for those checks."
    if counts.get(verdicts.IMPROVED):
        return ("Next: some figures IMPROVED beyond their bounds: if that change is expected, "
                f"re-capture the references (hpc-health reference capture --site {site.name})")
    return "Next: nothing to do; run it again tomorrow."


class ProgressFilter:
    """Which of ReFrame's lines the terminal shows: its progress lines and
    warnings, not the full FAILURE INFO (hpc-health's table gives each
    failure's reason; everything stays in reframe.out)."""

    def __init__(self):
        self.in_failures = False

    def __call__(self, line):
        if "SUMMARY OF FAILURES" in line:
            self.in_failures = True
        elif self.in_failures and line.startswith("Log file(s) saved"):
            self.in_failures = False
            return False
        if self.in_failures:
            return False
        return line.startswith("[") or "WARNING" in line or "ERROR" in line


def judge_report(report, refs=None, run_hardware=None, baseline=""):
    return verdicts.judge_all(results.measurements(report), refs, run_hardware,
                              baseline=baseline)


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
