"""Each node's record over the stored per-node runs: how often it stood out
from its peers, on which checks and by how much, and when hpc-health
drained and resumed it.

Read from the store's index (the figures of each per-node run, each with
the node it was pinned to and its verdict as judged that night) and from
each run's run.json (what the run did in Slurm): no second database.
Rendered by :mod:`hpc_health.cli.nodes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from hpc_health.judge.verdicts import OUTLIER


@dataclass
class Night:
    """One node in one per-node run."""
    run_id: str
    started: str
    node: str
    figures: int = 0
    #: [(check, variable, change against the peers' median)] named OUTLIER
    outliers: list = field(default_factory=list)
    drained: str = ""           # the reason, when hpc-health drained it that night
    resumed: bool = False       # hpc-health gave it back that night

    @property
    def verdict(self) -> str:
        return OUTLIER if self.outliers else "PASS"


@dataclass
class Record:
    """A node over the runs."""
    node: str
    nights: list = field(default_factory=list)

    @property
    def outlier_nights(self) -> int:
        return sum(1 for n in self.nights if n.outliers)

    def checks(self) -> dict[str, float]:
        """{check: its worst change against the peers} over the nights."""
        worst: dict[str, float] = {}
        for n in self.nights:
            for check, _, change in n.outliers:
                if abs(change) > abs(worst.get(check, 0.0)):
                    worst[check] = change
        return worst

    def last(self, what: str) -> str:
        """The latest run that drained (*what* 'drained') or resumed it, or ''."""
        hits = [n.run_id for n in self.nights if getattr(n, what)]
        return hits[-1] if hits else ""


@dataclass
class Point:
    """One figure of one node in one run, against the same figure on its peers."""
    run_id: str
    node: str
    check: str
    variable: str
    unit: str
    value: float
    peers: float | None         # median of the other nodes' values
    change: float | None        # (value - peers) / |peers|
    verdict: str


def _node(m: Any) -> str | None:
    return m.nodes[0] if len(m.nodes) == 1 else None


def _by_figure(figures: Sequence[Any]) -> dict[tuple, list[Any]]:
    groups: dict[tuple, list[Any]] = {}
    for m in figures:
        if _node(m) and m.value is not None:
            params = tuple(sorted((k, str(v)) for k, v in m.params.items()))
            key = (m.run.run_id, m.test, params, m.partition_fullname, m.environ, m.variable)
            groups.setdefault(key, []).append(m)
    return groups


def points(figures: Sequence[Any]) -> list[Point]:
    """Every per-node figure of *figures* (index measurements of per-node
    runs, oldest run first) against its peers in the same run."""
    out = []
    for group in _by_figure(figures).values():
        for m in group:
            others = [p.value for p in group if p is not m]
            center = median(others) if others else None
            change = (m.value - center) / abs(center) if center else None
            out.append(Point(m.run.run_id, _node(m) or "", m.test, m.variable, m.unit, m.value, center,
                             change, m.verdict or ""))
    return out


def records(runs: Sequence[Any], figures: Sequence[Any]) -> list[Record]:
    """Each node's record over *runs* (index Runs of per-node runs, oldest
    first) from their *figures*."""
    nights: dict[tuple[str, str], Night] = {}
    started = {r.run_id: r.started for r in runs}
    for p in points(figures):
        n = nights.setdefault((p.run_id, p.node),
                              Night(p.run_id, started.get(p.run_id, ""), p.node))
        n.figures += 1
        if p.verdict == OUTLIER:
            n.outliers.append((p.check, p.variable, p.change or 0.0))
    for r in runs:
        done = r.meta.get("slurm") or {}
        for d in done.get("drained") or ():
            night = nights.setdefault((r.run_id, d["node"]), Night(r.run_id, r.started, d["node"]))
            night.drained = d.get("reason", "")
        for d in done.get("resumed") or ():
            night = nights.setdefault((r.run_id, d["node"]), Night(r.run_id, r.started, d["node"]))
            night.resumed = True
    order = {r.run_id: i for i, r in enumerate(runs)}
    by_node: dict[str, Record] = {}
    for night in sorted(nights.values(), key=lambda n: (order.get(n.run_id, -1), n.node)):
        by_node.setdefault(night.node, Record(night.node)).nights.append(night)
    return [by_node[n] for n in sorted(by_node)]

