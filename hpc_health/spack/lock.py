"""Spack commands with a time limit, and the lock one waits on named.

Spack's environment lock, ``ENV/.spack-env/transaction_lock`` (a POSIX
``fcntl`` lock, ``spack.llnl.util.lock``, in Spack 1.2.0.dev0), is taken
with no timeout: ``spack -e ENV concretize -f`` spins for ever while
another ``spack`` holds it (another run on the same environment, one
stopped with Ctrl-Z, one hung).  Its database and stage locks give up
after 60 s and name themselves; this one says nothing.  So every Spack
command runs here in a process group of its own, with a time limit, while
the kernel is asked (``F_GETLK``) who holds the lock it would wait for:
the holder is named as soon as it holds it, and the command is ended when
the holder kept it past the wait, or when the command's limit passed.

Standard library only (it runs inside build jobs).
"""

import fcntl
import os
import struct
import subprocess
import tempfile
import time

from hpc_health import processes

#: The environment lock of Spack 1.x, below the environment's directory
#: (``Environment._transaction_lock_path``).
ENV_LOCK = os.path.join(".spack-env", "transaction_lock")
#: ``struct flock`` on Linux (x86_64, aarch64): l_type, l_whence, l_start,
#: l_len, l_pid, padded to 32 bytes.
_FLOCK = "hhqqi4x"


class Busy(RuntimeError):
    """Another process held the lock the command waits for past the wait."""

    def __init__(self, message, output=""):
        super().__init__(message)
        self.output = output


class TimedOut(RuntimeError):
    """The command ran past its time limit (and was stopped)."""

    def __init__(self, message, output=""):
        super().__init__(message)
        self.output = output


def holder(path):
    """The pid of a process holding a POSIX lock on *path* that a writer
    would wait for; 0 when the kernel cannot name it (an open-file-description
    lock); None when nobody holds one (or there is no such file)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        # Asking takes no lock, so closing the file releases none of ours.
        got = fcntl.fcntl(fd, fcntl.F_GETLK,
                          struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
    except OSError:
        return None
    finally:
        os.close(fd)
    kind, _, _, _, pid = struct.unpack(_FLOCK, got)
    return None if kind == fcntl.F_UNLCK else max(pid, 0)


def describe(pid):
    """``pid N (its command line)``, or why it cannot be named."""
    if not pid:
        return "a process the kernel does not name (an open-file-description lock)"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fp:
            words = fp.read().decode(errors="replace").split("\0")
    except OSError:
        return f"pid {pid} (not a process of this host: another node sharing the file system?)"
    words = [w for w in words if w]
    # "python3 .../bin/spack -e ENV concretize -f": from the spack on.
    start = next((i for i, w in enumerate(words) if os.path.basename(w) == "spack"), None)
    if start is not None:
        words = ["spack"] + words[start + 1:]
    # One line: a `python -c` program holds newlines.
    shown = "".join(c if c.isprintable() else " " for c in " ".join(words)) or \
        processes.command_name(pid)
    state = _state(pid)
    return f"pid {pid} ({shown[:160]}{'...' if len(shown) > 160 else ''}){state}"


def _state(pid):
    try:
        code = processes.proc_stat(pid)[1][0]
    except (OSError, ValueError, IndexError):
        return ""
    return ", stopped (Ctrl-Z or a debugger)" if code in "Tt" else ""


def foreign_holder(path, ours):
    """The holder of *path*'s lock unless it is process *ours* or one of
    its descendants (the command itself holding it)."""
    pid = holder(path)
    if pid is None or pid == ours or (pid and pid in processes.descendants(ours)):
        return None
    return pid


def run(cmd, limit, lock=None, wait=0.0, env=None, say=print, poll=0.5):
    """Run *cmd* (output and errors together) for at most *limit* seconds;
    (exit code, output).  While another process holds *lock*: *say* names
    it once, and after *wait* seconds of it the command is stopped with
    :class:`Busy`; past *limit*, :class:`TimedOut` (Busy when the lock was
    held then).  The command's whole process group is stopped either way."""
    what = " ".join(os.path.basename(w) if i == 0 else w for i, w in enumerate(cmd))
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=env,
                                start_new_session=True)
        t0 = time.monotonic()
        held_since, told = None, None
        try:
            while True:
                try:
                    proc.wait(timeout=poll)
                    break
                except subprocess.TimeoutExpired:
                    pass
                now = time.monotonic()
                pid = foreign_holder(lock, proc.pid) if lock else None
                if pid is None:
                    if told is not None and held_since is not None:
                        say(f"Spack's environment lock {lock} is free again: going on")
                    held_since = None
                else:
                    held_since = held_since or now
                    if told != pid:
                        told = pid
                        say(f"waiting up to {wait:.0f} s for Spack's environment lock {lock}: "
                            f"held by {describe(pid)}")
                    if now - held_since >= wait:
                        raise Busy(f"Spack's environment lock {lock} was held by "
                                   f"{describe(pid)} for {wait:.0f} s: {what} stopped",
                                   _read(out))
                if now - t0 >= limit:
                    if pid is not None:
                        raise Busy(f"{what} stopped at its time limit of {limit:.0f} s, "
                                   f"waiting for Spack's environment lock {lock}, held by "
                                   f"{describe(pid)}", _read(out))
                    raise TimedOut(f"{what} did not finish within its time limit of "
                                   f"{limit:.0f} s: stopped", _read(out))
        finally:
            processes.stop_group(proc)
        return proc.returncode, _read(out)


def _read(out):
    out.flush()
    out.seek(0)
    return out.read()
