"""Robust summaries: what a set of samples stands for (:func:`location`),
how far they spread, within a run and between runs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from hpc_health.stats.constants import (
    HUBER_EFFICIENCY,
    HUBER_K,
    HUBER_MIN_SAMPLES,
    IQR_TO_SIGMA,
    LOWER,
    MAD_TO_SIGMA,
    MEDIAN_EFFICIENCY,
    PAIR_TO_SIGMA,
    TINY,
)


class _Special:
    """scipy.special, imported on first use: importing it takes 0.3-0.6 s
    here, and ``history`` and the drift test never need it."""

    def __getattr__(self, name):
        from scipy import special
        return getattr(special, name)


special = _Special()


def clean(samples: Iterable[float]) -> tuple[np.ndarray, int]:
    """Finite samples and how many were dropped (NaN, +-inf, None).

    STREAM prints ``inf`` for arrays too small for its timer; such a sample
    says nothing about the machine and must not reach a median.
    """
    arr = np.asarray(list(samples) if not isinstance(samples, np.ndarray) else samples,
                     dtype=float).ravel()
    ok = np.isfinite(arr)
    return arr[ok], int(arr.size - ok.sum())


def quantisation_step(samples: Iterable[float]) -> float:
    """Smallest gap between distinct values (0.0 if all values are equal).

    Benchmarks print a fixed number of decimals (osu_latency: 0.01 us), so on
    fast paths the values sit on a coarse grid and the MAD can be exactly 0.
    """
    return _smallest_gap(clean(samples)[0])


def _smallest_gap(x: np.ndarray) -> float:
    u = np.unique(x)
    return float(np.min(np.diff(u))) if u.size > 1 else 0.0


def printed_step(samples: Iterable[float]) -> float:
    """The larger of :func:`quantisation_step` and one step of the decimals
    the samples were printed with: 0.01 for osu_latency's 0.07 us however
    many samples print the same, where the smallest gap is 0.  Values
    computed, not printed, sit on no decimal grid; whole numbers say
    nothing of one (5.0 s may be printed so or as 5.000 s), so a tenth is
    the coarsest step the decimals give."""
    cleaned, _ = clean(samples)
    x = np.abs(cleaned[cleaned != 0])
    grid = 0.0
    for k in range(-1, -10, -1):
        q = x / 10.0 ** k
        # Past 1e12 steps a double cannot tell a grid from no grid.
        if not x.size or np.max(q) > 1e12:
            break
        if np.all(np.abs(q - np.round(q)) <= 1e-6):
            grid = 10.0 ** k
            break
    return max(grid, _smallest_gap(cleaned))


def robust_spread(samples: Iterable[float]) -> float:
    """Scale of the samples in their own unit, estimating sigma.

    1.4826 x MAD; when the MAD is 0 (more than half the samples identical,
    typical of values quantised to 0.01 us) the IQR/1.349; when that is 0 too,
    half the quantisation step, the largest error rounding can hide.  0.0 for
    a constant series: callers apply their floors.
    """
    x, _ = clean(samples)
    if x.size < 2:
        return 0.0
    mad = MAD_TO_SIGMA * float(np.median(np.abs(x - np.median(x))))
    if mad > 0:
        return mad
    q1, q3 = np.percentile(x, [25, 75])
    iqr = IQR_TO_SIGMA * float(q3 - q1)
    if iqr > 0:
        return iqr
    return 0.5 * quantisation_step(x)


def relative_spread(samples: Iterable[float]) -> float:
    """:func:`robust_spread` as a fraction of the median (0.0 if median is 0)."""
    x, _ = clean(samples)
    if x.size == 0:
        return 0.0
    med = float(np.median(x))
    return robust_spread(x) / abs(med) if med else 0.0


def location(samples: Iterable[float]) -> float:
    """The figure a set of samples stands for: Huber's M-estimate of location
    on the log scale (scale: :func:`robust_spread`, clipping at
    :data:`HUBER_K` of it), the median for fewer than
    :data:`HUBER_MIN_SAMPLES`.  Non-finite samples are dropped; raises
    ValueError if none is left."""
    x, _ = clean(samples)
    if x.size == 0:
        raise ValueError("no finite samples")
    if x.size < HUBER_MIN_SAMPLES:
        return float(np.median(x))
    if np.all(x > 0):
        return float(np.exp(_log_location(np.log(x))))
    return _log_location(x)   # not a rate or a time; the same estimate, unlogged


def _log_location(lx: np.ndarray) -> float:
    """Huber location of (log) values by iteratively re-weighted means."""
    mu = float(np.median(lx))
    if lx.size < HUBER_MIN_SAMPLES:
        return mu
    scale = robust_spread(lx)
    if not scale > 0:
        return mu
    for _ in range(100):
        step = scale * float(np.mean(np.clip((lx - mu) / scale, -HUBER_K, HUBER_K)))
        mu += step
        if abs(step) <= 1e-12 * max(1.0, abs(mu)):
            break
    return mu


def _logs(x: np.ndarray) -> np.ndarray:
    # A latency printed as 0.00 is "below resolution", not -inf.
    return np.log(np.maximum(x, TINY))


def log_spread(x: np.ndarray) -> float:
    """Robust spread of log values, with the quantisation fallback applied in
    the original unit (the grid is even there, not in logs)."""
    if x.size < 2:
        return 0.0
    s = robust_spread(_logs(x))
    if s > 0:
        return s
    med = float(np.median(x))
    return robust_spread(x) / med if med > 0 else 0.0


def within_run_spread(samples_by_run: Sequence[Iterable[float]]) -> float | None:
    """Pooled within-run relative spread, or None if no run has two samples.

    Median of all within-run pairwise |log x_i - log x_j|, scaled to sigma:
    unbiased for runs of 2-3 samples (residuals from a fitted run median are
    not) and robust to a wild sample.
    """
    by_size: dict[int, list[np.ndarray]] = {}
    for run in samples_by_run:
        x, _ = clean(run)
        if x.size >= 2:
            by_size.setdefault(x.size, []).append(_logs(x))
    if not by_size:
        return None
    diffs = []
    for size, group in by_size.items():
        lx = np.vstack(group)
        i, j = np.triu_indices(size, k=1)
        diffs.append(np.abs(lx[:, i] - lx[:, j]).ravel())
    d = np.concatenate(diffs)
    s = PAIR_TO_SIGMA * float(np.median(d))
    if s == 0 and np.any(d > 0):
        s = 0.5 * float(np.min(d[d > 0]))   # quantised: half a grid step
    return s


def run_location_logs(runs: list[np.ndarray]) -> np.ndarray:
    """:func:`location` of each run's log samples, in input order
    (equal-sized runs at once)."""
    out = np.empty(len(runs))
    by_size: dict[int, list[int]] = {}
    for k, c in enumerate(runs):
        by_size.setdefault(c.size, []).append(k)
    for idx in by_size.values():
        out[idx] = _log_locations(np.vstack([_logs(runs[k]) for k in idx]))
    return out


def _log_locations(lx: np.ndarray) -> np.ndarray:
    """:func:`_log_location` of each row of *lx* (runs of equal size), the
    rows iterated together: a comparison of a year's figures is thousands of
    runs, and one at a time their loops were most of its time."""
    mu = np.median(lx, axis=1)
    if lx.shape[1] < HUBER_MIN_SAMPLES:
        return mu
    scale = MAD_TO_SIGMA * np.median(np.abs(lx - mu[:, None]), axis=1)
    out = mu.copy()
    # A MAD of 0 (quantised samples): the one-run path and its fallbacks.
    for i in np.flatnonzero(~(scale > 0)):
        out[i] = _log_location(lx[i])
    rows = np.flatnonzero(scale > 0)
    m, s, x = mu[rows], scale[rows], lx[rows]
    active = np.arange(rows.size)
    for _ in range(100):
        if not active.size:
            break
        sa = s[active]
        step = sa * np.mean(np.clip((x[active] - m[active, None]) / sa[:, None],
                                    -HUBER_K, HUBER_K), axis=1)
        m[active] += step
        active = active[np.abs(step) > 1e-12 * np.maximum(1.0, np.abs(m[active]))]
    out[rows] = m
    return out


def location_var_factor(n: int) -> float:
    # A median of 1 or 2 samples is their mean; beyond that the location pays
    # for its robustness with variance (the large-n price, an upper bound).
    if n <= 2:
        return 1.0
    return MEDIAN_EFFICIENCY if n < HUBER_MIN_SAMPLES else HUBER_EFFICIENCY


def worse_sign(direction: str) -> float:
    # Log-ratio times this is positive when the value is worse.
    return 1.0 if direction == LOWER else -1.0


def _expected_max_z(r: int) -> float:
    """Expected largest of r standard normal draws (Blom's approximation)."""
    return float(special.ndtri((r - 0.375) / (r + 0.25)))


def tail_scale(worse_devs: np.ndarray) -> float:
    """Sigma that makes the worst baseline run an ordinary worst-of-R.

    Deliberately not robust: the worst healthy run is information, not
    contamination.  A run median only goes wild if most of the run's samples
    did, i.e. in an episode; a single wild sample is absorbed by the location
    of a run of 3+ samples.  With one sample per run a wild sample widens the
    tolerance: the safe side, and the truth about single-sample runs.
    """
    r = worse_devs.size
    if r < 2:
        return 0.0
    return max(float(np.max(worse_devs)), 0.0) / _expected_max_z(r)

