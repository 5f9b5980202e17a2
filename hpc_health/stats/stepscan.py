"""The sustained step to worse: a change-point scan judged against the
figure's own noise.

Every night, each figure's recent nights are asked whether they split into
"before" and "since run R" with the nights since R worse.  For each split
the difference of the means of the log values, in units of its
standard error (Student's t), is the statistic; its largest value over all
splits says where, and how clearly.

How large that maximum gets on a healthy figure depends on its noise, and
the noise of nightly figures comes in episodes (runs in a row sitting a few
per cent apart; 8 B latency at 2.6x for five runs), which any fixed
threshold either calls steps or pays for with blindness on quiet figures.
So the threshold is the figure's own: its nights, with the candidate step
taken out, are resampled in blocks (so their episodes survive)
:data:`RESAMPLES` times, and a step is reported only when the statistic
exceeds what those healthy copies exceed on one night in
:data:`NIGHTS_PER_FALSE_ALARM`, and what independent normal nights exceed
as often (:data:`NORMAL_LIMITS`: the floor no noise goes below, and the
guard against a low estimate from few nights).  With ~150 figures that
is one false ``DRIFTING`` per site a month; the window slides, so tonight's
alarm and tomorrow's are one finding and new alarms are rarer still.  The
resampling is seeded by the series, so ``history`` and the nightly run give
the same answer for the same nights.  ``bench/drift/calibrate.py`` measures
the false alarms and what is found on the recorded noise.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np

from hpc_health.stats.constants import BOUND_FLOOR, HIGHER, LOWER

#: The false-alarm budget: one figure in this many healthy nights (a site of
#: 150 figures, one false alarm in 30 nights).
NIGHTS_PER_FALSE_ALARM = 4500
#: Fewest nights on either side of a split: one bad night is tonight's
#: verdict's business, two can be an episode; three start a level.
MIN_SIDE = 3
#: Smallest nightly spread assumed (log scale): figures printed with two
#: digits (0.16 us) move by whole quanta.
MIN_SPREAD_NIGHT = 0.01
#: The least a threshold can be, by number of nights: the statistic's
#: (1 - 1/4500) quantile on independent normal nights (400 000 simulated
#: series per length; ``python bench/drift/calibrate.py --normal-limits``).
#: A figure's own threshold is never below it: episodes only add to what
#: noise can do.  Lengths between two entries take the shorter one's (and
#: `history` of more than a year the 365 nights').
NORMAL_LIMITS = {6: 10.88, 7: 9.67, 8: 9.01, 9: 7.77, 10: 7.19, 12: 6.34, 15: 5.97,
                 20: 5.53, 25: 5.27, 30: 5.05, 40: 4.84, 50: 4.76, 60: 4.67, 100: 4.6,
                 200: 4.58, 365: 4.54}
#: Mean block length of the resampled nights: the recorded series' episodes
#: last 3-5 runs.
BLOCK_NIGHTS = 5.0
#: Resampled series a threshold is fitted to, and the most nights of each.
RESAMPLES = 1000
RESAMPLED_NIGHTS = 60
_TAIL = 0.1


def worse_log(values: Sequence[float], direction: str) -> tuple[np.ndarray, np.ndarray]:
    """(log values signed so that positive is worse, their indices into
    *values*): nights without a positive figure are left out (a failed check
    has none; samples of 0 are below the timer and say nothing)."""
    x = np.asarray(values, dtype=float)
    keep = np.flatnonzero(np.isfinite(x) & (x > 0))
    sign = 1.0 if direction == LOWER else -1.0
    return sign * np.log(x[keep]), keep


def statistics(y: np.ndarray, earliest: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For series *y* (last axis: nights, worse is positive): the scan
    statistic, the split it was found at (the first night of "since") and the
    nightly spread at that split, over the splits from *earliest* on.  One
    series or a batch of equal length.

    At each split the statistic is Student's t of the two sides'
    means, with the spread pooled around each side's own mean (so the step
    is not counted as noise).  Not winsorised: clipped at a few spreads
    from the median, a step of several spreads would be clipped too (a
    slow launcher's 4x was); one wild night is kept from making a step by
    :func:`scan`'s medians instead."""
    y = np.asarray(y, dtype=float)
    n = y.shape[-1]
    c = np.arange(max(MIN_SIDE, earliest), n - MIN_SIDE + 1)
    csum, csq = np.cumsum(y, axis=-1), np.cumsum(y * y, axis=-1)
    head = csum[..., c - 1]
    before, since = head / c, (csum[..., -1:] - head) / (n - c)
    sse = csq[..., -1:] - c * before ** 2 - (n - c) * since ** 2
    spread = np.maximum(np.sqrt(np.maximum(sse, 0.0) / (n - 2)), MIN_SPREAD_NIGHT)
    t = (since - before) / (spread * np.sqrt(1.0 / c + 1.0 / (n - c)))
    best = np.argmax(t, axis=-1)[..., None]
    return (np.take_along_axis(t, best, -1)[..., 0], c[best[..., 0]],
            np.take_along_axis(spread, best, -1)[..., 0])


def resample(residuals: np.ndarray, count: int, rng: np.random.Generator,
             block: float = BLOCK_NIGHTS, length: int | None = None) -> np.ndarray:
    """*count* series of *length* nights (default: as many as *residuals*),
    drawn from *residuals* in circular blocks of geometric length with mean
    *block* (the stationary bootstrap)."""
    n = residuals.size
    nights = np.arange(length or n)
    jump = rng.random((count, nights.size)) < 1.0 / block
    jump[:, 0] = True
    # each night's block began at the latest jump; it starts at a random night
    began = np.maximum.accumulate(np.where(jump, nights, 0), axis=1)
    start = np.take_along_axis(rng.integers(0, n, (count, nights.size)), began, axis=1)
    pos = (start + nights - began) % n
    return residuals[pos]


def normal_limit(nights: int) -> float:
    """:data:`NORMAL_LIMITS` for a series of *nights* nights."""
    return NORMAL_LIMITS[max(k for k in NORMAL_LIMITS if k <= max(nights, 6))]


def own_threshold(y: np.ndarray, split: int, resamples: int = RESAMPLES) -> float:
    """The statistic a healthy series like *y* exceeds on one night in
    :data:`NIGHTS_PER_FALSE_ALARM`: *y*'s own nights with the step at *split*
    taken out (each side less its median), resampled *resamples* times, and
    the budget's quantile of the maxima found from their tail."""
    residuals = np.concatenate([y[:split] - np.median(y[:split]),
                                y[split:] - np.median(y[split:])])
    seed = int.from_bytes(hashlib.blake2b(y.tobytes(), digest_size=8).digest(), "little")
    # Copies of at most RESAMPLED_NIGHTS (a year's history costs what two
    # months do): the statistic's quantile falls with the length
    # (NORMAL_LIMITS), so a shorter copy's threshold errs high.
    copies = resample(residuals, resamples, np.random.default_rng(seed), BLOCK_NIGHTS,
                      min(y.size, RESAMPLED_NIGHTS))
    maxima = statistics(copies)[0]
    # The budget's quantile from the tail: the maxima above their 90th
    # percentile, taken as exponential (the peaks-over-threshold estimate;
    # a bounded statistic's tail is lighter, so this errs high).
    top = np.quantile(maxima, 1.0 - _TAIL)
    excess = float(np.mean(maxima[maxima > top] - top)) if np.any(maxima > top) else 0.0
    return float(top) + excess * math.log(_TAIL * NIGHTS_PER_FALSE_ALARM)


def scan(values: Sequence[float], direction: str, *,
         min_change: float = BOUND_FLOOR, earliest: int = 0) -> dict | None:
    """The night since which the series has stayed worse, or None; that
    night is *earliest* or later (an index into *values*).

    *values*: one figure per night (the night's median), oldest first.  A
    step is reported when the scan statistic is above the normal noise's
    limit (:func:`normal_limit`) and the figure's own threshold
    (:func:`own_threshold`), the median since the split is worse than the
    median before by at least *min_change* (a fraction), and the last
    :data:`MIN_SIDE` nights are still worse by half of that step (not
    recovered).

    Returns ``{"index" (into values), "magnitude" (fraction, positive =
    worse), "nights" (since), "nights_before", "before", "after", "sigma" (nightly, log), "statistic",
    "threshold"}``.
    """
    if direction not in (HIGHER, LOWER):
        raise ValueError(f"direction must be {HIGHER!r} or {LOWER!r}, not {direction!r}")
    y, idx = worse_log(values, direction)
    first = int(np.searchsorted(idx, earliest))
    if y.size < 2 * MIN_SIDE or y.size - max(first, MIN_SIDE) < MIN_SIDE:
        return None
    t_arr, c_arr, s_arr = statistics(y, first)
    t, c, sigma = float(t_arr), int(c_arr), float(s_arr)
    floor = normal_limit(y.size)
    if t <= floor:
        return None
    before, after = float(np.median(y[:c])), float(np.median(y[c:]))
    step = after - before
    if step < math.log1p(min_change) or np.median(y[-MIN_SIDE:]) - before < step / 2:
        return None
    limit = max(floor, own_threshold(y, c))
    if t <= limit:
        return None
    sign = 1.0 if direction == LOWER else -1.0
    return {"index": int(idx[c]), "magnitude": math.expm1(step),
            "nights": int(y.size - c), "nights_before": c, "before": math.exp(sign * before),
            "after": math.exp(sign * after), "sigma": sigma, "statistic": t,
            "threshold": limit}
