"""Borrowing strength across the figures of one benchmark on one hardware.

Five baseline runs give each figure's night-to-night spread 4 degrees of
freedom: a t-test then needs a change of ten spreads to be sure at the
levels a month-long false-alarm budget asks for.  The figures of one
benchmark on one partition (STREAM's Copy, Scale, Add and Triad; OSU's
sizes) tend to be about as noisy as each other, so each figure's spread is
shrunk towards a prior fitted to all of them, with the prior's strength
estimated from how much their spreads differ (Smyth 2004, the moderated t
of limma): alike spreads give a strong prior, unlike ones a weak one.

The figures of one run are not independent draws, though: STREAM's four
kernels rise and fall together from run to run, and four spreads taken from
the same five runs are one spread seen four times.  The prior's strength is
therefore held to what the family's *effective* number of independent
figures can carry (:func:`effective_count`), estimated from the baseline's
correlations; the same number, counted over one check's figures, is the
check's size for the multiplicity correction, so figures that move
together are neither counted as many tests nor trusted as many
measurements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hpc_health.stats.robust import special
from hpc_health.stats.tail_count import Family

#: Fewest figures a prior is fitted to: with two, the spread of their
#: spreads says nothing about the distribution.
MIN_FIGURES = 3


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (Newton's method on 1/trigamma, as limma does)."""
    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(special.polygamma(1, y))
        step = tri * (1.0 - tri / x) / float(special.polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def fit_prior(variances: Sequence[float], dfs: Sequence[float]) -> tuple[float, float]:
    """(prior variance s0², prior degrees of freedom d0) fitted to sample
    variances with their degrees of freedom (the method of moments on log
    variances of limma's ``fitFDist``).  d0 is ``inf`` when the variances
    differ no more than sampling alone makes them, 0 when there are too few
    figures or a variance is 0."""
    s2 = np.asarray(variances, dtype=float)
    d = np.asarray(dfs, dtype=float)
    ok = (s2 > 0) & (d > 0) & np.isfinite(s2)
    s2, d = s2[ok], d[ok]
    if s2.size < MIN_FIGURES:
        return (float(np.mean(s2)) if s2.size else 0.0), 0.0
    e = np.log(s2) - special.digamma(d / 2) + np.log(d / 2)
    emean = float(np.mean(e))
    evar = float(np.var(e, ddof=1)) - float(np.mean(special.polygamma(1, d / 2)))
    if evar <= 0:
        return math.exp(emean), math.inf
    d0 = 2.0 * _trigamma_inverse(evar)
    return math.exp(emean + float(special.digamma(d0 / 2)) - math.log(d0 / 2)), d0


def effective_count(run_logs: np.ndarray) -> float:
    """Effective number of independent figures in a family, from a runs ×
    figures matrix of log figures (NaN where a run lacks a figure): how
    much they can lend each other.

    m / (1 + (m − 1) ρ²), with ρ² the mean squared correlation between
    figures less what R runs of independent figures show by chance
    (1 / (R − 1)): 1 for figures that move as one, m for independent ones.
    A figure computed from another (STREAM's per-core Triad, its Triad over
    the thread count) is not counted apart from it: with its copies among
    the figures, the chance correction of four copied pairs could count
    two distinct figures as three.
    """
    fam = family(run_logs)
    return fam.figures / (1.0 + (fam.figures - 1.0) * fam.correlation ** 2) + fam.apart


def family(run_logs: np.ndarray) -> Family:
    """The distinct figures of a runs × figures matrix of log figures and
    their typical correlation (the root of :func:`effective_count`'s ρ²);
    a figure with a run missing or no spread is counted apart."""
    x = np.asarray(run_logs, dtype=float)
    if x.ndim != 2 or x.shape[1] < 2:
        return Family(float(x.shape[1]) if x.ndim == 2 else 1.0)
    keep = np.all(np.isfinite(x), axis=0) & (np.nanstd(x, axis=0) > 0)
    x = _distinct(x[:, keep])
    m, r = x.shape[1], x.shape[0]
    dropped = float(np.sum(~keep))
    if m < 2 or r < 3:
        # Too little to see how they move: each counts, the safe side for
        # multiplicity (the prior is then held by the runs instead).
        return Family(float(m) + dropped)
    c = np.corrcoef(x, rowvar=False)
    off = c[~np.eye(m, dtype=bool)]
    chance = 1.0 / (r - 1)
    rho2 = min(max((float(np.mean(off ** 2)) - chance) / (1.0 - chance), 0.0), 1.0)
    return Family(float(m), math.sqrt(rho2), dropped)


#: Log figures that differ run by run by less than this move as one: a
#: copy scaled by a constant (printed decimals leave it a part in 10⁶).
COPY_TOLERANCE = 1e-6


def _distinct(x: np.ndarray) -> np.ndarray:
    """The columns of a runs × figures matrix of log figures less those that
    are another's copy moved by a constant (a figure times a constant)."""
    centred = x - np.mean(x, axis=0)
    kept: list[int] = []
    for j in range(x.shape[1]):
        if not any(np.max(np.abs(centred[:, j] - centred[:, i])) <= COPY_TOLERANCE
                   for i in kept):
            kept.append(j)
    return x[:, kept]


def prior_df_cap(effective: float, df: float) -> float:
    """The most degrees of freedom the other figures of a family can lend
    one figure: those of its ``effective − 1`` independent companions."""
    return max(effective - 1.0, 0.0) * max(df, 0.0)


def moderate(variance: float, df: float, prior_variance: float,
             prior_df: float) -> tuple[float, float]:
    """(moderated variance, its degrees of freedom): the figure's own
    variance shrunk towards the prior, weighted by degrees of freedom."""
    if not prior_df > 0 or not prior_variance > 0:
        return variance, df
    if math.isinf(prior_df):
        return prior_variance, math.inf
    total = df + prior_df
    return (df * variance + prior_df * prior_variance) / total, total
