"""Many figures a little worse tonight: the night as a whole against the
site's own nights.

Each figure alone may sit inside its bounds while together they say the
machine changed (a new MPI, a kernel, a BIOS setting).  Figures are not
independent witnesses, though: an episode of the host moves many of them at
once, so counting figures (a sign test) would call every noisy night a
shift.  The unit is the night: its index is the median, over the figures it
measured, of each figure against its reference (log ratio, signed so that
worse is positive).  Tonight's index is judged against the indices of the
site's recent nights over the same figures, their spread included, so the
yardstick is this site's own night-to-night variation of the whole.

Each check weighs the same in the median (and in the share of figures
worse than usual), as in the false-alarm budget: the halo check's sixty
figures moving together with the host's placement of two vCPUs are one
check's episode, not a machine that changed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hpc_health.stats import gate
from hpc_health.stats.constants import HIGHER, LOWER
from hpc_health.stats.robust import special

if TYPE_CHECKING:
    from hpc_health.judge.trends import Trend

BROADLY_WORSE = "BROADLY WORSE"
#: Recent nights needed before a night is judged as a whole.
MIN_NIGHTS = 10
#: Tonight's index must lie beyond the recent nights' one-sided prediction
#: bound at the BROADLY WORSE share of the site's false-alarm budget: their
#: mean and spread are estimated from the recent nights themselves, so the
#: bound is a Student t with their number less one degrees of freedom (ten
#: nights' "3 sigmas" fired on about one night in 38 of normal data).
#: ... and be at least this much worse than usual (below it, print
#: resolution and compiler noise, as for a reference's bound).
MIN_CHANGE = 0.03
#: Smallest spread of the nightly index assumed (log scale).
MIN_SPREAD = 0.005


@dataclass
class BroadNight:
    """Tonight's figures taken together against the recent nights."""
    figures: int            # figures with a reference measured tonight
    worse: int              # of those, worse than their own recent median
    change: float           # tonight's index: the median figure against its reference
    usual: float            # the recent nights' mean index
    spread: float           # their standard deviation (log scale)
    nights: int             # recent nights judged against
    word: str | None        # BROADLY_WORSE or None
    previous: str | None = None     # the latest of those nights (a run id)

    @property
    def beyond(self) -> float:
        """How much worse than usual the whole night is (fraction)."""
        return math.expm1(math.log1p(self.change) - math.log1p(self.usual))


def tonight(trends: Sequence[Trend], tonight_run: str,
            budget: float = gate.FALSE_ALARM_BUDGET) -> BroadNight | None:
    """The broad verdict on run *tonight_run* from the trends of the recent
    runs (:func:`hpc_health.judge.trends.trends`), or None when tonight has
    no figure with a reference or fewer than :data:`MIN_NIGHTS` earlier runs
    measured them."""
    per_run: dict[str, list[tuple[float, tuple[str, str]]]] = {}
    own_usual: list[tuple[float, float, tuple[str, str]]] = []
    for t in trends:
        if not t.runs or t.runs[-1] != tonight_run or not t.reference or t.reference <= 0 \
                or t.better not in (HIGHER, LOWER):
            continue
        sign = 1.0 if t.better == LOWER else -1.0
        # A past night on a busy node measured the load: it is no part of
        # the site's usual night (a week of hogs would widen the yardstick
        # until a real shift passed).
        busy = t.busy or [False] * len(t.runs)
        ratios = [(run, sign * math.log(v / t.reference))
                  for run, v, b in zip(t.runs, t.values, busy)
                  if v is not None and v > 0 and (run == tonight_run or not b)]
        if not ratios or ratios[-1][0] != tonight_run:
            continue
        check = (t.test, t.partition)
        for run, r in ratios:
            per_run.setdefault(run, []).append((r, check))
        past = [r for _, r in ratios[:-1]]
        if past:
            own_usual.append((ratios[-1][1], float(np.median(past)), check))
    figures = len(per_run.get(tonight_run, []))
    if not figures:
        return None
    # Past nights that measured at least half of tonight's figures.
    earlier = [run for run, rs in per_run.items()
               if run != tonight_run and len(rs) * 2 >= figures]
    past_index = [_check_median(per_run[run]) for run in earlier]
    if len(past_index) < MIN_NIGHTS:
        return None
    now = _check_median(per_run[tonight_run])
    usual = float(np.mean(past_index))
    n = len(past_index)
    spread = max(float(np.std(past_index, ddof=1)), MIN_SPREAD)
    alpha = gate.night_budget(budget) * gate.SHARE_BROAD
    bound = float(special.stdtrit(n - 1, 1.0 - alpha)) * spread * math.sqrt(1.0 + 1.0 / n)
    worse = sum(r > u for r, u, _ in own_usual)
    weights = _check_weights([c for _, _, c in own_usual])
    share = sum(w for (r, u, _), w in zip(own_usual, weights) if r > u) / (sum(weights) or 1.0)
    word = (BROADLY_WORSE if now - usual >= max(bound, math.log1p(MIN_CHANGE))
            and share > 0.5 else None)
    return BroadNight(figures, worse, math.expm1(now), math.expm1(usual), spread,
                      len(past_index), word, max(earlier))


def _check_weights(checks: Sequence[tuple[str, str]]) -> list[float]:
    """Each figure's weight: one over its check's number of figures."""
    counts: dict[tuple[str, str], int] = {}
    for c in checks:
        counts[c] = counts.get(c, 0) + 1
    return [1.0 / counts[c] for c in checks]


def _check_median(ratios: Sequence[tuple[float, tuple[str, str]]]) -> float:
    """The median of a night's figures, each check weighing the same: the
    smallest value at which half the weight is reached from below."""
    order = sorted(zip((r for r, _ in ratios), _check_weights([c for _, c in ratios])))
    total, below = sum(w for _, w in order), 0.0
    for r, w in order:
        below += w
        if below >= total / 2:
            return r
    return order[-1][0]
