"""A reference: what to expect of one figure, and how a baseline of runs
becomes one (:func:`propose_reference`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from hpc_health.judge.stats.constants import (
    BOUND_CAP,
    BOUND_FLOOR,
    BOUND_SIGMAS,
    EPISODE_FLOOR,
    ESTIMATOR,
    RECOMMENDED_RUNS,
    RECOMMENDED_SAMPLES,
    _check_direction,
    _from_log,
    _to_log,
)
from hpc_health.judge.stats.noise import _noise_model
from hpc_health.judge.stats.robust import (
    _log_spread,
    _run_location_logs,
    _tail_scale,
    _worse_sign,
    clean,
    location,
    quantisation_step,
    within_run_spread,
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


def propose_reference(samples_by_run: Sequence[Sequence[float]], unit: str,
                      direction: str, floor: float = BOUND_FLOOR,
                      cap: float = BOUND_CAP, *,
                      episode_floor: float = EPISODE_FLOOR,
                      sigmas: float = BOUND_SIGMAS) -> Reference:
    """Reference from a baseline: one list of samples per run.

    value: :func:`location` of all samples (on the log scale).  Bounds: ``sigmas`` x the spread a single
    future run (of the baseline's typical sample count) is expected to show
    around the reference, between-run episodes and the reference's own
    uncertainty included, clamped to [floor, cap]; the same magnitude on both
    sides (only the worse side fails), never below one step of the printed
    resolution.  Give it many runs, ideally from
    different nights: it can only know about episodes it has sampled.
    """
    _check_direction(direction)
    runs = [c for c in (clean(r)[0] for r in samples_by_run) if c.size]
    if not runs:
        raise ValueError("no finite baseline samples")
    allx = np.concatenate(runs)
    value = location(allx)
    if not value > 0:
        raise ValueError(f"reference value must be positive, got {value}")
    n, r = int(allx.size), len(runs)
    ref_log = math.log(value)
    sign = _worse_sign(direction)

    between = between_better = None
    if r >= 2:
        med_logs = _run_location_logs(runs)
        dev = sign * (med_logs - ref_log)
        mad = _log_spread(np.exp(med_logs))
        between = max(mad, _tail_scale(dev))
        between_better = max(mad, _tail_scale(-dev))
    ref = Reference(value=value, unit=unit, spread=_log_spread(allx), n=n, runs=r,
                    estimator=ESTIMATOR,
                    between_run_spread=between,
                    between_run_spread_better=between_better,
                    within_run_spread=within_run_spread(runs),
                    episode_floor=episode_floor)
    m = max(1, int(round(n / r)))
    s, _ = _noise_model(ref, m)
    raw = sigmas * s
    # One step of the printed resolution (0.01 us of 0.16 us is 6 %) is not a
    # measurable change, whatever the floor says.
    resolution = quantisation_step(allx) / value
    floor = max(floor, resolution)
    bound_log = min(max(raw, _to_log(floor, direction)), _to_log(cap, direction))
    b = _from_log(bound_log, direction)
    ref.lower, ref.upper = -b, b
    notes = []
    if raw > _to_log(cap, direction):
        ref.too_noisy = True
        notes.append(f"too noisy to gate: healthy runs need +-{_from_log(raw, direction):.0%} "
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
    ref.note = "; ".join(notes)
    return ref

