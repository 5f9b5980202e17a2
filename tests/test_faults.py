"""Faults and bad input, each driven for real: the message names what was
wrong and where, the exit code is the documented one, and the store and the
other results are intact afterwards.  docs/faults.md lists every case."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from sandbox import REPO, barrier_root, hpc_health, make_root, without_spack
from store_fixtures import case, series, write_run

from hpc_health.jobside import nodeload

FIGURE = ("HaloExchange", "time_8B", "us")


def _stored(store, n=3, start=0):
    values = series("osu_latency_8B")
    ids = []
    for i in range(start, start + n):
        rid = f"20261101T0{i:03d}00Z"
        write_run(store, "local", rid, [case(FIGURE[0], FIGURE[1], values[i], FIGURE[2])],
                  started=f"2026-11-01T0{i}:00:00Z",
                  samples={0: {FIGURE[1]: values[i:i + 3]}})
        ids.append(rid)
    return ids


def _cli(root, *args):
    return hpc_health(root, *args)


@pytest.fixture
def root(tmp_path):
    return make_root(tmp_path, references=False)


def _store(root):
    return root.parent / "store"


# ---- damaged runs are named, never dropped silently ----------------------

def test_a_corrupt_run_json_is_named_by_report_and_history(root):
    ids = _stored(_store(root))
    (_store(root) / "runs" / "local" / ids[1] / "run.json").write_text("{not json")
    rep = _cli(root, "report", "--site", "local")
    assert rep.returncode == 0, rep.stderr
    assert f"skipped 1 damaged run: {ids[1]}: run.json unreadable" in rep.stderr
    assert f"run {ids[2]}" in rep.stdout
    hist = _cli(root, "history", "--site", "local", "--check", FIGURE[0], "--var", FIGURE[1])
    assert f"skipped 1 damaged run: {ids[1]}" in hist.stderr
    assert ids[0] in hist.stdout and ids[2] in hist.stdout and ids[1] not in hist.stdout


def test_a_corrupt_latest_report_shows_the_last_good_run(root):
    ids = _stored(_store(root))
    (_store(root) / "runs" / "local" / ids[2] / "report.json").write_text('{"runs": [')
    rep = _cli(root, "report", "--site", "local")
    assert rep.returncode == 0, rep.stderr
    assert f"skipped 1 damaged run: {ids[2]}: not a ReFrame JSON run report" in rep.stderr
    assert f"run {ids[1]}" in rep.stdout
    named = _cli(root, "report", "--site", "local", ids[2])
    assert named.returncode == 2 and ids[2] in named.stderr


def test_a_run_that_never_finished_is_named_not_read(root):
    ids = _stored(_store(root))
    meta_path = _store(root) / "runs" / "local" / ids[2] / "run.json"
    meta = json.loads(meta_path.read_text())
    for key in ("exit_code", "finished"):
        meta.pop(key)
    meta.update(pid=2 ** 22 + 17, hostname="gone")   # its process is gone
    meta_path.write_text(json.dumps(meta))
    rep = _cli(root, "report", "--site", "local")
    assert rep.returncode == 0
    assert f"{ids[2]}: the run never finished" in rep.stderr
    assert f"run {ids[1]}" in rep.stdout


# ---- a run stopped by a signal ------------------------------------------

def _ours(root):
    """Processes still running from this sandbox (ReFrame, mpirun, ranks)."""
    out = subprocess.run(["pgrep", "-f", str(root.parent)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def _start(root, **extra):
    env = without_spack(dict(os.environ, HPC_HEALTH_ROOT=str(root),
                             HPC_HEALTH_STORE=str(_store(root)), **extra), root)
    return subprocess.Popen([sys.executable, "-m", "hpc_health", "run", "--site", "local"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_for_the_benchmark(root, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["pgrep", "-f", f"{root.parent}.*/build/barrier --iters"],
                             capture_output=True)
        if out.returncode == 0:
            return
        time.sleep(0.5)
    raise AssertionError("the barrier benchmark never started")


def _cpu_seconds(pattern):
    """The least CPU time (s) of the processes matching *pattern*, with at
    least two (the ranks) found; 0.0 otherwise."""
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    times = []
    for pid in found.stdout.split():
        try:
            times.append(nodeload._proc_stat(int(pid))[1])
        except OSError:
            return 0.0
    return min(times) if len(times) >= 2 else 0.0


@pytest.mark.slow
@pytest.mark.parametrize("sig,code,twice", [(signal.SIGTERM, 143, False),
                                            (signal.SIGHUP, 129, False),
                                            (signal.SIGINT, 130, False),
                                            (signal.SIGTERM, 143, True)])
def test_a_stop_signal_stops_reframe_and_its_jobs_and_keeps_the_run(tmp_path, sig, code, twice):
    """Within 10 s (Slurm sends SIGKILL 30 s after SIGTERM; it took under a
    second here); a second signal during the stop changes nothing of the
    closed run."""
    root = barrier_root(tmp_path)
    proc = _start(root)
    try:
        _wait_for_the_benchmark(root)
        t0 = time.monotonic()
        proc.send_signal(sig)
        if twice:
            time.sleep(0.05)
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, out + err
    assert took < 10, f"the stop took {took:.1f} s"
    assert f"{signal.Signals(sig).name} received: stopping ReFrame and its jobs" in err
    # The check it cut short is named as stopped, not as a fault of the machine.
    assert "BarrierLatency: run: stopped before it finished: the run was stopped" in out, out
    assert f"Next: the run was stopped by {signal.Signals(sig).name}" in out, out
    time.sleep(1)
    assert _ours(root) == [], "ReFrame or its benchmarks outlived the run"
    (run_dir,) = (_store(root) / "runs" / "local").iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["exit_code"] == code and meta["stopped_by"] == signal.Signals(sig).name
    assert meta["finished"] and meta["interrupted"] is True
    # Later reads still work and say what they found.
    rep = _cli(root, "report", "--site", "local")
    assert rep.returncode in (0, 1, 2) and "Traceback" not in rep.stderr


@pytest.mark.slow
def test_a_stop_ends_ranks_that_ignore_sigterm_within_10_s(tmp_path):
    """A job that does not stop when asked (ranks ignoring SIGTERM, as a
    hung rank or a wrapper that traps it does): ReFrame's cancel and our
    SIGTERM change nothing, SIGKILL ends them inside the 10 s."""
    from bench.fault_injection.tools import build_pmpi_delay
    root = barrier_root(tmp_path)
    lib = build_pmpi_delay(tmp_path)
    proc = _start(root, OMPI_MCA_mca_base_env_list=f"LD_PRELOAD={lib};FI_IGNORE_SIGTERM=1")
    try:
        _wait_for_the_benchmark(root)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
        time.sleep(1)
        left = _ours(root)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 143, out + err
    assert took < 10, f"the stop took {took:.1f} s"
    assert left == [], "ranks that ignore SIGTERM outlived the run"
    (run_dir,) = (_store(root) / "runs" / "local").iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["finished"] and meta["stopped_by"] == "SIGTERM"


@pytest.mark.slow
@pytest.mark.quiet      # ReFrame must die within 10 s; the guard's 5 s grace leaves less
                        # room under load
def test_kill_9_leaves_a_run_that_later_reads_name(tmp_path):
    root = barrier_root(tmp_path)
    _stored(_store(root), n=1)
    proc = _start(root)
    try:
        _wait_for_the_benchmark(root)
        proc.kill()
        proc.wait(timeout=30)
        # ReFrame dies with it (SIGTERM on its parent's death) and cancels
        # its job: nothing goes on launching benchmarks.
        deadline = time.monotonic() + 10
        while _ours(root) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _ours(root)
    finally:
        for pid in _ours(root):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert left == [], "ReFrame or its benchmark outlived a kill -9 of the run"
    rep = _cli(root, "report", "--site", "local")
    assert rep.returncode == 0, rep.stderr
    assert "the run never finished" in rep.stderr
    assert "run 20261101T000000Z" in rep.stdout


# ---- paths the job scripts cannot hold safely ----------------------------

@pytest.mark.parametrize("store,bad", [("store with space", "' '"),
                                       ("st$(touch PWNED)", "'$( )'"),
                                       ("st`id`", "'`'"), ("a;b", "';'")])
def test_a_store_path_with_shell_characters_is_refused_before_anything_runs(root, store, bad):
    target = root.parent / store
    res = subprocess.run([sys.executable, "-m", "hpc_health", "run", "--site", "local"],
                         capture_output=True, text=True, timeout=120,
                         env=without_spack(dict(os.environ, HPC_HEALTH_ROOT=str(root),
                                                HPC_HEALTH_STORE=str(target)), root))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "HPC_HEALTH_STORE" in res.stderr and f"holds {bad}" in res.stderr
    assert not target.exists() and not (root.parent / "PWNED").exists()


@pytest.mark.parametrize("scratch,message", [
    ("/etc", "is the system directory /etc"),
    ("/tmp/hh scratch", "holds ' '"),
])
def test_a_scratch_directory_that_is_unsafe_is_refused_with_its_key(root, scratch, message):
    path = root / "site_configs" / "local" / "site.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["partitions"]["default"]["scratch"] = scratch
    path.write_text(yaml.safe_dump(doc))
    res = _cli(root, "run", "--site", "local")
    assert res.returncode == 2
    assert f"site.yaml: partitions.default.scratch: {scratch!r} " in res.stderr
    assert message in res.stderr


# ---- a node busy with another job ----------------------------------------

@pytest.mark.slow
def test_a_busy_node_is_named_beside_the_verdicts(tmp_path):
    root = barrier_root(tmp_path)
    path = root / "site_configs" / "local" / "site.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["partitions"]["default"]["kernels"] = {"samples": 5, "barrier_iters": 20000}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    # Another "job": four spinning processes in a session of their own (a
    # loaded machine gives them a share of its 2 cores, not all of it).
    hog = subprocess.Popen([sys.executable, "-c", "import multiprocessing as m, itertools\n"
                            "def spin(_):\n    for _ in itertools.count(): pass\n"
                            "m.Pool(4).map(spin, range(4))"], start_new_session=True)
    try:
        res = _cli(root, "run", "--site", "local")
    finally:
        os.killpg(hog.pid, signal.SIGKILL)
        hog.wait()
    assert res.returncode in (0, 1), res.stdout + res.stderr
    notes = [line for line in res.stdout.splitlines() if "node busy: load" in line]
    assert notes, res.stdout
    assert "other processes used" in notes[0] and "python" in notes[0]
    (run_dir,) = (_store(root) / "runs" / "local").iterdir()
    report = json.loads((run_dir / "report.json").read_text())
    (tc,) = [t for r in report["runs"] for t in r["testcases"] if t["name"] == "BarrierLatency"]
    # Above the note's threshold whatever else runs: at a load of 12 the
    # four get about half a core between them, on a quiet machine nearly 2.
    from hpc_health.jobside import nodeload
    assert tc["node_load"]["other_cores"] > nodeload.BUSY_CORES


def test_the_node_snapshots_count_other_sessions_only():
    from hpc_health.jobside import nodeload
    before = {"time": 0.0, "load": 0.5, "cpus": 2, "ours": [0, 7],
              "procs": {"10": ["mpirun", 1.0, 7], "20": ["stress", 5.0, 20],
                        "30": ["kworker", 1.0, 0]}}
    after = {"time": 10.0, "load": 3.9, "cpus": 2, "ours": [0, 7],
             "procs": {"10": ["mpirun", 11.0, 7], "20": ["stress", 20.0, 20],
                       "30": ["kworker", 9.0, 0], "40": ["newjob", 5.0, 40]}}
    info = nodeload.busy(before, after)
    assert info["other_cores"] == pytest.approx(2.0)
    assert [b[:2] for b in info["busiest"]] == [[20, "stress"], [40, "newjob"]]
    assert nodeload.note(info).startswith("node busy: load 3.9 on 2 cores; other processes "
                                          "used 2.0 cores")
    quiet = nodeload.busy(before, {**before, "time": 10.0})
    assert nodeload.note(quiet) == ""
    # An init that woke for a moment is not named beside a hog.
    named = nodeload.note(nodeload.busy(
        {**before, "ours": [7], "procs": {"20": ["stress", 5.0, 20], "1": ["process_api", 0.1, 0]}},
        {**after, "ours": [7], "procs": {"20": ["stress", 20.0, 20], "1": ["process_api", 0.2, 0]}}))
    assert named.endswith("(pid command cores: 20 stress 1.5)"), named


def _in_a_pid_namespace():
    """The command prefix that runs a command in a PID namespace of its own
    (as root), where every session whose leader is outside reads as 0."""
    prefix = ["unshare", "--pid", "--fork", "--mount-proc"]
    try:
        ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        pytest.skip("no PID namespace here: unshare --pid needs root (CI runs as root)")
    return prefix


@pytest.mark.parametrize("namespace", [False, True], ids=["host", "session-0"])
def test_a_hog_started_beside_hpc_health_is_not_the_runs_own(tmp_path, namespace):
    """A hog started by the script (or login shell) that starts hpc-health
    shares its session: it is still another process, named beside the
    verdicts, while hpc-health, its callers and what it started are ours.
    So too when that session reads 0, as under an init that never made one
    (this project's CI) or in a container: session 0 is nobody's."""
    from hpc_health import processes
    prefix = _in_a_pid_namespace() if namespace else []
    job = tmp_path / "job.py"
    job.write_text("import json, sys, time\n"
                   "from hpc_health.jobside import nodeload\n"
                   "nodeload.NAMED = 1000\n"
                   "before = nodeload.snapshot(); time.sleep(1.5); after = nodeload.snapshot()\n"
                   "print(json.dumps([nodeload.busy(before, after), after['our_pids']]))\n")
    # hpc-health's stand-in starts the job in a session of its own, as
    # ReFrame does; the hog is its sibling, in the script's session.
    runner = (f"import os, subprocess, sys\nos.environ[{processes.PARENT_VAR!r}] = "
              f"str(os.getpid())\nsys.exit(subprocess.call([sys.executable, {str(job)!r}], "
              "start_new_session=True))")
    spin = f"{sys.executable} -c 'while True: pass'"
    script = (f"echo $$; {spin} & hog=$!; echo $hog; {sys.executable} -c \"{runner}\"; "
              "kill $hog")
    res = subprocess.run([*prefix, "sh", "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr
    shell, hog_pid, result = res.stdout.splitlines()
    info, our_pids = json.loads(result)
    # The shell that started hpc-health is ours (but as pid 1, an init).
    assert hog_pid not in our_pids and (shell == "1" or shell in our_pids)
    assert int(hog_pid) in [pid for pid, _, _ in info["busiest"]], info


def test_load_of_processes_no_snapshot_saw_is_counted():
    # The node spent 2.5 cores; our session 1 core; the processes seen in
    # both snapshots nothing: 1.5 cores came from processes that came and went.
    from hpc_health.jobside import nodeload
    before = {"time": 0.0, "load": 0.5, "cpus": 2, "ours": [0, 7], "node_cpu_s": 100.0,
              "procs": {"10": ["mpirun", 1.0, 7]}}
    after = {"time": 10.0, "load": 2.1, "cpus": 2, "ours": [0, 7], "node_cpu_s": 125.0,
             "procs": {"10": ["mpirun", 11.0, 7]}}
    info = nodeload.busy(before, after)
    assert info["other_cores"] == pytest.approx(1.5)
    assert info["busiest"][0][1] == "short-lived processes"
    assert "other processes used 1.5 cores" in nodeload.note(info)


def _snapshot(path):
    """A snapshot taken as a job takes it, by a process of its own; in a
    session of its own too, as a job's is: under the CI this test process
    sits in session 0, whose processes are told apart by pid."""
    subprocess.run([sys.executable, "-m", "hpc_health.jobside.nodeload", "snapshot", str(path)],
                   check=True, start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    return json.loads(path.read_text())


def test_a_loop_of_short_processes_makes_the_node_busy(tmp_path):
    """A job made of short processes started one after another (a loop
    running a benchmark again and again): none is alive at both snapshots,
    yet their CPU time is counted, as the loop's."""
    from hpc_health.jobside import nodeload
    burn = f"{sys.executable} -c 'import time; t = time.time()\nwhile time.time() - t < 0.1: pass'"
    loop = subprocess.Popen(["sh", "-c", f"while :; do {burn}; done"], start_new_session=True)
    try:
        time.sleep(0.3)
        before = _snapshot(tmp_path / "before.json")
        time.sleep(2.0)
        after = _snapshot(tmp_path / "after.json")
    finally:
        os.killpg(loop.pid, signal.SIGKILL)
        loop.wait()
    info = nodeload.busy(before, after)
    # The shell itself does next to nothing: what it shows is its reaped
    # children's time.  Whatever else loads the machine, the loop had its
    # share of the cores (2 of 13 at a load of 12), and all of it counts.
    elapsed = after["time"] - before["time"]
    loop_cores = (after["procs"][str(loop.pid)][1] - before["procs"][str(loop.pid)][1]) / elapsed
    assert loop_cores > 0.1, info
    # Less what the child running at the first snapshot had used before it
    # (its time reaches the shell whole when reaped): that is not this check's.
    earlier = sum(p[1] for pid, p in before["procs"].items()
                  if pid not in after["procs"] and str(p[3]) == str(loop.pid)) / elapsed
    assert info["other_cores"] >= loop_cores - earlier - 0.01, info


# ---- malformed configuration: file, line and key named; nothing runs -----

def _site_yaml(root):
    return root / "site_configs" / "local" / "site.yaml"


def _edit_site(root, change):
    path = _site_yaml(root)
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def _refused(root, *args):
    res = _cli(root, *(args or ("run", "--site", "local")))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert not (_store(root) / "runs").exists() or not any((_store(root) / "runs").rglob("*"))
    return res.stderr


def test_malformed_site_yaml(root):
    _site_yaml(root).write_text(_site_yaml(root).read_text() + "partitions: [unclosed\n")
    err = _refused(root)
    assert "site_configs/local/site.yaml:" in err


def test_malformed_reference_file(root):
    (root / "reference" / "local.yaml").write_text("HaloExchange:\n  local:default: {gnu-mpi:\n")
    err = _refused(root)
    assert "reference/local.yaml:" in err


def test_malformed_spack_environment(root):
    (root / "site_configs" / "local" / "spack.yaml").write_text("spack: [\n")
    err = _refused(root)
    assert "site_configs/local/spack.yaml:" in err


def test_a_spack_environment_without_its_spack_key(root):
    (root / "site_configs" / "local" / "spack.yaml").write_text("specs: []\n")
    assert "needs a top-level 'spack:' key" in _refused(root)


@pytest.mark.parametrize("change,where,message", [
    (lambda d: d["partitions"]["default"].update(nodez=2), "partitions.default",
     "'nodez' was unexpected"),
    (lambda d: d["partitions"]["default"].update(nodes="two"), "partitions.default.nodes",
     "'two'"),
    (lambda d: d.update(reframe_config=None), "reframe_config", "None"),
    (lambda d: d["partitions"]["default"].update(osu={"samples": 0}),
     "partitions.default.osu.samples", "0"),
    (lambda d: d.update(site="elsewhere"), "site", "but the folder is 'local'"),
    (lambda d: d.update(budget_weights={"StreamBandwidth": 0}),
     "budget_weights.StreamBandwidth", "0"),
    # A check's name the suite does not know would weight or loosen nothing.
    (lambda d: d.update(budget_weights={"StreamBandwith": 3}),
     "budget_weights.StreamBandwith", "names no check in "),
    (lambda d: d.update(tolerance={"Halo/time_8B": 0.5}),
     "tolerance.Halo/time_8B", "(known: BarrierLatency, "),
    # What a benchmark's schema cannot say, its own check says
    # (hpc_health/parsers/registry.py), at the same place.
    (lambda d: d["partitions"]["default"].update(osu={"sizes": {"latency": [8, 24]}}),
     "partitions.default.osu.sizes.latency.1", "24 is not a power of two"),
    (lambda d: d["partitions"]["default"].update(stream={"spec": "stream ntimes=5"}),
     "partitions.default.stream.spec", "sets ntimes; the check derives it"),
])
def test_a_wrong_setting_is_named_by_file_line_and_key(root, change, where, message):
    _edit_site(root, change)
    err = _refused(root)
    assert "site_configs/local/site.yaml:" in err and f": {where}:" in err, err
    assert message in err


def test_an_unknown_partition_lists_the_known_ones(root):
    err = _refused(root, "run", "--site", "local", "--partition", "gpu")
    assert "no partition 'gpu' (known: default)" in err


def test_an_unknown_site_lists_the_known_ones(root):
    err = _refused(root, "run", "--site", "nosuchsite")
    assert "no such site 'nosuchsite' (known sites: local)" in err


def test_a_reference_for_a_check_that_does_not_exist(root):
    (root / "reference" / "local.yaml").write_text(yaml.safe_dump(
        {"HaloXchange": {"local:default": {"time_8B": [1.0, -0.1, 0.1, "us"]}}}))
    err = _refused(root)
    assert "reference/local.yaml:1: HaloXchange: references for HaloXchange, which no " \
           "check" in err and "HaloExchange" in err


def test_a_reference_of_zero_can_never_fail_and_is_refused(root):
    (root / "reference" / "local.yaml").write_text(yaml.safe_dump(
        {"HaloExchange": {"local:default": {"time_8B": [0, -0.1, 0.1, "us"]}}}))
    assert "a reference value of 0 can never fail" in _refused(root)


@pytest.mark.parametrize("entry,message", [
    ([-3.0, -0.1, 0.1, "us"], "value -3.0 is negative"),
    ([3.0, -1.5, 0.1, "us"], "lower bound -1.5 is -150% of the value: past -100 % the bound "
                             "is a negative figure"),
    ([3.0, -0.1, 50.0, "us"], "upper bound 50.0 is +5000% of the value: a figure 5000% worse "
                              "would still pass: this reference gates nothing"),
])
def test_a_reference_that_would_crash_or_blind_the_run_is_refused(root, entry, message):
    """validate says so, and run refuses it before anything runs (a negative
    value ended run and report in a traceback; a 5000 % bound passed a
    figure twenty times worse)."""
    (root / "reference" / "local.yaml").write_text(yaml.safe_dump(
        {"HaloExchange": {"local:default": {"time_8B": entry}}}))
    for command in ("validate", "run"):
        err = _refused(root, command, "--site", "local")
        assert "reference/local.yaml:" in err and message in err, err


@pytest.mark.parametrize("entry,message", [
    ([75000.0, -1.0, 0.1, "MB/s"], "lower bound -1.0 is -100% of the value: Triad is "
                                   "higher-is-better, so this is its worse side, and a figure of "
                                   "0 would still pass: this reference can never fail"),
    ([75.0, -0.1, 0.1, "ms"], "unit 'ms' is not a unit of Triad's quantity (its check declares "
                              "MB/s): write the reference in MB/s"),
    ([75000.0, -0.1, 50.0, "MB/s"], "upper bound 50.0 is +5000% of the value: the better side "
                                    "of Triad, a higher-is-better figure (only IMPROVED is "
                                    "judged against it), wider than any reference may be"),
    (["1e308", -0.1, 0.1, "MB/s"], "value 1e+308 is beyond any plausible figure"),
    ([1.0e308, -0.1, 0.1, "MB/s"], "value 1e+308 is beyond any plausible figure"),
])
def test_a_reference_against_its_figures_declaration_is_refused(root, entry, message):
    """Checked against what the check declares (STREAM's Triad: MB/s,
    higher is better) by validate and by run: a unit of another quantity,
    a worse side that lets a figure of 0 pass; a wide better side is not
    called the worse one; 1e308 is no plausible figure, not 'not a number'."""
    (root / "reference" / "local.yaml").write_text(yaml.safe_dump(
        {"StreamBandwidth": {"local:default": {"Triad": entry}}}))
    for command in ("validate", "run"):
        err = _refused(root, command, "--site", "local")
        assert "reference/local.yaml:3: StreamBandwidth.local:default.Triad: " in err, err
        assert message in err and "not a number" not in err and "worse would" not in err, err


def test_a_reference_in_another_unit_of_the_same_quantity_is_converted(root):
    """GB/s against a figure in MB/s: accepted and compared in MB/s (it was
    compared as the raw number: IMPROVED +48 965 %)."""
    from hpc_health.judge import verdicts
    from hpc_health.model.results import Measurement
    from hpc_health.store import references
    path = root / "reference" / "local.yaml"
    path.write_text(yaml.safe_dump({"StreamBandwidth": {"local:default": {
        "Triad": [75.0, -0.1, 0.1, "GB/s"]}}}))
    res = _cli(root, "validate", "--site", "local")
    assert res.returncode == 0, res.stderr
    refs = references.load(path)
    assert refs.lookup("StreamBandwidth", "local:default", "gnu", {}, "Triad", "MB/s").value \
        == 75000.0
    m = Measurement(test="StreamBandwidth", check="StreamBandwidth", system="local",
                    partition="default", environ="gnu", variable="Triad", value=75100.0,
                    unit="MB/s", better="higher", samples=[75100.0, 74900.0, 75050.0],
                    result="pass")
    (v,) = verdicts.judge_all([m], refs)
    assert v.verdict == "PASS" and abs(v.deviation) < 0.01, (v.verdict, v.deviation, v.reason)


@pytest.mark.parametrize("args,message", [
    (("--tag", "before\n"), "'before\\n' is not a run tag"),
    (("--note", "x" * 2000), "a note is one line of up to 1000 characters (this one has 2000)"),
    (("--note", "two\nlines"), "a note is one line of text"),
])
def test_a_tag_or_note_that_could_not_be_found_or_carried_is_refused(root, args, message):
    """A tag with a trailing newline was taken and the run could never be
    found by it; a note too long for ReFrame's command line ended in "free
    space" and a damaged run."""
    err = _refused(root, "run", "--site", "local", *args)
    assert message in err, err


def test_a_name_too_long_says_so_and_names_the_variable(root, tmp_path):
    store = tmp_path / ("x" * 300)
    res = subprocess.run([sys.executable, "-m", "hpc_health", "run", "--site", "local"],
                         capture_output=True, text=True, timeout=120,
                         env=without_spack(dict(os.environ, HPC_HEALTH_ROOT=str(root),
                                                HPC_HEALTH_STORE=str(store)), root))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "File name too long" in res.stderr and "a name in this path is too long" in \
        res.stderr and "HPC_HEALTH_STORE" in res.stderr, res.stderr
    assert "free space" not in res.stderr and "Traceback" not in res.stderr


def test_a_failed_write_is_answered_by_what_failed_and_where(tmp_path, monkeypatch):
    import errno

    from hpc_health.paths import os_hint
    monkeypatch.setenv("HPC_HEALTH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HPC_HEALTH_STORE", str(tmp_path / "store"))
    ro = OSError(errno.EROFS, "Read-only file system", str(tmp_path / "cache" / "spack"))
    assert os_hint(ro) == "choose a directory you may write (HPC_HEALTH_CACHE)"
    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "store" / "runs"))
    assert os_hint(full) == "free space (or quota), or point HPC_HEALTH_STORE elsewhere"
    assert "shorter --note" in os_hint(OSError(errno.E2BIG, "Argument list too long"))


# ---- a benchmark that fails, dies or hangs: its FAIL, the rest judged ----

@pytest.mark.slow
def test_a_benchmark_that_exits_non_zero_fails_with_its_own_words(tmp_path):
    # (A missing reference file is a baseline, not an error:
    # tests/test_run_local.py, test_run_without_references_reports_no_reference.)
    root = barrier_root(tmp_path)
    # Two failing launches, not forty: mpirun takes seconds over each.
    _edit_site(root, lambda d: d["partitions"]["default"].update(kernels={"samples": 2}))
    res = _cli(root, "run", "--site", "local", "--", "-S", "BarrierLatency.iters=0")
    assert res.returncode == 1, res.stdout + res.stderr
    fail = [line for line in res.stdout.splitlines() if line.startswith("FAIL: BarrierLatency")]
    assert fail and "sanity:" in fail[0]
    run = json.loads(next((_store(root) / "runs" / "local").glob("*/run.json")).read_text())
    assert run["exit_code"] == 1


@pytest.mark.slow
def test_a_benchmark_killed_by_a_signal_is_a_fail_naming_the_launch(tmp_path):
    root = barrier_root(tmp_path)
    # One launch that runs for many seconds unless killed: the killer cannot
    # miss it (short launches could all end between two looks, and the test
    # flipped).  10 million barriers per communicator is the kernel's
    # largest count (more is refused with exit 2, a failure of another kind).
    _edit_site(root, lambda d: d["partitions"]["default"].update(
        kernels={"samples": 1, "barrier_iters": 10_000_000}))
    proc = _start(root)
    killed = False
    try:
        _wait_for_the_benchmark(root)
        # Mid-run, as the row says: both ranks a second of CPU into the
        # barriers (MPI_Init took 0.3 s here).  Killed while they connect to
        # mpirun, Open MPI 4.1's mpirun outlived them in 4 of 300 tries and
        # the check failed only at its time limit, 10 minutes later.
        rank = f"^{root.parent}.*/build/barrier --iters"
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            if _cpu_seconds(rank) >= 1.0:
                killed = subprocess.run(["pkill", "-KILL", "-f", rank]).returncode == 0
            time.sleep(0.05)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed, "no rank of the barrier benchmark was found to kill"
    assert proc.returncode == 1, out + err
    fail = [line for line in out.splitlines() if line.startswith("FAIL: BarrierLatency:")]
    assert fail and "sanity:" in fail[0], out


@pytest.mark.slow
def test_a_benchmark_that_hangs_past_its_time_limit(tmp_path):
    root = barrier_root(tmp_path)
    res = _cli(root, "run", "--site", "local", "--", "-S", "BarrierLatency.time_limit=5s",
               "-S", "BarrierLatency.iters=100000000")
    assert res.returncode == 1, res.stdout + res.stderr
    fail = [line for line in res.stdout.splitlines() if line.startswith("FAIL: BarrierLatency")]
    assert fail and "job timed out" in fail[0] and "-S BarrierLatency.time_limit=" in fail[0]


# ---- outputs a parser must refuse ---------------------------------------

@pytest.mark.parametrize("kind,fixture,cut", [("osu", "osu/osu_latency_np2.txt", 0.6),
                                              ("stream", "stream/stream_c_omp2.txt", 0.5),
                                              ("ior", "ior/ior_posix_shared_np2.json", 0.5)])
def test_a_truncated_output_is_refused_with_the_file_named(tmp_path, kind, fixture, cut):
    text = (REPO / "tests" / "data" / fixture).read_text()
    path = tmp_path / "cut.txt"
    path.write_text(text[:int(len(text) * cut)])
    res = hpc_health(make_root(tmp_path), "parse", kind, str(path))
    assert res.returncode == 2 and f"{path}: not a complete {kind} output" in res.stderr


def test_a_foreign_output_is_refused(tmp_path):
    res = hpc_health(make_root(tmp_path), "parse", "stream",
                     str(REPO / "tests" / "data" / "osu" / "osu_bw_np2.txt"))
    assert res.returncode == 2 and "not a complete stream output" in res.stderr


# ---- the store: two runs at once, a full or read-only file system --------

@pytest.mark.slow
def test_two_runs_at_once_on_one_store_keep_their_own_directories(tmp_path):
    root = barrier_root(tmp_path)
    _edit_site(root, lambda d: d["partitions"]["default"].update(kernels={"samples": 2}))
    procs = [_start(root) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    runs = sorted((_store(root) / "runs" / "local").iterdir())
    assert len(runs) == 2
    for run in runs:
        meta = json.loads((run / "run.json").read_text())
        assert meta["exit_code"] == 0 and (run / "report.json").exists()


def _mount_tmpfs(path, options):
    path.mkdir(parents=True, exist_ok=True)
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "hpc-health-test", str(path)],
                         capture_output=True, text=True)
    if res.returncode:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {res.stderr.strip()}")


@pytest.mark.slow
def test_a_full_file_system_is_one_clear_error_and_earlier_runs_survive(tmp_path):
    root = barrier_root(tmp_path)
    store = _store(root)
    _mount_tmpfs(store, "size=256k")
    try:
        _stored(store, n=1)
        res = _cli(root, "run", "--site", "local")
        assert res.returncode == 2, res.stdout + res.stderr
        assert f"MiB free in {store}; a run needs 64 MiB" in res.stderr
        assert "Traceback" not in res.stderr
        rep = _cli(root, "report", "--site", "local", "20261101T000000Z")
        assert rep.returncode == 0 and "run 20261101T000000Z" in rep.stdout
    finally:
        subprocess.run(["umount", "-l", str(store)])


@pytest.mark.slow
def test_a_store_that_fills_during_the_run_still_closes_the_run(tmp_path):
    """The disk fills while the benchmark runs (another job's output): the
    run is closed with its exit code and says so; later reads name it, they
    do not call it killed.  (4 MiB kept free in the run directory until it
    is closed hold its verdicts and run.json.)"""
    root = barrier_root(tmp_path)
    _edit_site(root, lambda d: d["partitions"]["default"].update(
        kernels={"samples": 3, "barrier_iters": 200000}))
    store = _store(root)
    _mount_tmpfs(store, "size=72m")
    try:
        proc = _start(root)
        try:
            _wait_for_the_benchmark(root)
            subprocess.run(["dd", "if=/dev/zero", f"of={store}/filler", "bs=1M"],
                           capture_output=True)
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode in (1, 2), out + err
        assert "Traceback" not in err, err
        assert "No space left on device" in err and "free space" in err, err
        assert "the store's file system filled during the run" in err or proc.returncode == 1
        (run_dir,) = (store / "runs" / "local").iterdir()
        meta = json.loads((run_dir / "run.json").read_text())
        assert meta.get("exit_code") == proc.returncode and meta["finished"], err
        assert not (run_dir / ".reserve").exists()
        (store / "filler").unlink()
        rep = _cli(root, "report", "--site", "local")
        assert "never finished" not in rep.stderr and "Traceback" not in rep.stderr
        if proc.returncode == 2:    # no report: later reads say what became of the night
            listed = _cli(root, "runs", "--site", "local")
            assert f"the last, {run_dir.name}: ReFrame exited with" in listed.stderr
            assert "filled during the run" in listed.stderr, listed.stderr
    finally:
        subprocess.run(["umount", "-l", str(store)])


@pytest.mark.slow
def test_a_read_only_store_is_one_clear_error(tmp_path):
    root = barrier_root(tmp_path)
    store = _store(root)
    _mount_tmpfs(store, "size=100m")
    try:
        _stored(store, n=1)
        subprocess.run(["mount", "-o", "remount,ro", str(store)], check=True)
        res = _cli(root, "run", "--site", "local")
        assert res.returncode == 2, res.stdout + res.stderr
        assert "Read-only file system" in res.stderr and "Traceback" not in res.stderr
        assert "choose a directory you may write (HPC_HEALTH_STORE)" in res.stderr
        rep = _cli(root, "report", "--site", "local")
        assert rep.returncode == 0 and "run 20261101T000000Z" in rep.stdout
    finally:
        subprocess.run(["umount", "-l", str(store)])


def test_a_scratch_symlink_into_a_system_directory_is_refused(root, tmp_path):
    link = tmp_path / "scratch-link"
    link.symlink_to("/etc")
    _edit_site(root, lambda d: d["partitions"]["default"].update(scratch=str(link)))
    assert "is the system directory /etc" in _refused(root)


# ---- Spack absent -------------------------------------------------------

@pytest.mark.slow
def test_without_spack_its_checks_are_skipped_and_the_run_says_how_to_fix_it(tmp_path):
    root = make_root(tmp_path, references=False)
    res = hpc_health(root, "run", "--site", "local", "--", "-n", "StreamBandwidth")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Spack:      not found" in res.stdout and "To fix:" in res.stdout
    assert "SKIPPED: StreamBandwidth: StreamBuild skipped: Spack not found" in res.stdout \
        or "SKIPPED (2): Spack not found" in res.stdout


def test_a_child_reaped_during_the_check_counts_only_its_time_since_the_first_snapshot():
    """A shell (pid 20) reaps a benchmark (pid 21) that ran 50 s before the
    first snapshot and 5 s after it: the shell's own counter jumps by 55 s
    at the reaping; 5 s of it fall in the 10 s between the snapshots."""
    from hpc_health.jobside import nodeload
    before = {"time": 0.0, "load": 1.0, "cpus": 2, "ours": [0, 7],
              "procs": {"10": ["mpirun", 1.0, 7, 1], "20": ["bash", 2.0, 20, 1],
                        "21": ["stream_c.exe", 50.0, 20, 20]}}
    after = {"time": 10.0, "load": 1.0, "cpus": 2, "ours": [0, 7],
             "procs": {"10": ["mpirun", 11.0, 7, 1], "20": ["bash", 57.0, 20, 1]}}
    info = nodeload.busy(before, after)
    assert info["other_cores"] == pytest.approx(0.5)
    assert info["busiest"][0][:2] == [20, "bash"]
