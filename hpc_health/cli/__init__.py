"""The command line: the ``hpc-health`` commands and everything they print
(tables, text, JSON).  The one layer that renders; it sits on top of all
others."""

# The C module under `signal`: already loaded, no Python to import (the
# enum module `signal` imports is itself a window for a signal).
import _signal
import os

#: The signals that stop a command, and 128 + their number is its exit code.
STOPS = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)


def quiet_stops():
    """Until the returned function is called, a stop signal ends the process
    with 128 + its number and nothing else: one that comes while Python is
    still importing the command (the first second of a night) has nothing to
    stop or keep, and Python's own SIGINT handler would print a
    KeyboardInterrupt traceback from whatever module was loading.  Ended
    at once, not by an exception: one raised inside an import's lock
    callback or a finaliser is printed as ignored, and the command went on."""
    def stop(signum, frame):
        os._exit(128 + signum)

    before = {}
    for s in STOPS:
        try:
            before[s] = _signal.signal(s, stop)
        except ValueError:      # not the main thread: leave the signals alone
            return lambda: None

    def restore():
        for s, handler in before.items():
            _signal.signal(s, handler)
    return restore
