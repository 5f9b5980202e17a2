"""Figure declarations: each figure a check reports is declared once.

A :class:`Figure` says what the figure is called, its unit, which way is
better and how to read it from one sample of the benchmark's output,
optionally along an axis (message size, thread count).  From it follow the
check's ReFrame ``perf_variables``, the per-sample figures the verdicts
judge, the verdict's direction, the reference lookup and the report's
grouping.  Nothing is guessed from a figure's name.

This module is part of the core: it imports no ReFrame.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

from hpc_health.units import DIRECTIONS, HIGHER, LOWER, size_label

#: Keys of a partition's declared ``capabilities`` (site.yaml).
CAPABILITIES = ("memory_bandwidth_mbs", "cores", "link_bandwidth_mbs", "link_latency_us",
                "fs_bandwidth_mibs")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class DeclarationError(ValueError):
    """A figure declaration that cannot work; names the check and the figure."""


@dataclass(frozen=True)
class Axis:
    """Values a figure is measured at, held by a check attribute (set from
    the site settings or ``-S``), and how a value appears in the name."""
    attr: str
    label: Callable[[Any], str] = str


#: Message sizes in bytes (``latency_4KiB``).
MESSAGE_SIZES = Axis("sizes", size_label)
#: OpenMP thread counts (``triad_4t``).
THREAD_COUNTS = Axis("thread_counts", lambda t: f"{t}t")


@dataclass(frozen=True)
class Figure:
    """One figure of a check.

    *name* is the performance variable's name; with an *axis* it holds one
    ``{}`` that the axis label fills (``'latency_{}'`` -> ``latency_8B``).
    *read* takes one sample (as the check's *source* method returns them)
    and, with an axis, the axis value.  *where* restricts the figure to
    instances whose attributes (parameters) have the given values.
    *group* is how reports group it (default: the name without the axis).
    *capability* names the partition capability (``site.yaml``
    ``capabilities``) the figure is a fraction of, ``key`` or ``key/cores``
    for a per-core figure; ``compare --normalise`` divides by it.
    *min_change* is the smallest change worse (a fraction) the check calls a
    health finding, a floor under the bound the noise sets, for a figure
    whose baseline cannot show its noise (a ratio that sits at its floor of
    1 on every baseline run); a site's ``tolerance`` replaces it.
    """
    name: str
    unit: str
    better: str
    read: Callable
    axis: Axis | None = None
    where: dict = field(default_factory=dict)
    source: str = "outputs"
    group: str = ""
    capability: str = ""
    min_change: float = 0.0

    def validate(self, owner: str = "?", attrs: Any = ()) -> None:
        """Raise DeclarationError naming *owner* and this figure when the
        declaration cannot work (checked when the check class is created)."""
        def bad(msg):
            raise DeclarationError(f"{owner}: figure {self.name!r}: {msg}")
        template = self.name.replace("{}", "x")
        if not _NAME.fullmatch(template):
            bad("the name must be an identifier (with one '{}' for the axis value)")
        if (self.axis is None) != ("{}" not in self.name):
            bad("a figure has an axis exactly when its name holds '{}'")
        if self.better not in DIRECTIONS:
            bad(f"better must be {HIGHER!r} or {LOWER!r}, not {self.better!r}")
        if not isinstance(self.unit, str) or not self.unit:
            bad("the unit must be a non-empty string")
        if not callable(self.read):
            bad("read must be a function of one sample")
        if self.capability and not all(k in CAPABILITIES
                                       for k in self.capability.split("/")):
            bad(f"capability {self.capability!r}: use one of {', '.join(CAPABILITIES)} "
                "(or KEY/cores)")
        if not 0.0 <= self.min_change <= 9.0:
            bad(f"min_change {self.min_change!r}: a fraction worse, from 0 to 9")
        for attr in ([self.axis.attr] if self.axis else []) + list(self.where) + [self.source]:
            if attrs and attr not in attrs:
                bad(f"the check has no attribute {attr!r}")

    def applies(self, obj: Any) -> bool:
        def match(attr, want):
            got = getattr(obj, attr)
            return got in want if isinstance(want, (tuple, list, set)) else got == want
        return all(match(a, w) for a, w in self.where.items())

    def instances(self, obj: Any) -> list[tuple[str, Callable[..., Any]]]:
        """(performance variable, reader of one sample) for *obj*."""
        if not self.applies(obj):
            return []
        if self.axis is None:
            return [(self.name, self.read)]
        values = getattr(obj, self.axis.attr) or []
        return [(self.name.format(self.axis.label(v)), _bind(self.read, v)) for v in values]

    @property
    def group_name(self) -> str:
        return self.group or self.name.replace("_{}", "").replace("{}", "")


def _bind(read, value):
    return lambda sample: read(sample, value)


def validate_all(owner: str, figures: Sequence[Figure], attrs: Any = ()) -> None:
    """Validate a check's declarations: each one, and no name twice."""
    seen = set()
    for fig in figures:
        if not isinstance(fig, Figure):
            raise DeclarationError(f"{owner}: {fig!r} is not a Figure")
        fig.validate(owner, attrs)
        key = (fig.name, tuple(sorted((k, str(v)) for k, v in fig.where.items())))
        if key in seen:
            raise DeclarationError(f"{owner}: figure {fig.name!r} is declared twice")
        seen.add(key)


def as_read(worse: float, direction: str | None) -> float:
    """A change given as a fraction *worse* (on the log scale: a bandwidth
    from 100 to 90 is 11.1 % worse) as the signed change a person reads
    everywhere: that bandwidth is -10 %, a latency 10 % longer +10 %."""
    if direction == HIGHER:
        return math.expm1(-math.log1p(worse)) if worse > -1 else math.inf
    return worse
