"""Processes we started, and whether one still lives.  Used by the runner
(ReFrame and its jobs), the store (is a run still in progress?) and the
fault bench (its workloads)."""

import os
import signal
import subprocess


def alive(pid):
    """Does process *pid* exist (on this host)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True     # someone else's, but alive
    return True


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
