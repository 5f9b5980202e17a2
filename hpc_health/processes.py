"""Processes we started, and whether one still lives.  Used by the runner
(ReFrame and its jobs), the store (is a run still in progress?) and the
fault bench (its workloads)."""

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import threading
import time


def alive(pid):
    """Does process *pid* exist (on this host), and not as a zombie?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True     # someone else's, but alive
    return not _zombie(pid)


def stop_group(proc, steps=((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0))):
    """Stop a child started in a session of its own, and everything it
    started: each (signal, grace) in turn to its process group, until it
    has exited."""
    if proc.poll() is not None:
        return
    for sig, grace in steps:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option, value):
    """Linux prctl(2); False where it is not available."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper():
    """Orphans of our descendants become our children instead of init's:
    a benchmark whose parent (ReFrame, mpirun) died can still be found and
    stopped.  Linux only; False elsewhere."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def child_setup(parent_pid):
    """``preexec_fn`` of a child that must not outlive us and must be
    stoppable with SIGINT.

    SIGTERM reaches it when we die, even by SIGKILL (it would otherwise go on
    launching jobs, reparented to init).  SIGINT is reset to its default: a
    background job of a script starts with SIGINT ignored, which Python then
    keeps, so a Python child could never be interrupted gently.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:     # we died before the prctl took hold
        os.kill(os.getpid(), signal.SIGTERM)


#: Set by the runner for ReFrame: the pid of the hpc-health that started it.
PARENT_VAR = "HPC_HEALTH_PARENT_PID"


def orphan_guard(grace=5.0, every=0.5):
    """In ReFrame's process when hpc-health started it: should hpc-health
    die (kill -9), end ReFrame's jobs and ReFrame itself *grace* s later.

    ReFrame gets SIGTERM then (:func:`child_setup`), sets SIGTERM to ignored
    and raises ForceExitError from wherever it is, to cancel its jobs.  Where
    that is inside code that catches every exception (a logging handler
    does, and ReFrame logs every poll), ReFrame runs on, deaf to SIGTERM, launching
    benchmarks nobody reads (2 of about 30 kill -9 tests here).  A thread
    that sees the parent gone is the net under that.  Started only in the
    direct child of the hpc-health named in ``$HPC_HEALTH_PARENT_PID``;
    True when it was."""
    parent = os.environ.get(PARENT_VAR, "")
    if not parent.isdigit() or os.getppid() != int(parent):
        return False

    def watch():
        while os.getppid() == int(parent):
            time.sleep(every)
        time.sleep(grace)
        me = os.getpid()
        for pid in pids():
            try:
                _, fields = proc_stat(pid)
                if int(fields[1]) == me and int(fields[2]) != os.getpgrp():
                    os.killpg(int(fields[2]), signal.SIGKILL)   # a job's own group
            except (OSError, ValueError, IndexError):
                continue
        os._exit(128 + signal.SIGTERM)

    threading.Thread(target=watch, name="hpc-health-orphan-guard", daemon=True).start()
    return True


def pids():
    """Pids of the processes of this host (from /proc; [] elsewhere)."""
    try:
        return [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []


def proc_stat(pid):
    """(command, fields after it) of ``/proc/PID/stat``: fields[0] is the
    state, [1] the parent pid, [3] the session, [11:15] utime, stime, cutime,
    cstime in clock ticks.  OSError when the process is gone."""
    with open(f"/proc/{pid}/stat") as fp:
        text = fp.read()
    # The command may hold spaces and parentheses: split after the last ')'.
    return text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()


def descendants(pid):
    """Pids of every living descendant of *pid*."""
    children = {}
    for p in pids():
        try:
            fields = proc_stat(p)[1]
        except (OSError, ValueError):
            continue
        if fields and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(p)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def command_name(pid):
    try:
        with open(f"/proc/{pid}/comm") as fp:
            return fp.read().strip()
    except OSError:
        return "?"


def stop_descendants(grace=2.0):
    """SIGTERM, then after *grace* SIGKILL, to every descendant of this
    process still alive; [(pid, name)] of those found."""
    left = [(p, command_name(p)) for p in descendants(os.getpid())]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive_now = [p for p, _ in left if alive(p)]
        if not alive_now:
            break
        for p in alive_now:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(alive(p) for p in alive_now):
            _reap()
            time.sleep(0.05)
    _reap()
    return left


def _zombie(pid):
    """A process that ended and waits for its parent (or init) to read it."""
    try:
        return proc_stat(pid)[1][0] == "Z"
    except (OSError, ValueError, IndexError):
        return False


def _reap():
    """Collect exited children (orphans we adopted as subreaper included)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


@contextlib.contextmanager
def held(path, wait, waiting, gave_up):
    """This process's exclusive hold on the lock file *path*, with who holds
    it written inside.  Held by another: ``waiting(holder)`` is called once,
    then up to *wait* seconds pass before ``gave_up(holder)`` is raised."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if not _try_flock(fd):
            holder = _holder(fd)
            waiting(holder)
            deadline = time.monotonic() + wait
            while not _try_flock(fd):
                if time.monotonic() >= deadline:
                    raise gave_up(holder)
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)        # releases the lock


def _try_flock(fd):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _holder(fd):
    try:
        return os.pread(fd, 200, 0).decode(errors="replace").strip() or "pid unknown"
    except OSError:
        return "pid unknown"
