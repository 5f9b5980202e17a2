"""Each figure's trend over a set of runs, as the HTML report draws it: one
point per run with its samples' spread, the stored reference and its
bounds, the minimum detectable change, the level shifts in the series and
the sustained step to worse, and the runs where the software stack changed.

Computed here, drawn by :mod:`hpc_health.render.html_report`: nothing here
renders."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hpc_health import stats
from hpc_health.judge import history as hist
from hpc_health.stats import changepoint

if TYPE_CHECKING:
    from hpc_health.model.references import ReferenceSet
    from hpc_health.model.runs import FigureIndex, Run

#: Fewest points for which level shifts are looked for (two segments of
#: changepoint's minimum size).
MIN_POINTS_FOR_CHANGES = 6


@dataclass
class Trend:
    """One figure (check, partition, environ, variable) over the runs."""
    test: str
    check: str
    partition: str
    environ: str
    variable: str
    unit: str
    better: str | None
    params: dict = field(default_factory=dict)
    runs: list = field(default_factory=list)        # run ids, oldest first
    started: list = field(default_factory=list)     # ISO times of those runs
    values: list = field(default_factory=list)
    lows: list = field(default_factory=list)        # smallest sample of each run
    highs: list = field(default_factory=list)       # largest sample
    #: whether each run measured the figure on a busy node (other processes
    #: used its cores): the load, not the machine
    busy: list = field(default_factory=list)
    reference: float | None = None
    lower: float | None = None                      # absolute bounds, None: unbounded
    upper: float | None = None
    mdc: float | None = None                        # fraction
    weak: bool = False
    #: indices where a new level of the series starts
    change_points: list = field(default_factory=list)
    #: the sustained step to worse: {"index", "run", "magnitude", "nights",
    #: "nights_before", "sigma" (the nightly spread, log scale)}
    worse_since: dict | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.check, self.partition, self.environ, self.variable)

    @property
    def claims(self) -> bool:
        """Whether the series is long enough for any trend to be claimed."""
        return len(self.values) >= MIN_POINTS_FOR_CHANGES


def stack_changes(runs: Sequence[Run]) -> list[tuple[str, str]]:
    """(run id, start time) of each run whose software-stack hash differs
    from the run before it (runs without a hash are skipped, not counted as
    a change)."""
    out = []
    last = None
    for r in runs:
        h = r.meta.get("stack_hash")
        if not h:
            continue
        if last is not None and h != last:
            out.append((r.run_id, r.meta.get("started", "")))
        last = h
    return out


def trends(idx: FigureIndex, runs: Sequence[Run], refs: ReferenceSet | None = None,
           tick: Callable[[int, int], Any] = lambda step, total: None,
           level_shifts: bool = True, samples: bool = True,
           keep: Callable[[Any], bool] | None = None) -> list[Trend]:
    """The trend of every figure measured in *runs* (oldest first), in the
    order of first appearance; *tick(1, figures)* is called once per figure
    (progress).  Without *level_shifts* the report's Pelt marks are not
    drawn, without *samples* each run's spread is its value alone (the
    drift test needs neither, only the sustained step); *keep*, when
    given, chooses the figures (a per-node run's peers without the node
    they named)."""
    points: dict[tuple, list[dict[str, Any]]] = {}
    for m in idx.figures(runs, samples=samples):
        if m.value is None or m.variable is None or (keep is not None and not keep(m)):
            continue
        key = (m.check, m.partition_fullname, m.environ, m.variable)
        points.setdefault(key, []).append(hist.point(m))
    out = []
    for (check, part, env, var), pts in points.items():
        last = pts[-1]["measurement"]
        t = Trend(last.test, check, part, env, var, last.unit, last.better, dict(last.params))
        for p in pts:
            finite = [s for s in p["samples"] if s is not None]
            t.runs.append(p["run"])
            t.started.append(p["started"])
            t.values.append(p["value"])
            t.lows.append(min(finite, default=p["value"]))
            t.highs.append(max(finite, default=p["value"]))
            t.busy.append(hist.is_busy(p))
        ref = hist.reference_for(refs, pts[-1])
        _reference(t, refs, ref, last)
        if t.claims:
            if level_shifts:
                t.change_points = changepoint.change_points(t.values)
            step = hist.drift(pts, refs)
            if step:
                t.worse_since = {"index": step["index"], "run": t.runs[step["index"]],
                                 "magnitude": step["magnitude"], "nights": step["nights"],
                                 "nights_before": step["nights_before"],
                                 "sigma": step["sigma"]}
        out.append(t)
        tick(1, len(points))
    return out


def _reference(t: Trend, refs: ReferenceSet | None, ref: stats.Reference | None,
               m: Any) -> None:
    """The trend's band and MDC from *ref* (:func:`history.reference_for` of
    its latest point, measurement *m*)."""
    if ref is None or refs is None:
        return
    t.reference = ref.value
    t.lower = None if ref.lower is None else ref.value + abs(ref.value) * ref.lower
    t.upper = None if ref.upper is None else ref.value + abs(ref.value) * ref.upper
    entry = refs.lookup(m.test, m.partition_fullname, m.environ, m.params, m.variable, m.unit)
    prov = entry.provenance if entry is not None else {}
    t.mdc = prov.get("mdc")
    t.weak = bool(prov.get("weak"))
