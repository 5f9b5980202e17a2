"""Stopping a run: SIGINT, SIGTERM and SIGHUP stop ReFrame and its jobs the
same way; what completed is judged and kept."""

import signal
import sys

from hpc_health import processes


class Stopped(Exception):
    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP -- Ctrl-C, a scheduler's time limit, a CI
    job's cancel button, ``systemctl stop``, a closed terminal -- all stop a
    run the same way.

    Before :meth:`arm` a signal ends the process (128 + its number).  Armed
    (the run directory exists, ReFrame or the builds run), the first raises
    :class:`Stopped` in the main thread and ``signum`` remembers it; a second
    raises :class:`StopNow`.  After :meth:`closing` (the run is being judged
    and stored, a second or two) a signal is noted and the run closed first:
    a killed judgement would lose the night.  SIGKILL still ends it.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.signum = None
        self.again = False
        self.state = "idle"
        self.late = None
        self._old = {}

    def arm(self):
        self.state = "armed"

    def closing(self):
        self.state = "closing"

    def _handle(self, signum, frame):
        if self.state == "idle":
            raise SystemExit(128 + signum)
        if self.state == "closing":
            if self.late is None:
                self.late = signum
                print(f"hpc-health: {signal.Signals(signum).name} received while the run is "
                      "closed: closing it first", file=sys.stderr, flush=True)
            return
        if self.signum is None:
            self.signum = signum
            raise Stopped(signum)
        if not self.again:
            # A second signal while stopping: no more waiting for anyone.
            self.again = True
            raise StopNow(signum)

    def __enter__(self):
        for s in self.SIGNALS:
            self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc):
        for s, handler in self._old.items():
            signal.signal(s, handler)
        return False


class StopNow(Stopped):
    """A second signal during the stop."""


#: The whole stop fits in 10 s, Slurm's KillWait being 30 s: ReFrame gets 4 s
#: after SIGINT to cancel its jobs and write its report (it takes well under
#: one here), 3 s after SIGTERM, then SIGKILL; what it leaves is stopped
#: after (processes.stop_descendants, 1 s).
STOP_STEPS = ((signal.SIGINT, 4.0), (signal.SIGTERM, 3.0), (signal.SIGKILL, 1.0))


def stop_process_group(proc):
    """SIGINT to ReFrame's process group (ReFrame then cancels its jobs and
    writes its report), then SIGTERM, then SIGKILL, each after its grace; a
    second signal meanwhile: SIGKILL at once."""
    try:
        processes.stop_group(proc, STOP_STEPS)
    except StopNow:
        processes.stop_group(proc, ((signal.SIGKILL, 1.0),))
