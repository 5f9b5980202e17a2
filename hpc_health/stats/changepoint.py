"""Level shifts in a figure's nightly series, as the report draws them.

Pelt (l2 cost, as ``ruptures`` has it) segments the series into levels; the
segmentation is on log values scaled by the short-term noise (successive
differences), so it finds every level change, episodes included: the
recorded noise series contain episodes that look exactly like steps (the
fsync-write series sits 15 % lower for its last 19 runs than for its first
11; 1-thread STREAM 12 % higher for its last 15 than its first 15).  Which
change is a sustained step to worse is not decided here but by
:mod:`hpc_health.stats.stepscan`, against the figure's own noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hpc_health.stats import robust_spread
from hpc_health.stats.constants import (
    MIN_SPREAD,
)

#: Pelt penalty per change point, in units of log(n) x (noise sigma)^2.  The
#: BIC value is ~2; on the recorded 30-run series 2 log n still split plain
#: noise into 3-run segments (ior write, osu bw), 3 log n did not.
PENALTY_FACTOR = 3.0


def _finite_index(values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    arr = np.asarray(values, dtype=float).ravel()
    idx = np.flatnonzero(np.isfinite(arr) & (arr > 0))
    return np.log(arr[idx]), idx


def _short_term_sigma(x: np.ndarray) -> float:
    """Noise sigma from successive differences: a level shift moves only one
    difference, so unlike the MAD of the values it is not inflated by steps."""
    if x.size < 3:
        return 0.0
    return robust_spread(np.diff(x)) / math.sqrt(2.0)


def change_points(values: Sequence[float], min_size: int = 3,
                  penalty: float | None = None) -> list[int]:
    """Indices (into ``values``) where a new level starts, ascending.

    Non-finite or non-positive values are skipped (indices still refer to the
    input).  ``penalty`` is in units of the normalised noise variance;
    default ``PENALTY_FACTOR * log(n)``.
    """
    x, idx = _finite_index(values)
    n = x.size
    if n < 2 * min_size:
        return []
    sigma = max(_short_term_sigma(x), MIN_SPREAD)
    z = ((x - np.median(x)) / sigma).reshape(-1, 1)
    pen = PENALTY_FACTOR * math.log(n) if penalty is None else float(penalty)
    bkps = _pelt_l2(z.ravel(), pen, min_size)
    return [int(idx[b]) for b in bkps[:-1]]


def _pelt_l2(z: np.ndarray, pen: float, min_size: int) -> list[int]:
    """The ends of the segments of *z* (the last is ``len(z)``) that
    ``ruptures.Pelt(model="l2", min_size=min_size, jump=1).fit(z).predict(pen)``
    finds (ruptures 1.1.10, detection/pelt.py): the same search, pruning and
    tie-breaking, with each segment's cost (its sum of squared deviations)
    from prefix sums instead of one numpy call per segment.  A year of
    nights is ~60 000 segment costs: 0.6 s in ruptures (1.4 s on a loaded
    machine), 0.02 s here; and importing ruptures (scipy.stats,
    scipy.signal) was another 0.5 s of every ``history``.
    tests/test_stats.py checks it against ruptures on random, stepped,
    episodic and quantised series."""
    n = len(z)
    s1 = np.concatenate(([0.0], np.cumsum(z))).tolist()
    s2 = np.concatenate(([0.0], np.cumsum(z * z))).tolist()
    best: dict[int, tuple[float, tuple[int, ...]]] = {0: (0, ())}   # end -> (cost, segment ends) of z[:end]
    admissible = []
    for end in [*range(min_size, n), n]:
        admissible.append(end - min_size)
        candidates = []
        for t in admissible:
            if t in best:
                d = s1[end] - s1[t]
                cost = max(s2[end] - s2[t] - d * d / (end - t), 0.0)
                candidates.append((t, best[t][0] + (cost + pen)))
        start, total = min(candidates, key=lambda c: c[1])      # the first minimum
        best[end] = (total, best[start][1] + (end,))
        admissible = [t for t, tot in candidates if tot <= total + pen]
    return list(best[n][1])
