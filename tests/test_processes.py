"""Nothing of a run outlives it: ReFrame dies with hpc-health, even by
SIGKILL; orphaned benchmarks are adopted and stopped, also one that ignores
SIGTERM; a child of a background job can be interrupted.  Real processes,
each scenario in a Python process of its own (a subreaper is for life)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from hpc_health import processes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")


def _python(code, **kw):
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], text=True,
                            stdout=subprocess.PIPE, **kw)


def _gone(pid, within=5.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not processes.alive(pid):
            return True
        try:
            with open(f"/proc/{pid}/stat") as fp:
                if fp.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_an_orphan_that_ignores_sigterm_is_adopted_and_stopped():
    proc = _python("""
        import subprocess, time
        from hpc_health import processes
        assert processes.become_subreaper()
        # Its parent exits at once: the sleep (SIGTERM ignored) is orphaned.
        out = subprocess.run(["bash", "-c", "(trap '' TERM; exec sleep 60) >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True).stdout
        orphan = int(out)
        time.sleep(0.2)
        assert orphan in processes.descendants(processes.os.getpid())
        t0 = time.monotonic()
        left = processes.stop_descendants(grace=1.0)
        print(orphan, [name for _, name in left], round(time.monotonic() - t0, 1))
    """)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    orphan, names, seconds = out.split(" ", 1)[0], out.split(" ", 1)[1], float(out.split()[-1])
    assert "sleep" in names
    assert _gone(int(orphan))
    assert seconds < 5      # SIGTERM ignored: SIGKILL after the grace


def test_a_child_dies_with_its_parent_even_by_sigkill():
    parent = _python("""
        import functools, os, subprocess, time
        from hpc_health import processes
        child = subprocess.Popen(["sleep", "60"], start_new_session=True,
                                 preexec_fn=functools.partial(processes.child_setup, os.getpid()))
        print(child.pid, flush=True)
        time.sleep(60)
    """)
    child = int(parent.stdout.readline())
    assert processes.alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    assert _gone(child)


def test_a_reframe_deaf_to_sigterm_ends_itself_and_its_jobs_when_we_die():
    """ReFrame's SIGTERM handler can be swallowed (see processes.orphan_guard):
    here the child ignores SIGTERM outright, and its job (a sleep in a
    session of its own, as ReFrame's local scheduler starts jobs) would run
    on.  The guard ends both after its grace."""
    parent = _python("""
        import functools, os, subprocess, sys, time
        from hpc_health import processes
        child = subprocess.Popen(
            [sys.executable, "-c",
             "import signal, subprocess, time\\n"
             "from hpc_health import processes\\n"
             "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
             "assert processes.orphan_guard(grace=0.5, every=0.1)\\n"
             "job = subprocess.Popen(['sleep', '300'], start_new_session=True)\\n"
             "print(job.pid, flush=True)\\n"
             "time.sleep(300)\\n"],
            env=dict(os.environ, HPC_HEALTH_PARENT_PID=str(os.getpid())),
            stdout=subprocess.PIPE, text=True, start_new_session=True,
            preexec_fn=functools.partial(processes.child_setup, os.getpid()))
        print(child.pid, child.stdout.readline().strip(), flush=True)
        time.sleep(300)
    """)
    reframe, job = map(int, parent.stdout.readline().split())
    assert processes.alive(reframe) and processes.alive(job)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    assert _gone(reframe) and _gone(job)


def test_the_guard_starts_only_in_the_child_of_the_hpc_health_named():
    os.environ.pop(processes.PARENT_VAR, None)
    assert processes.orphan_guard() is False
    os.environ[processes.PARENT_VAR] = str(os.getpid())     # we are not our own child
    try:
        assert processes.orphan_guard() is False
    finally:
        del os.environ[processes.PARENT_VAR]


def test_a_background_jobs_child_can_be_interrupted():
    """Started with SIGINT ignored (as `cmd &` in a script starts it), the
    child gets SIGINT back: Python would otherwise never raise
    KeyboardInterrupt in it."""
    parent = _python("""
        import functools, os, subprocess
        from hpc_health import processes
        child = subprocess.Popen(["sleep", "60"],
                                 preexec_fn=functools.partial(processes.child_setup, os.getpid()))
        print(child.pid, flush=True)
        child.wait()
    """, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    child = int(parent.stdout.readline())
    with open(f"/proc/{parent.pid}/status") as fp:
        ignored = int(next(ln for ln in fp if ln.startswith("SigIgn:")).split()[1], 16)
    assert ignored & (1 << (signal.SIGINT - 1))
    os.kill(child, signal.SIGINT)
    assert parent.wait(timeout=10) == 0
    assert _gone(child)
