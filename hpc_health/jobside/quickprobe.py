"""The seconds-long probes of ``hpc-health node-check`` (Slurm's
``HealthCheckProgram``), run on the node itself: nothing to build, no MPI,
no job.

- ``triad_1t``: one thread's memory bandwidth, STREAM's Triad
  (a = b + s*c) over arrays far larger than any cache, in numpy;
- ``cpu_loop``: the time of a fixed loop of Python bytecode, which a
  throttled or capped CPU stretches.

Each is the best of :data:`REPEATS`: a probe can only be slowed by what
else runs, so its best is its figure.
"""

import time

#: Repetitions of each probe; the best counts.
REPEATS = 7
#: Elements per Triad array: 32 MiB of doubles each.
TRIAD_N = 1 << 22
#: Iterations of the CPU loop (about 0.1 s on a 2020s core).
LOOP_N = 2_000_000

BETTER = {"triad_1t": "higher", "cpu_loop": "lower"}
UNITS = {"triad_1t": "MB/s", "cpu_loop": "s"}


def triad():
    import numpy as np
    a, b, c = (np.full(TRIAD_N, x) for x in (0.0, 1.0, 2.0))
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)
        best = min(best, time.perf_counter() - t0)
    # Read c, write a; read a and b, write a: five arrays' worth of traffic.
    return 5 * TRIAD_N * 8 / best / 1e6


def cpu_loop():
    best = float("inf")
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        total = 0
        for i in range(LOOP_N):
            total += i & 7
        best = min(best, time.perf_counter() - t0)
    return best


def shown(name, value):
    """*value* of probe *name* with its unit, as a person reads it."""
    return f"{value:.0f} MB/s" if UNITS[name] == "MB/s" else f"{value:.3f} s"


def measure():
    """{probe: value} (units in :data:`UNITS`)."""
    return {"triad_1t": triad(), "cpu_loop": cpu_loop()}
