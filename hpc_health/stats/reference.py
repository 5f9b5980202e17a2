"""A reference: what to expect of one figure, and how a baseline of runs
becomes one (:func:`propose_reference`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from hpc_health.stats.constants import (
    ALPHA,
    BETTER_MAX,
    BOUND_CAP,
    BOUND_FLOOR,
    BOUND_SIGMAS,
    EPISODE_FLOOR,
    ESTIMATOR,
    POWER,
    RECOMMENDED_RUNS,
    RECOMMENDED_SAMPLES,
    TINY,
    check_direction,
    from_log,
    to_log,
)
from hpc_health.stats.noise import critical_log, mdc_of, noise_model
from hpc_health.stats.robust import (
    clean,
    location,
    log_spread,
    printed_step,
    run_location_logs,
    tail_scale,
    within_run_spread,
    worse_sign,
)


@dataclass
class Reference:
    """What to expect of one variable, ReFrame-style plus the noise behind it.

    ``lower``/``upper`` are fractions of ``value`` (``lower <= 0 <= upper``);
    None means unbounded on that side, as in ReFrame, and that side never
    raises a verdict.  The noise fields are log-scale relative spreads
    (~fractions); all None means a plain ReFrame reference, judged on its
    bounds only.
    """
    value: float
    lower: float | None = None
    upper: float | None = None
    unit: str = ""
    #: robust relative spread of all baseline samples pooled
    spread: float | None = None
    #: number of baseline samples
    n: int | None = None
    #: number of baseline runs
    runs: int | None = None
    #: relative spread of the per-run medians on the *worse* side, as observed
    #: (max of the MAD scale and the tail scale); this is what sees episodes
    between_run_spread: float | None = None
    #: the same on the better side (for IMPROVED hints); None: as worse side
    between_run_spread_better: float | None = None
    #: pooled within-run spread; None if the runs had one sample each (then
    #: all noise is in between_run_spread)
    within_run_spread: float | None = None
    #: lower limit applied to the between-run spread (None: EPISODE_FLOOR)
    episode_floor: float | None = None
    #: the bound hit BOUND_CAP: healthy runs alone need more than the cap
    too_noisy: bool = False
    #: how the value summarised its samples (:data:`ESTIMATOR`); None: not recorded
    estimator: str | None = None
    #: the worsening a run of the capture's family of figures catches on
    #: :data:`POWER` of nights (fraction); None: not computed
    mdc: float | None = None
    note: str = ""

    def __post_init__(self):
        if self.lower is not None and self.lower > 0:
            raise ValueError(f"lower bound must be <= 0, got {self.lower}")
        if self.upper is not None and self.upper < 0:
            raise ValueError(f"upper bound must be >= 0, got {self.upper}")

    @property
    def has_noise(self) -> bool:
        return self.spread is not None or self.between_run_spread is not None

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, data: dict) -> Reference:
        """Tolerant of unknown keys (older/newer files) and missing noise fields."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


class NoReference(ValueError):
    """A figure that measures nothing a reference could hold (all zeros,
    below its printed resolution); the message is the reason, said in the
    proposal and in every run's table."""


def propose_reference(samples_by_run: Sequence[Sequence[float]], unit: str,
                      direction: str, floor: float = BOUND_FLOOR,
                      cap: float = BOUND_CAP, *,
                      episode_floor: float = EPISODE_FLOOR,
                      sigmas: float = BOUND_SIGMAS, family: int = 1) -> Reference:
    """Reference from a baseline: one list of samples per run.

    value: :func:`location` of all samples (on the log scale).  Bounds: ``sigmas`` x the spread a single
    future run (of the baseline's typical sample count) is expected to show
    around the reference, between-run episodes and the reference's own
    uncertainty included, clamped to [floor, cap]; the same magnitude on both
    sides (only the worse side fails), never below one step of the printed
    resolution, and never narrower than the change the test can flag at all
    (the critical change at Holm's strictest step over a run of ``family``
    figures), so the bounds printed are the ones enforced.  ``mdc`` is the
    change caught on :data:`POWER` of nights by such a run.  Give it many
    runs, ideally from different nights: it can only know about episodes it
    has sampled.  Raises :class:`NoReference` for samples that measure
    nothing (all 0, or one printed step more than ``cap`` of the value).
    """
    check_direction(direction)
    runs, allx, value, step = _measuring(samples_by_run, unit, cap)
    n, r = int(allx.size), len(runs)
    ref_log = math.log(value)
    sign = worse_sign(direction)

    between = between_better = None
    if r >= 2:
        med_logs = run_location_logs(runs)
        dev = sign * (med_logs - ref_log)
        mad = log_spread(np.exp(med_logs))
        between = max(mad, tail_scale(dev))
        between_better = max(mad, tail_scale(-dev))
    ref = Reference(value=value, unit=unit, spread=log_spread(allx), n=n, runs=r,
                    estimator=ESTIMATOR,
                    between_run_spread=between,
                    between_run_spread_better=between_better,
                    within_run_spread=within_run_spread(runs),
                    episode_floor=episode_floor)
    m = max(1, int(round(n / r)))
    s, df = noise_model(ref, m)
    raw = sigmas * s
    # One step of the printed resolution (0.01 us of 0.16 us is 6 %) is not a
    # measurable change, whatever the floor says.
    resolution = step / value
    floor = max(floor, resolution)
    bound_log = min(max(raw, to_log(floor, direction)), to_log(cap, direction))
    family_alpha = ALPHA / max(1, int(family))
    bound_log = max(bound_log, critical_log(s, df, family_alpha))
    b = from_log(bound_log, direction)
    # A time cannot be more than 100 % better: past that, the better side of
    # a wide bound says nothing (and would print a negative time).
    ref.lower, ref.upper = -min(b, BETTER_MAX), b
    sb, _ = noise_model(ref, m, better=True)
    ref.mdc = mdc_of(s, sb, df, family_alpha, POWER, bound_log, direction)
    ref.too_noisy = raw > to_log(cap, direction)
    notes = _proposal_notes(raw, cap, direction, resolution, r, n)
    ref.note = "; ".join(notes)
    return ref


def _proposal_notes(raw: float, cap: float, direction: str, resolution: float, r: int,
                    n: int) -> list[str]:
    """What a proposed reference says of itself: too noisy, coarse
    resolution, too few runs or samples."""
    notes = []
    if raw > to_log(cap, direction):
        notes.append(f"too noisy to gate: healthy runs need +-{from_log(raw, direction):.0%} "
                     f"(bound capped at {cap:.0%})")
    if resolution > BOUND_FLOOR:
        notes.append(f"printed resolution is {resolution:.1%} of the value: "
                     f"smaller changes cannot be seen")
    if r < RECOMMENDED_RUNS:
        notes.append(f"only {r} runs: an episode hitting 1 run in 6 would be missing "
                     f"{(5 / 6) ** r:.0%} of the time")
    if n / r < RECOMMENDED_SAMPLES:
        notes.append(f"{n / r:.1f} samples per run: one wild sample cannot be told "
                     f"from a degradation; take >= {RECOMMENDED_SAMPLES}")
    return notes


def measures_nothing(unit: str, step: bool = False) -> str:
    """Why a figure at 0, or within a printed step of it, measures nothing:
    a time is below its timer's resolution; a share (``%``: OSU's overlap of
    a non-blocking collective with computation) of 0 is none at all -- OSU
    prints 0 % when nothing overlapped, which no timer could have missed."""
    if unit != "%":
        return "below the timer's resolution"
    return "below its printed resolution" if step else "a share of none (0 %: nothing overlapped)"


def night_logs(samples_by_run: Sequence[Sequence[float]], unit: str) -> np.ndarray:
    """Each baseline run's figure (:func:`location` of its samples), as a log:
    the nights the gate's spread and level come from.  Raises
    :class:`NoReference` for samples that measure nothing (all 0, or one
    printed step more than :data:`BOUND_CAP` of the value)."""
    runs = _measuring(samples_by_run, unit, BOUND_CAP)[0]
    logs = run_location_logs(runs)
    zero = [float(np.exp(v)) for v in logs if not v > math.log(TINY) + 1.0]
    if zero:
        # A run whose figure is 0 is a night the timer did not see: on the
        # log scale its distance from any level is infinite.
        raise NoReference(f"{measures_nothing(unit)} on {len(zero)} of {len(runs)} runs "
                          f"(their figure is 0 {unit})")
    return logs


def _measuring(samples_by_run: Sequence[Sequence[float]], unit: str,
               cap: float) -> tuple[list[np.ndarray], np.ndarray, float, float]:
    """(each run's finite samples, all of them, their location, one printed
    step), or :class:`NoReference` for samples that measure nothing: all 0,
    or one printed step more than *cap* of the value."""
    runs = [c for c in (clean(r)[0] for r in samples_by_run) if c.size]
    if not runs:
        raise ValueError("no finite baseline samples")
    allx = np.concatenate(runs)
    if not np.any(allx != 0):
        raise NoReference(f"{measures_nothing(unit)}: all {allx.size} samples are 0 {unit}")
    value = location(allx)
    if not value > 0:
        raise NoReference(f"{measures_nothing(unit)}: its samples are 0 {unit} or less "
                          f"(location {value:.3g} {unit})")
    step = printed_step(allx)
    if step / value > cap:
        raise NoReference(f"{measures_nothing(unit, step=True)}: one printed step ({step:.3g} {unit}) "
                          f"is {step / value:.0%} of the value {value:.3g} {unit}")
    return runs, allx, value, step
