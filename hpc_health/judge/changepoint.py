"""Slow trouble in the nightly history: a sustained step to a worse level.

The nightly verdict judges one night against the reference's noise, so a 10 %
drop on a metric whose bounds are +-15 % passes every night.  A drop that
stays, night after night, is still a health issue; this module finds it.

Pelt (l2 cost, as ``ruptures`` has it) segments the series into levels; the segmentation
is on log values scaled by the short-term noise (successive differences), so
it finds every level change, episodes included.  Which of those is a
degradation is decided separately, against the noise a *healthy* series shows
between levels: the recorded noise series contain episodes that look exactly
like steps (the fsync-write series sits 15 % lower for its last 19 runs than
for its first 11; 1-thread STREAM 12 % higher for its last 15 than its first
15, each half quiet to 2 %), so a step only counts if it is large compared
with the reference's episode-inclusive spread, sustained to the latest night,
and supported by a rank test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hpc_health.judge.stats import Reference, expected_spread, robust_spread
from hpc_health.judge.stats.constants import (
    ALPHA,
    BOUND_FLOOR,
    EPISODE_FLOOR,
    HIGHER,
    LOWER,
    MIN_SPREAD,
    _check_direction,
    _from_log,
    _to_log,
)

#: Pelt penalty per change point, in units of log(n) x (noise sigma)^2.  The
#: BIC value is ~2; on the recorded 30-run series 2 log n still split plain
#: noise into 3-run segments (ior write, osu bw), 3 log n did not.
PENALTY_FACTOR = 3.0
#: A step counts when the level since the change is worse than expected by
#: this many nightly sigmas (sigma from the reference, episodes included).
#: The recorded series' own sustained levels sit up to ~1.1 sigma from their
#: reference (1-thread STREAM's low first half: -9 % at sigma 8.4 %); block-
#: resampled, 1.25 fired on 4 % of such series and 1.5 on none.  A 10 % step
#: under +-15 % bounds (sigma 5 %) is 2 sigma: caught on 97 % of 30-night
#: series at CV 3 %, 94 % at CV 4 %, 70 % at CV 5 % (step at night 20).
STEP_SIGMAS = 1.5
#: "Sustained": this share of the nights since the change must be worse than
#: the expected level by at least half the threshold (so one good episode in
#: the middle does not move the date, as 2-thread STREAM's +75 % runs would),
#: and the latest level segment by the whole threshold (not recovered).
SUSTAIN_NIGHTS = 0.75
#: ... and the step itself, after vs before, must be at least this share of
#: the threshold: a level that was always there is not a step.
SUSTAIN_SHARE = 0.5


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


def step_degradation(values: Sequence[float], timestamps: Sequence | None = None,
                     direction: str = HIGHER, *, reference: Reference | None = None,
                     spread: float | None = None, samples_per_night: int = 1,
                     min_size: int = 3, penalty: float | None = None,
                     sigmas: float = STEP_SIGMAS, min_change: float = BOUND_FLOOR,
                     alpha: float = ALPHA,
                     known_change_points: Sequence[int] | None = None) -> dict | None:
    """The earliest night since which the variable has stayed worse, or None.

    ``values``: one figure per night (the night's median), oldest first.  The
    noise scale a step is measured against, in order of preference: an
    explicit ``spread`` (log-scale sigma of one night's figure), the
    ``reference``'s noise model (episodes included, for nights of
    ``samples_per_night`` samples), else the series' own robust spread, which
    includes the step itself and so errs towards silence.

    A step at change point c is reported when: the median since c is worse
    than the expected level (the reference's value, else the median before
    c) by at least ``threshold = max(min_change, sigmas x sigma)``, and worse
    than the nights before c by half that (a step, not a level that was
    always there); the latest level segment is worse than expected by the
    threshold, the one starting at c by half the magnitude since c, and 3/4
    of all nights since c by half the threshold (sustained); and
    a one-sided Mann-Whitney test of before vs after gives p <= ``alpha`` (a
    guard against steps made of a handful of nights; its p is optimistic
    under episodes, which is why the size test leads).

    Returns ``{"index", "timestamp", "magnitude", "before", "expected", "after",
    "threshold", "sigma", "p_value", "nights", "change_points"}``;
    magnitude and threshold are fractions, positive = worse.
    """
    _check_direction(direction)
    x, idx = _finite_index(values)
    if x.size < 2 * min_size:
        return None
    sign = 1.0 if direction == LOWER else -1.0

    if spread is not None:
        sigma = float(spread)
    elif reference is not None and reference.has_noise:
        sigma = expected_spread(reference, samples_per_night)
    else:
        sigma = max(robust_spread(x), EPISODE_FLOOR)
    sigma = max(sigma, MIN_SPREAD)
    threshold = max(_to_log(min_change, direction), sigmas * sigma)

    # A caller that drew the change points already passes them (the same
    # values, min_size and penalty): Pelt is most of this test's cost.
    cps = (list(known_change_points) if known_change_points is not None
           else change_points(values, min_size=min_size, penalty=penalty))
    pos = [int(np.searchsorted(idx, c)) for c in cps]     # into x
    bounds = pos + [x.size]
    ref_level = (math.log(reference.value)
                 if reference is not None and reference.value > 0 else None)
    for k, c in enumerate(pos):
        before, after = x[:c], x[c:]
        # The level healthy nights are expected at: the reference when there
        # is one (a few nights before the change may themselves sit in an
        # episode), else whatever came before.
        base = np.median(before) if ref_level is None else ref_level
        worse = sign * (np.median(after) - base)
        if worse < threshold:
            continue
        # ... and it must be a step: clearly worse than the nights before it.
        if sign * (np.median(after) - np.median(before)) < SUSTAIN_SHARE * threshold:
            continue
        if np.mean(sign * (after - base) >= SUSTAIN_SHARE * threshold) < SUSTAIN_NIGHTS:
            continue
        # the level that starts at c is part of the same trouble, not a mild
        # dip that a bigger step later happens to follow
        if sign * (np.median(x[c:bounds[k + 1]]) - base) < SUSTAIN_SHARE * worse:
            continue
        if sign * (np.median(x[bounds[-2]:]) - base) < threshold:
            continue
        # Imported here: scipy.stats costs 0.4 s of start-up (over a second on
        # a loaded machine), and only a candidate step needs it.
        from scipy import stats as _st
        p = float(_st.mannwhitneyu(after, before,
                                   alternative="greater" if sign > 0 else "less").pvalue)
        if p > alpha:
            continue
        i = int(idx[c])
        return {
            "index": i,
            "timestamp": None if timestamps is None else timestamps[i],
            "magnitude": _from_log(float(worse), direction),
            "before": float(np.exp(np.median(before))),
            "expected": float(np.exp(base)),
            "after": float(np.exp(np.median(after))),
            "threshold": _from_log(threshold, direction),
            "sigma": sigma,
            "p_value": p,
            "nights": int(after.size),
            "change_points": cps,
        }
    return None
