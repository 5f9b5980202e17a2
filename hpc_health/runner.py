"""``hpc-health run``: ReFrame does the running, we add judgement and memory."""

import glob
import os
import shutil
import signal
import subprocess
import sys
import time

from hpc_health import paths, references, results, sites, store, table, verdicts
from hpc_health.errors import ConfigError

EXIT_HEALTHY, EXIT_UNHEALTHY, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


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
    refs = None
    if site.reference_file.exists():
        refs = references.load(site.reference_file)
    return site, refs


def reframe_command(site, partition=None, tags=(), extra=(), list_only=False,
                    prefix=None, report=None, per_node=False, rounds=1):
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
        out=sys.stdout, rounds=None):
    site, refs = validate(site_name, partition)
    rounds = rounds_for(site, per_node, rounds)
    if list_only:
        cmd = reframe_command(site, partition, tags, extra, list_only=True, per_node=per_node)
        return subprocess.call(cmd, env=reframe_environ())

    run_dir = store.new_run_dir(site.name)
    report_path = run_dir / "report.json"
    cmd = reframe_command(site, partition, tags, extra, prefix=run_dir,
                          report=report_path, per_node=per_node, rounds=rounds)
    meta = {**store.base_provenance(site), "run_id": run_dir.name,
            "partition": partition, "tags": list(tags), "per_node": per_node,
            "rounds": rounds,
            "command": cmd, "started": _now()}
    store.write_json(run_dir / "run.json", meta)
    print(f"hpc-health: site {site.name}, run {run_dir.name} (results in {run_dir})", file=out)
    print(f"hpc-health: {' '.join(cmd)}", file=out, flush=True)

    interrupted = False
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1, env=reframe_environ())
    log = open(run_dir / "reframe.out", "w")
    try:
        for line in proc.stdout:
            # ReFrame's own [ RUN ] / [ OK ] / [ FAIL ] lines are the progress.
            out.write(line)
            out.flush()
            log.write(line)
        proc.wait()
    except KeyboardInterrupt:
        interrupted = True
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    finally:
        log.close()

    spack = store.collect_spack_records(run_dir)
    stack, stack_hash = store.software_stack(spack)
    meta.update(finished=_now(), reframe_exit_code=proc.returncode,
                interrupted=interrupted, spack=spack, stack=stack, stack_hash=stack_hash)
    if not report_path.exists():
        meta["exit_code"] = EXIT_INTERRUPTED if interrupted else EXIT_USAGE
        store.write_json(run_dir / "run.json", meta)
        tail = "".join(open(run_dir / "reframe.out").readlines()[-15:])
        print(f"\nhpc-health: ReFrame exited with {proc.returncode} and wrote no run "
              f"report; its last lines:\n{tail}", file=sys.stderr)
        return meta["exit_code"]

    verdict_list = judge_report(results.load_report(report_path), refs)
    if per_node:
        verdict_list = verdicts.node_outliers(verdict_list,
                                              site.settings.get("per_node_min_change"))
    code = EXIT_INTERRUPTED if interrupted else verdicts.exit_code(verdict_list)
    meta.update(exit_code=code, verdicts=table.summary(verdict_list))
    store.write_json(run_dir / "run.json", meta)
    print("\n" + table.render(verdict_list), file=out)
    state = {0: "HEALTHY", 1: "UNHEALTHY", 130: "INTERRUPTED"}.get(code, "ERROR")
    print(f"\nhpc-health: {state} ({table.summary(verdict_list)}); exit {code}", file=out)
    return code


def judge_report(report, refs=None):
    return verdicts.judge_all(results.measurements(report), refs)


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
