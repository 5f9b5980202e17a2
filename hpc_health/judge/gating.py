"""The gate applied to a site's figures: what each figure's spread rests on,
its share of the site's false-alarm budget, and the verdict of a night.

The statistics are :mod:`hpc_health.stats.gate` (the two rules and
their thresholds) and :mod:`hpc_health.stats.prior` (strength
borrowed across a benchmark's figures); this module ties them to the
reference file's provenance, written by ``reference capture``
(:func:`hpc_health.judge.baselines.capture_family`) and read by every run (:func:`noise_of`), so that
capture and run print the same MDC for a figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from hpc_health.stats import gate, prior
from hpc_health.stats.constants import HIGHER, LOWER, from_log

if TYPE_CHECKING:
    from hpc_health.model.references import ReferenceSet

#: The smallest change a figure fails on when the site declares no
#: tolerance of its own: below 3 % are print resolution, timer granularity
#: and compiler or firmware noise, not health (a 0.2 %-quiet MPI_Init 1 %
#: slower is significant and nobody's concern).
MIN_CHANGE = 0.03
#: Printed steps a change must exceed to fail: one step is rounding (0.07 us
#: printing 0.08 the next night is a value near 0.075 rounded either way).
RESOLUTION_STEPS = 1.5


@dataclass
class Noise:
    """What one figure's night-to-night spread rests on."""
    spread: float           # log SD of one night's figure
    df: float               # degrees of freedom, the prior's included
    runs: int               # baseline runs behind the reference's level
    nights: int = 0         # healthy nights since capture that fed the spread
    prior_df: float = 0.0   # lent by the benchmark's other figures
    family: gate.Family = gate.Family(1.0)  # its check's figures (its multiplicity)

    def rests_on(self) -> str:
        """``5+12 df 24``: baseline runs + healthy nights, degrees of freedom."""
        lent = "" if not self.prior_df else (
            "+inf" if math.isinf(self.prior_df) else f"+{self.prior_df:.0f}")
        # The figure's own: its runs' (or both levels' runs', pooled) and its nights'.
        own = round(self.df - self.prior_df) if math.isfinite(self.prior_df) else 0
        df = "inf" if math.isinf(self.df) else f"{own}{lent}"
        return f"{self.runs}+{self.nights} df {df}"


def family_of(test: str, partition: str) -> tuple[str, str]:
    """The figures that split one share of the budget: one check on one
    partition (the prior they borrow from may reach across their
    benchmark's checks: :func:`hpc_health.judge.baselines.capture_family`)."""
    return (test, partition)


def gated_families(refs: ReferenceSet | None) -> set[tuple[str, str]]:
    """The site's gated checks: check × partition with a captured spread."""
    found: set[tuple[str, str]] = set()
    for test, paths in (refs.provenance.items() if refs is not None else ()):
        for path, prov in (paths or {}).items():
            if isinstance(prov, dict) and "night_spread" in prov:
                found.add(family_of(test, path.split("/")[0]))
    return found


def shares(families: Iterable[tuple[str, str]],
           weights: Mapping[str, float] | None = None) -> Callable[[str], float]:
    """What a check's share of the night's budget is divided by: the gated
    checks' weights (the site's ``budget_weights``, 1 each unless given)
    summed, over the check's own weight.  Without weights: the number of
    gated checks, each an equal share; ``{StreamBandwidth: 3}`` gives STREAM
    three checks' share, and every other check a little less."""
    def weight(test: str) -> float:
        return float((weights or {}).get(test, 1.0))

    total = sum(weight(test) for test, _ in families) or 1.0
    return lambda test: total / weight(test)


def noise_of(prov: Mapping[str, Any], deviations: Sequence[float] = ()) -> Noise | None:
    """A figure's noise from its reference's provenance, with the healthy
    nights since capture (log deviations, worse side positive) learned in;
    None for a reference without a captured spread."""
    if "night_spread" not in prov:
        return None
    runs = prov.get("runs")
    runs = len(runs) if isinstance(runs, list) else int(runs or 2)
    runs = int(prov.get("level_runs") or runs)
    own, own_df = float(prov["night_spread"]), float(prov.get("night_df", runs - 1))
    p_var, p_df = _float(prov.get("prior_spread")) ** 2, _float(prov.get("prior_df"))
    spread, df, used = gate.learned_spread(own, own_df, runs, list(deviations),
                                           math.sqrt(prior.moderate(own ** 2, own_df,
                                                                    p_var, p_df)[0]))
    var, total = prior.moderate(spread ** 2, df, p_var, p_df)
    return Noise(math.sqrt(var), total, runs, used, p_df, _family(prov))


def _family(prov: Mapping[str, Any]) -> gate.Family:
    """The figure's check's figures; a reference captured before they were
    written holds their effective count, taken as independent figures."""
    if "check_figures" not in prov:
        return gate.Family(_float(prov.get("effective")) or 1.0)
    return gate.Family(float(prov["check_figures"]), _float(prov.get("check_correlation")),
                       _float(prov.get("check_apart")))


def _float(x: Any) -> float:
    if x in (None, "inf", ".inf"):
        return math.inf if x in ("inf", ".inf") else 0.0
    return float(x)


def levels_of(noise: Noise, checks: float, budget: float) -> gate.Levels:
    return gate.levels(budget, checks, noise.family)


def detection(noise: Noise, checks: float, budget: float, direction: str) -> tuple[float, float]:
    """(MDC on the first night, MDC by the last night of the persistence
    window) as fractions worse, with :data:`gate.POWER`."""
    det = gate.detectable(noise.spread, noise.df, noise.runs, levels_of(noise, checks, budget))
    return from_log(det.one_night, direction), from_log(det.sustained, direction)


def nights_to(noise: Noise, checks: float, budget: float, direction: str,
              target: float) -> int | None:
    """The healthy nights after which a figure's MDC (by the persistence
    window's last night) is at most ``target``, if they spread as the figure
    is judged now; None when not within :data:`gate.LEARN_WINDOW` nights,
    the most its spread ever rests on."""
    def mdc(more: int) -> float:
        later = replace(noise, df=noise.df + more, nights=noise.nights + more)
        return detection(later, checks, budget, direction)[1]

    lo, hi = 0, gate.LEARN_WINDOW - noise.nights
    if mdc(0) <= target:
        return 0
    if hi <= 0 or mdc(hi) > target:
        return None
    while hi - lo > 1:       # the MDC falls as the nights add up
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if mdc(mid) <= target else (mid, hi)
    return hi


#: What a verdict's reason says of a weak reference, after what its night
#: says (a retest's note goes before it).
WEAK_NOTE = "; weak reference: "


def when_strong(nights: int | None, noise: Noise, max_mdc: float,
                two_levels: bool = False) -> str:
    """When the nights a weak figure's spread learns from make it not weak
    (``nights``: :func:`nights_to`), said for a person; *two_levels*: its
    baseline fell at two levels (:mod:`hpc_health.stats.levels`)."""
    said = f"healthy nights spread by the {100 * noise.spread:.1f} % it is judged with"
    if nights is None:
        quieter = ("a figure that stays at one level would not be (one placement of its "
                   "ranks, one kind of node)" if two_levels else
                   "a quieter figure would not be (more rounds a night, a quieter node)")
        return f"even {gate.LEARN_WINDOW} {said} would leave it above {max_mdc:.0%}: only {quieter}"
    return (f"each healthy night adds to what its spread rests on: after about {nights} more "
            f"{said} it is under {max_mdc:.0%}")


def bound(noise: Noise, checks: float, budget: float, direction: str) -> float:
    """The one-night critical change as a fraction worse: what ReFrame is
    handed as the bound, and what tonight's gate enforces."""
    lv = levels_of(noise, checks, budget)
    c1 = gate.threshold(lv.one_night, noise.df, noise.runs)
    return from_log(c1 * noise.spread * math.sqrt(1 + 1 / noise.runs), direction)


def worse_log(value: float, reference: float, direction: str) -> float:
    """Log distance of *value* from *reference*, worse side positive."""
    d = math.log(max(value, 1e-300)) - math.log(reference)
    return d if direction == LOWER else -d


# --- a night ------------------------------------------------------------------

@dataclass
class Night:
    """A figure's night under the gate, as a verdict needs it."""
    verdict: str
    deviation: float        # (value - reference) / reference, signed
    reason: str
    mdc: float              # a change this much worse is caught by the window's last night
    p_value: float
    bound: float            # the one-night bound enforced tonight (fraction worse)
    noise: Noise
    tag: str = ""
    #: How much a one-night loss may shrink on its retest (log) and still be
    #: the same loss: what one night's bound allows between two nights.
    retest_shrink: float = math.inf


def retest_shrank(night_dev: float, retest_dev: float, direction: str,
                  allowed: float) -> bool:
    """Whether a retest (signed change *retest_dev*) minutes after a night
    that changed by *night_dev* found the loss shrunk by more than *allowed*
    (log): an episode ending, not a state of the machine.  The reference's
    own error is in both and cancels, so the shrinkage of a loss that stays
    exceeds the one-night bound's ``c1 σ √2`` with the one-night level only."""
    return (worse_log(1.0 + night_dev, 1.0, direction)
            - worse_log(1.0 + retest_dev, 1.0, direction)) > allowed


def tolerance_of(tolerances: Mapping[str, float] | None, test: str, variable: str) -> float | None:
    """The site's declared tolerance of a figure (``Check/variable``, else
    ``Check``) as a fraction worse, or None."""
    if not tolerances:
        return None
    for key in (f"{test}/{variable}", test):
        if key in tolerances:
            return abs(float(tolerances[key]))
    return None


def judge_night(value: float, reference: float, direction: str, prov: Mapping[str, Any],
                past: Sequence[Any], checks: float, budget: float,
                tolerance: float | None = None, busy: bool = False,
                least: float = 0.0) -> Night | None:
    """Tonight's figure against its reference under the gate, with the
    figure's past nights (:class:`hpc_health.judge.nights.Night`, oldest
    first); None for a reference without a captured spread.

    A busy night counts towards a loss that stays only while the node stays
    busy (*busy*: tonight is too): a node other processes load night after
    night is a sick node, its loss failing with the load named beside it on
    the second busy night in a row (:data:`gate.BUSY_PERSIST_NIGHTS`).

    Nothing fails below the site's *tolerance*, else :func:`least_change`
    (*least*: the figure's ``min_change``), nor within one and a half of
    its printed steps.  At the worse of two levels (:func:`level_gap`), a
    night at the better one is no loss."""
    # The nights since the capture: its baseline runs are in the spread already.
    runs = prov.get("runs")
    captured, baseline = str(prov.get("captured") or ""), set(runs if isinstance(runs, list) else ())
    past = [n for n in past if n.started > captured and n.run_id not in baseline]
    # The nights of the persistence window are judged, not learned from: a
    # loss that stays must not widen the spread it is measured against.
    window = gate.PERSIST_NIGHTS - 1
    learn = past[:-window] if window else past
    gap = level_gap(prov)
    noise = noise_of(prov, _learned(learn, reference, direction, gap))
    if noise is None:
        return None
    recent: list[float] = []
    for n in list(past)[::-1][:window]:
        if not (n.counts or busy):
            break       # a busy night breaks a quiet night's run
        recent.insert(0, worse_log(n.value, reference, direction))
    dev = worse_log(value, reference, direction)
    # Busy tonight and the night before (Night.counts is False on a busy
    # night): a loss on a loaded node may fail on its second night too.
    loaded = busy and bool(past) and not past[-1].counts
    res = gate.judge(dev, recent, noise.spread, noise.df, noise.runs,
                     levels_of(noise, checks, budget),
                     also=gate.BUSY_PERSIST_NIGHTS if loaded else None)
    scale = noise.spread * math.sqrt(1 + 1 / noise.runs)
    one, low = (from_log(c * scale, direction) for c in (res.one_night, res.persist))
    printed = RESOLUTION_STEPS * float(prov.get("resolution") or 0.0)
    floor = max(least_change(least) if tolerance is None else tolerance, printed)
    enforced = max(one, floor)
    signed = (value - reference) / reference
    sustained = max(detection(noise, checks, budget, direction)[1], floor)
    night = Night("PASS", signed, "", sustained, res.p_value, enforced, noise,
                  retest_shrink=res.one_night * noise.spread * math.sqrt(2.0))
    if res.failed and from_log(max(dev, 0.0), direction) > floor:
        night.verdict = "DEGRADED"
        if res.failed != "one night":
            night.tag = f"{res.nights_beyond} nights, {signed_pct(signed)}"
    elif -(dev + gap) / scale > res.one_night:
        night.verdict = "IMPROVED"
    night.reason = _why(night, res, low, direction, tolerance, one, loaded,
                        _floor_said(one, floor, tolerance, least, printed))
    return night


def level_gap(prov: Mapping[str, Any]) -> float:
    """The log distance from a reference at the worse of two levels to the
    better one (``levels`` in its provenance, :mod:`hpc_health.stats.levels`);
    0 for a reference of one.  A night at the better level passes, feeds no
    spread, and is IMPROVED only beyond that level."""
    levels = prov.get("levels")
    if not (isinstance(levels, list) and len(levels) == 2 and min(levels) > 0):
        return 0.0
    return abs(math.log(float(levels[1]) / float(levels[0])))


def least_change(min_change: float, resolution: float = 0.0) -> float:
    """The smallest change a figure fails on without a site's tolerance:
    :data:`MIN_CHANGE`, its check's own least change, and
    :data:`RESOLUTION_STEPS` printed steps (*resolution*: one step as a
    fraction of the value)."""
    return max(MIN_CHANGE, min_change, RESOLUTION_STEPS * resolution)


def _floor_said(one: float, floor: float, tolerance: float | None, least: float,
                printed: float = 0.0) -> str:
    """What set the bound when the noise did not (nothing when it did)."""
    if one >= floor:
        return ""
    if printed >= floor:
        return "one and a half steps of its printed decimals"
    if tolerance is not None:
        return "the site's tolerance"
    return ("the smallest change its check counts" if least > MIN_CHANGE else
            "the smallest change any figure fails on")


def _why(night: Night, res: gate.GateResult, low: float, direction: str,
         tolerance: float | None, one: float, loaded: bool = False,
         floor_said: str = "") -> str:
    """The reason of a night's verdict, its changes signed as read;
    *floor_said* names the floor when it, not the noise, set the bound."""
    def read(frac: float) -> str:     # a fraction worse, signed as the figure moves
        return signed_pct(-frac if direction == HIGHER else frac)

    said = signed_pct(night.deviation)
    bound = (f"{read(night.bound)}, {floor_said}" if floor_said else
             f"the {read(night.bound)} its noise allows")
    tight = ("" if tolerance is None or tolerance >= one else
             f"; the site's tolerance {read(tolerance)} is tighter than its noise allows "
             f"on one night ({read(one)})")
    if night.verdict == "DEGRADED" and not night.tag:
        return (f"{said} on one night, beyond {bound} "
                f"(t {res.statistic:.1f} > {res.one_night:.1f}){tight}")
    if night.verdict == "DEGRADED":
        stays = "on a node busy on the last two, a loss" if loaded else "a loss"
        return (f"{said}; {res.nights_beyond} nights in a row beyond {read(low)}, {stays} "
                f"that stays (t > {res.persist:.1f} each night){tight}")
    if night.verdict == "IMPROVED":
        return f"{said}, better than its noise explains on one night: re-baseline?"
    streak = (f"; {res.nights_beyond} night(s) in a row beyond {read(low)}"
              if res.nights_beyond else "")
    within = f"{read(night.bound)} ({floor_said})" if floor_said else read(night.bound)
    return f"{said}, within {within}{streak}{tight}"


def _learned(nights: Sequence[Any], reference: float, direction: str, gap: float) -> list[float]:
    """The deviations of the nights that feed the spread: of a reference at
    the worse of two levels (*gap* to the better one), the nights nearer it,
    since one at the better level is neither a loss nor the level's noise."""
    return [d for d in (worse_log(n.value, reference, direction) for n in _feeding(nights))
            if not gap or d > -gap / 2]


def _feeding(past: Sequence[Any]) -> list[Any]:
    """The nights that feed the spread: healthy ones, and a failed one
    only once a later night came back (an episode that ended, not a loss
    that stays)."""
    out, recovered = [], False
    for n in reversed(past):
        if not getattr(n, "failed", False):
            recovered = True
        if n.healthy and (recovered or not getattr(n, "failed", False)):
            out.append(n)
    return out[::-1]


def signed_pct(frac: float) -> str:
    """A signed change as a person reads it: a bandwidth 10 % lower is −10 %."""
    return f"{100 * frac:+.1f} %" if abs(frac) < 1 else f"{100 * frac:+.0f} %"
