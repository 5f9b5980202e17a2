"""The seconds-long probes of ``hpc-health node-check`` (Slurm's
``HealthCheckProgram``), run on the node itself: nothing to build, no MPI,
no job.

- ``triad_1t``: one thread's memory bandwidth, STREAM's Triad
  (a = b + s*c) over arrays far larger than any cache, in numpy;
- ``cpu_all_cores``: the time of a million steps of a Python loop on every
  core of the node at once (the slowest core's), which a throttled or
  capped CPU stretches.

Each is measured over :data:`WINDOWS` windows of :data:`WINDOW` seconds of
continuous work, and the best window counts: a probe can only be slowed by
what else runs, and other work that comes and goes leaves it a quiet
window, where a throttled CPU leaves none.  The windows are long on
purpose: a CPU held to a share of its time by a cgroup (CFS bandwidth
control) still runs a few milliseconds at full speed each period, so short
repetitions would find those and miss the cap.
"""

import multiprocessing
import os
import time

#: Windows of continuous work per probe; the best counts.
WINDOWS = 5
#: Seconds of each window.
WINDOW = 0.25
#: Elements per Triad array: 32 MiB of doubles each.
TRIAD_N = 1 << 22
#: Steps of the CPU loop between looks at the clock.
STEPS = 50_000

BETTER = {"triad_1t": "higher", "cpu_all_cores": "lower"}
UNITS = {"triad_1t": "MB/s", "cpu_all_cores": "s"}


def _best_window(step):
    """The best rate of *step* (work units per second, one call = one
    unit) over the windows."""
    best = 0.0
    for _ in range(WINDOWS):
        done, t0 = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - t0) < WINDOW:
            step()
            done += 1
        best = max(best, done / elapsed)
        time.sleep(0.05)
    return best


def triad():
    import numpy as np
    a, b, c = (np.full(TRIAD_N, x) for x in (0.0, 1.0, 2.0))

    def step():
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)
    # Read c, write a; read a and b, write a: five arrays' worth of traffic.
    return _best_window(step) * 5 * TRIAD_N * 8 / 1e6


def _loop():
    total = 0
    for i in range(STEPS):
        total += i & 7
    return total


def _core_seconds(_=None):
    """Seconds a million loop steps take on this core, at its best window."""
    return 1e6 / STEPS / _best_window(_loop)


def cpu_all_cores():
    cores = len(os.sched_getaffinity(0))
    with multiprocessing.get_context("fork").Pool(cores) as pool:
        return max(pool.map(_core_seconds, range(cores)))


def shown(name, value):
    """*value* of probe *name* with its unit, as a person reads it."""
    return f"{value:.0f} MB/s" if UNITS[name] == "MB/s" else f"{value:.3f} s"


def measure():
    """{probe: value} (units in :data:`UNITS`)."""
    return {"triad_1t": triad(), "cpu_all_cores": cpu_all_cores()}
