"""What later commands say of a night that was lost (a run killed with -9,
a store that filled) and of a store that can never hold a run: the
truth, in one line, not a misleading figure."""

import json
import signal
import socket
import subprocess
import sys

import pytest
from sandbox import barrier_root, environ, hpc_health, make_root, store


def _unfinished(root, run_id, **meta):
    """A run directory as a run killed with -9 leaves it: run.json without
    an exit code, its pid gone."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    d = store(root) / "runs" / "local" / run_id
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"site": "local", "run_id": run_id,
                                            "started": "2026-11-01T02:00:00Z", "pid": gone.pid,
                                            "hostname": socket.gethostname(), **meta}))
    return d


def test_a_store_on_a_kernel_file_system_is_named_as_such(tmp_path):
    root = make_root(tmp_path, references=False)
    env = dict(environ(root), HPC_HEALTH_STORE="/proc/hpc-health-store")
    res = subprocess.run([sys.executable, "-m", "hpc_health", "run", "--site", "local"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "/proc is on a proc file system (/proc) of size 0, a kernel's view and not a disk" \
        in res.stderr and "MiB free" not in res.stderr
    assert "Traceback" not in res.stderr


def test_runs_names_what_became_of_a_night_without_a_report(tmp_path):
    root = make_root(tmp_path, references=False)
    why = ("ReFrame exited with 1: …/report.json: cannot read: No such file or directory; the "
           "store's file system filled during the run (0 MiB free in …): free space or point "
           "HPC_HEALTH_STORE elsewhere")
    d = _unfinished(root, "20261101T020000Z", exit_code=2, finished="2026-11-01T02:05:00Z",
                    why=why)
    for args in (("runs", "--site", "local"), ("report", "--site", "local")):
        res = hpc_health(root, *args)
        assert res.returncode == 2, res.stdout + res.stderr
        assert ("no run of site 'local' with a readable report: 1 stored run(s) ended without "
                f"one; the last, {d.name}: ReFrame exited with 1") in res.stderr
        assert "filled during the run" in res.stderr and "sites with runs" not in res.stderr


@pytest.mark.slow
def test_the_next_run_names_a_run_killed_the_night_before(tmp_path):
    root = barrier_root(tmp_path)
    killed = _unfinished(root, "20261101T020000Z")
    proc = subprocess.Popen([sys.executable, "-m", "hpc_health", "run", "--site", "local"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=environ(root))
    header = []
    try:
        for line in proc.stdout:
            header.append(line)
            if not line.strip():        # the header ends with an empty line
                break
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, "".join(header) + err
    said = [line for line in header if line.startswith("  previous:")]
    assert said and said[0].startswith(
        "  previous:   run 20261101T020000Z (started 2026-11-01T02:00:00Z) never finished: "
        "its process was killed (kill -9, the OOM killer) or the machine stopped"), header
    assert str(killed) in said[0]
