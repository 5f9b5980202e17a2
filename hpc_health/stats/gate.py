"""The nightly gate: one night against the reference, and a loss sustained
over the last nights, within one false-alarm budget per site.

A figure's night is its location (of the night's samples) on the log scale.
Against a reference level fixed at capture (the mean of R baseline runs),
a healthy night deviates by N(0, σ²(1 + 1/R)): the night's own noise and
the reference's.  σ is estimated from the baseline runs and, as healthy
nights come in, from them too (:func:`learned_spread`); early on it is
shrunk towards its benchmark's other figures (:mod:`.prior`).  The test
statistic of a night is ``T = deviation / (σ̂ √(1 + 1/R))``, a Student t
with the spread's degrees of freedom.

Two rules fail a figure, each with its share of the budget:

* one night: ``T > c₁`` — a loss far beyond the noise fails at once;
* persistence: the last :data:`PERSIST_NIGHTS` nights all ``T > c_k`` with
  ``c_k < c₁`` — a loss too small for one night to prove fails when it stays.

The thresholds are exact for the model: ``P(all k nights beyond c)`` is
integrated over the reference's error (shared by every night, so the nights
are not independent) and over the spread estimate's error (the t), by
:func:`tail_probability`.  The budget (:func:`levels`) is one failing night
per site-month by default, split between the two rules and the
``BROADLY WORSE`` test, then between the gated checks of the site (equally,
or as the site's ``budget_weights`` say), then between the figures of each
check as many independent ones as their rare events are worth together
(:mod:`.tail_count`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from hpc_health.stats import tail_count
from hpc_health.stats.robust import special
from hpc_health.stats.tail_count import Family

#: Nights in the month a budget is counted over.
NIGHTS_PER_MONTH = 30.0
#: Default ``false_alarm_budget``: failing nights per site-month on a
#: healthy machine.  One a month is a number an on-call engineer still reads
#: (DESIGN.md: promises per site-month).
FALSE_ALARM_BUDGET = 1.0
#: Shares of a night's budget: the one-night rule, the persistence rule,
#: and the night-as-a-whole test (BROADLY WORSE, :mod:`hpc_health.judge.broad`).
SHARE_ONE_NIGHT, SHARE_PERSIST, SHARE_BROAD = 0.45, 0.45, 0.10
#: Nights a loss must stay beyond the lower threshold: the third night is
#: the latest a sustained loss the noise hides on any single night fails.
PERSIST_NIGHTS = 3
#: A second persistence rule, for a node busy on each of the nights (other
#: processes used its cores while the check ran): a loss beyond its own
#: threshold, at the persistence rule's level, on two busy nights in a row
#: fails on the second.  The load is a finding of its own and a loaded node
#: a sick one; a figure the load does not touch spends at most twice its
#: persistence share there (both rules), and nothing on a quiet node.
BUSY_PERSIST_NIGHTS = 2
#: Healthy nights since capture whose deviations feed a figure's spread: two
#: months of nights, so an old quiet (or noisy) season does not decide today's.
LEARN_WINDOW = 60
#: Power the minimum detectable change (MDC) promises: the share of
#: occasions a loss of that size is caught, the standard of issue 43's
#: detection targets ("in 80 % of trials") and of power analysis.  At 95 %
#: the MDC also paid for the rare night a loss hides in the noise, and a
#: figure of 10 % spread needed some 12 baseline runs not to be weak.
POWER = 0.80
#: A healthy night's deviation counts in the learned spread up to this many
#: baseline spreads: a night the gate passed can still carry an episode, and
#: one such night must not double the spread of a quiet figure.
LEARN_CLIP = 4.0

# The quadrature of tail_probability: Gauss-Hermite nodes for the shared
# reference error, and a log-spaced grid for the spread estimate's error
# (its far tail -- a spread estimated far too small -- is what makes
# a t's tail heavy, so the grid reaches w = 1e-4).
_HERMITE = np.polynomial.hermite_e.hermegauss(48)
_W = np.geomspace(1e-4, 12.0, 900)
_LOGW = np.log(_W)


@dataclass(frozen=True)
class Levels:
    """False-alarm levels of one figure's two rules, per night."""
    one_night: float
    persist: float


def night_budget(budget: float = FALSE_ALARM_BUDGET) -> float:
    """The chance of a false failing night the budget allows."""
    return min(max(budget, 0.0) / NIGHTS_PER_MONTH, 0.5)


def levels(budget: float, checks: float, family: Family | float) -> Levels:
    """The levels of a figure of a check, when ``checks`` checks (weights
    summed) share the site's night and the check's figures are ``family``
    (a plain number: that many independent figures).  Within the check
    each rule's share is split so that the union of the figures' events
    spends it at that rule's level (:mod:`.tail_count`); between checks,
    Bonferroni (valid however they depend on each other)."""
    fam = family if isinstance(family, Family) else Family(float(family))
    per_check = night_budget(budget) / max(checks, 1.0)
    return Levels(tail_count.fitted_level(SHARE_ONE_NIGHT * per_check, fam, 1),
                  tail_count.fitted_level(SHARE_PERSIST * per_check, fam, PERSIST_NIGHTS))


@lru_cache(maxsize=256)
def _w_weights(df: float) -> np.ndarray:
    """Quadrature weights on _W for w = σ̂/σ with σ̂² ~ σ² χ²_df / df."""
    if math.isinf(df) or df > 1e4:
        return np.array([])
    # log density of w: from V = df w² ~ chi2(df), times dw = w dlogw.
    v = df * _W ** 2
    logpdf = ((df / 2 - 1) * np.log(v) - v / 2 - (df / 2) * math.log(2.0)
              - float(special.gammaln(df / 2)) + math.log(2.0 * df) + 2 * _LOGW)
    wt = np.exp(logpdf)
    wt *= np.gradient(_LOGW)
    return wt / wt.sum()


def _prob(c: float, df: float, runs: int, k: int, shift: float = 0.0,
          c_low: float | None = None, confirmed: bool = False) -> float:
    """P over (reference error u, spread error w) of the nights' statistics:
    without ``c_low``, P(all k beyond c); with it, P(caught within k nights)
    = 1 − P(none beyond c and not all beyond c_low).  ``shift``: the true
    loss in σ.  ``confirmed``: a night beyond c is caught only when its
    retest, another draw of the night's noise, is beyond c too."""
    q = math.sqrt(1.0 + 1.0 / max(runs, 1))
    nodes, hw = _HERMITE
    u = nodes / math.sqrt(max(runs, 1))
    hw = hw / hw.sum()
    ww = _w_weights(df)
    w = _W if ww.size else np.array([1.0])
    ww = ww if ww.size else np.array([1.0])
    base = (w[:, None] * q)

    def beyond(cut):
        return special.ndtr(-(cut * base + u[None, :] - shift))

    if c_low is None:
        inner = beyond(c) ** (2 * k if confirmed else k)
    else:
        p1, pl = beyond(c), beyond(c_low)
        p1 = p1 * p1 if confirmed else p1
        inner = 1.0 - ((1.0 - p1) ** k - np.clip(pl - p1, 0.0, 1.0) ** k)
    return float(ww @ inner @ hw)


def tail_probability(c: float, df: float, runs: int, k: int = 1) -> float:
    """P(k nights in a row all have T > c) on a healthy machine.  For k = 1
    this is the Student t's tail (exactly: computed so)."""
    if k == 1:
        return float(special.stdtr(df, -c)) if not math.isinf(df) else float(special.ndtr(-c))
    return _prob(c, df, runs, k)


@lru_cache(maxsize=4096)
def _threshold(alpha: float, df: float, runs: int, k: int) -> float:
    if k == 1:
        return float(special.stdtrit(df, 1.0 - alpha)) if not math.isinf(df) \
            else float(special.ndtri(1.0 - alpha))
    # k nights all beyond c are rarer than one: the one-night quantile
    # (plus one) is beyond the root, and -5 is far below it.
    hi = float(special.stdtrit(min(df, 1e6), 1.0 - alpha)) + 1.0
    return _root(lambda c: tail_probability(c, df, runs, k) - alpha, -5.0, hi)


def _root(f: Callable[[float], float], lo: float, hi: float) -> float:
    """The root of a monotone f bracketed by [lo, hi] (Brent's method:
    a dozen quadratures where bisection took sixty)."""
    # Imported here: scipy.optimize costs every command 0.16 s of start-up.
    from scipy.optimize import brentq
    return float(brentq(f, lo, hi, xtol=1e-9))


def threshold(alpha: float, df: float, runs: int, k: int = 1) -> float:
    """The T that k healthy nights in a row all exceed with probability alpha."""
    df = _round_df(df)
    return _threshold(float(f"{alpha:.4g}"), df, int(runs), int(k))


def _round_df(df: float) -> float:
    # Thresholds are cached on df: a quarter degree of freedom changes them
    # by far less than the noise in the spread they multiply.
    return math.inf if math.isinf(df) or df > 1e4 else max(round(df * 4) / 4, 0.25)


@dataclass(frozen=True)
class Detection:
    """What a figure's gate catches: the losses (log distance, worse side)
    caught with :data:`POWER` on the first night and within the
    persistence window."""
    one_night: float
    sustained: float


def detectable(spread: float, df: float, runs: int, lv: Levels,
               k: int = PERSIST_NIGHTS, power: float = POWER,
               confirmed: bool = True) -> Detection:
    """The minimum detectable changes of a figure of night spread ``spread``
    (log SD) under its levels: the smallest sustained loss caught on the
    first night, and by night ``k``, on ``power`` of occasions; ``confirmed``:
    a one-night failure counts only with its retest beyond the bound too
    (:mod:`hpc_health.judge.confirm`)."""
    one, both = _shifts(float(f"{lv.one_night:.4g}"), float(f"{lv.persist:.4g}"),
                        _round_df(df), int(runs), int(k), power, confirmed)
    return Detection(one * spread, both * spread)


@lru_cache(maxsize=4096)
def _shifts(one_night: float, persist: float, df: float, runs: int, k: int,
            power: float, confirmed: bool) -> tuple[float, float]:
    """The detectable losses in night spreads: they scale with the spread."""
    c1 = threshold(one_night, df, runs, 1)
    ck = threshold(persist, df, runs, k)
    one = _solve_shift(lambda d: _prob(c1, df, runs, 1, shift=d, confirmed=confirmed), power)
    both = _solve_shift(lambda d: _prob(c1, df, runs, k, shift=d, c_low=min(ck, c1),
                                        confirmed=confirmed), power)
    return one, both


def _solve_shift(prob: Callable[[float], float], power: float) -> float:
    lo, hi = 0.0, 1.0
    while prob(hi) < power and hi < 1e4:
        lo, hi = hi, hi * 2
    if prob(lo) >= power:
        return lo
    return _root(lambda d: prob(d) - power, lo, hi) if prob(hi) >= power else hi


def learned_spread(baseline_spread: float, baseline_df: float, runs: int,
                   deviations: list[float], judged_with: float = 0.0
                   ) -> tuple[float, float, int]:
    """(spread, degrees of freedom, nights used): the baseline's spread
    pooled with the last :data:`LEARN_WINDOW` nights' deviations from the
    reference (log), taken in order, each clipped at :data:`LEARN_CLIP`
    times the spread learned before it.  A night's deviation from a
    reference of R runs has variance σ²(1 + 1/R): divided out.

    The clip is relative to the running spread, not the baseline's: one
    wild night can at most double a quiet figure's spread (and less as the
    nights add up), while a figure whose healthy nights come in episodes
    (8 B latency at 2.6x for five runs, IOR with fsync between two levels
    17 % apart) learns its episodes within a night or two instead of
    failing every one of them.

    ``judged_with``: the spread the figure was judged with at capture, its
    prior's share included; the clip is never below it.  A figure whose
    five runs happened to sit at one of two states (a 2-D halo time at
    8 B, 0.39 us in all five, 0.92 us on three nights of the next twelve)
    is judged with its kind's spread; clipped at its own, the nights at
    the other state taught it almost nothing and the third failed."""
    used = [float(d) for d in deviations if math.isfinite(d)][-LEARN_WINDOW:]
    if not used:
        return baseline_spread, baseline_df, 0
    q2 = 1.0 + 1.0 / max(runs, 1)
    ss, df = baseline_df * baseline_spread ** 2, baseline_df
    for d in used:
        current = max(math.sqrt(ss / df) if df > 0 else abs(d), judged_with)
        cap = LEARN_CLIP * current * math.sqrt(q2) if current > 0 else math.inf
        ss += min(abs(d), cap) ** 2 / q2
        df += 1
    return math.sqrt(ss / df), df, len(used)


@dataclass
class GateResult:
    """One figure's night under the gate."""
    statistic: float            # T of tonight
    one_night: float            # c1
    persist: float              # c_k
    failed: str                 # "" | "one night" | "k nights"
    nights_beyond: int          # tonight and the nights before it beyond c_k, in a row
    p_value: float              # one-night tail probability of tonight's T


def judge(deviation: float, previous: list[float], spread: float, df: float, runs: int,
          lv: Levels, k: int = PERSIST_NIGHTS, also: int | None = None) -> GateResult:
    """Tonight's deviation (log, worse side positive) and the previous
    nights' (oldest first) under the gate of a figure of night spread
    ``spread`` with ``df`` degrees of freedom and a reference of ``runs``.

    ``also``: a shorter persistence rule applied beside the ``k``-night one,
    its own threshold at the same level (:data:`BUSY_PERSIST_NIGHTS` on a
    node busy night after night); the result speaks of the rule that failed,
    else of the ``k``-night one."""
    q = math.sqrt(1.0 + 1.0 / max(runs, 1))
    scale = max(spread, 1e-9) * q
    t = deviation / scale
    c1 = threshold(lv.one_night, df, runs, 1)
    rules = [(n, min(threshold(lv.persist, df, runs, n), c1))
             for n in ([k] if also is None else [k, also])]
    nights = [*previous, deviation][::-1]
    streaks = [(n, c, next((i for i, d in enumerate(nights) if d / scale <= c), len(nights)))
               for n, c in rules]
    n, ck, beyond = next((r for r in streaks if r[2] >= r[0]), streaks[0])
    # A loss that has stayed k nights is said so (and needs no retest),
    # however far beyond the one-night bound tonight is.
    failed = f"{n} nights" if beyond >= n else ("one night" if t > c1 else "")
    return GateResult(t, c1, ck, failed, beyond, tail_probability(t, _round_df(df), runs))
