"""How many independent figures a check's rare events are worth.

A check's share of the budget is split between its figures.  Divided by
their number (Bonferroni), figures that move together (STREAM's four
kernels) leave most of it unused, since they fail together; counted as
one, figures that fail apart spend it many times over.  The effective number
from squared correlations (:func:`hpc_health.stats.prior.effective_count`)
answers how much *information* the figures carry, not how often *any* of
them crosses a cut far out in the tail: a normal pair of correlation 0.5
crosses a one-in-ten-thousand cut almost independently (normal tails are
asymptotically independent), so a check of ten such figures counted as 3.1
fires about three times as often as its level (``python -m
bench.gate.multiplicity``).

Here the count is fitted to the level it is used at: the figures are
equicorrelated normals (a shared factor and their own parts), a figure's
rule is k nights in a row beyond the cut that one figure's k nights pass
with probability α, and the union's rate is integrated exactly over the
factor's k nights.  The level is then the α at which the union spends the
check's share.  The reference's error, which the model leaves out, is
shared by every figure and night and makes them fail more together: the
count errs on the safe side there (the bench's checks spend 85-98 % of
their share), and so does the correlation it is given
(:func:`correlation_shown`), one standard error below the runs'.  Each
figure's own spread estimate, also left out, errs apart from the others'
and makes them fail less together; in the nightly stores the persistence
rule spent 35 for a share of 30 (bench/gate/README.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from hpc_health.stats.robust import special

#: Correlation the model is held below: figures closer than this are copies
#: (dropped before) or as near as five runs can tell; the integral needs the
#: figures' own parts.
MAX_CORRELATION = 0.999
# The factor's grid, and the bins of a figure's log tail probability given
# it: a bin of 0.02 moves a probability by 2 %, far below what the
# correlation estimate moves it; below e^-60 a night adds nothing.
_Z = np.linspace(-10.0, 10.0, 4001)
_WZ = np.exp(-_Z ** 2 / 2) / np.sum(np.exp(-_Z ** 2 / 2))
_STEP, _FLOOR = 0.02, -60.0


def correlation_shown(correlation: float, runs: int) -> float:
    """The correlation a check's figures are counted at: one standard error
    (Fisher's z, 1/√(R − 3)) below what R runs show.  A count can only fall
    from the number of figures, so a chance high correlation in five runs
    (two independent figures show one of 0.9 or more in 4 % of captures)
    would buy the check a larger level on those captures and nothing back
    on the others; STREAM's kernels at 0.999 are counted at 0.996."""
    if runs <= 3 or correlation <= 0.0:
        return 0.0
    z = math.atanh(min(correlation, MAX_CORRELATION)) - 1.0 / math.sqrt(runs - 3)
    return max(math.tanh(z), 0.0)


@dataclass(frozen=True)
class Family:
    """The figures of one check that split its share of the budget."""
    figures: float              # distinct figures seen to move with each other
    correlation: float = 0.0    # their typical correlation (root mean square)
    apart: float = 0.0          # figures counted on their own (nothing to correlate)

    def worth(self, alpha: float, k: int) -> float:
        """Independent figures the union of the check's k-night events at a
        figure's level *alpha* is worth."""
        return union_rate(self.figures, self.correlation, alpha, k) / alpha + self.apart


def union_rate(figures: float, correlation: float, alpha: float, k: int) -> float:
    """P(any of *figures* equicorrelated figures is beyond the cut on k nights
    in a row), the cut being where one figure's k nights all are with
    probability *alpha*; nights are independent, figures share a factor of
    variance *correlation* each night."""
    if figures <= 1.0 or correlation <= 0.0:
        return alpha * max(figures, 1.0)
    rho = min(correlation, MAX_CORRELATION)
    cut = float(special.ndtri(1.0 - alpha ** (1.0 / k)))
    # log P(a figure beyond the cut | the night's factor z)
    logp = special.log_ndtr(-(cut - math.sqrt(rho) * _Z) / math.sqrt(1.0 - rho))
    bins = np.clip(np.round((logp - _FLOOR) / _STEP).astype(int), 0, None)
    one = np.bincount(bins, weights=_WZ, minlength=int(-_FLOOR / _STEP) + 1)
    nights = one
    for _ in range(k - 1):
        nights = np.clip(np.convolve(nights, one), 0.0, None)
    q = np.exp(np.minimum(_FLOOR * k + _STEP * np.arange(nights.size), 0.0))
    q = np.minimum(q, 1.0 - 1e-16)
    # The union is the sum of the figures' rates less their overlaps; the
    # sum is exact (figures * alpha), so the bins only move the overlaps.
    overlap = figures * q + np.expm1(figures * np.log1p(-q))
    return max(figures * alpha - float(nights @ overlap), alpha)


def fitted_level(share: float, family: Family, k: int) -> float:
    """The level of each figure of *family* at which the union of their
    k-night events spends *share* (a check's part of one night's budget)."""
    return _fitted(float(f"{share:.4g}"), round(family.figures, 3),
                   round(family.correlation, 3), round(family.apart, 3), int(k))


@lru_cache(maxsize=1024)
def _fitted(share: float, figures: float, correlation: float, apart: float, k: int) -> float:
    family = Family(figures, correlation, apart)
    most = max(figures + apart, 1.0)
    if correlation <= 0.0 or figures <= 1.0:
        return share / most
    # Imported here: scipy.optimize costs every command 0.16 s of start-up.
    from scipy.optimize import brentq

    def spent(log_alpha: float) -> float:
        alpha = math.exp(log_alpha)
        return math.log(alpha * family.worth(alpha, k) / share)
    # Counted as independent the union spends at most the share; counted
    # as one (and the figures apart) at least.
    lo, hi = math.log(share / most), math.log(share / (1.0 + apart))
    if spent(hi) <= 0.0:
        return math.exp(hi)
    return math.exp(brentq(spent, lo, hi, xtol=1e-4))
