"""Stopping a run: SIGINT, SIGTERM and SIGHUP stop ReFrame and its jobs the
same way; what completed is judged and kept."""

import signal

from hpc_health import processes


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
