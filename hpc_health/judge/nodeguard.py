"""Which nodes a per-node run may take out of service, and which it may
give back: the evidence of each node and the guards a site expects.

The suite recommends; a site opts in to act (``--drain``,
``--resume-healthy``).  Before anything is done to a node:

- never more than a share of a partition drained by hpc-health at once
  (default one node or 10 %, whichever is more): the worst nodes first;
- never a node named in one round alone when several rounds were asked
  (one round is one disturbance, the rounds are there to outvote it);
- never after a run that was stopped, nor when the partition's other nodes
  are BROADLY WORSE than on the recent nights (then it is not the node);
- never a node someone else drained: it keeps that person's reason, and it
  is never resumed by the suite.

Slurm itself (reading states, draining, the reason's text) is
:mod:`hpc_health.run.slurm`; this module decides, from plain values.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpc_health.judge import pernode, verdicts
from hpc_health.judge.verdicts import FAILING, OUTLIER, SKIPPED, Verdict
from hpc_health.model import results
from hpc_health.stats.constants import HIGHER

#: At most this share of a partition's nodes drained by hpc-health at once
#: (at least one node): a fault that takes out more than that is the
#: partition's or the suite's, not a node's, and a person should look.
DRAIN_SHARE = 0.10
#: Rounds that must name a node before it is drained, when several were run.
MIN_ROUNDS_NAMED = 2

DRAIN, RESUME, KEEP = "drain", "resume", "keep"


@dataclass
class Finding:
    """Why a node is OUTLIER for one check: its worst figure against the
    median of its peers."""
    node: str
    partition: str          # system:partition
    check: str              # the test's name (StreamBandwidth)
    variable: str           # its worst figure (Triad)
    change: float           # signed: the figure against its peers (-0.38: 38 % less)
    figures: int            # figures that named the node
    of: int                 # the check's figures on that node
    rounds_named: int = 1   # rounds in which it was named on its own
    rounds: int = 1         # rounds the run asked for

    @property
    def worse_by(self) -> float:
        """How much worse, whichever way is better (0.38 for -38 % bandwidth)."""
        return abs(self.change)


@dataclass
class NodeState:
    """What Slurm says of a node."""
    node: str
    drained: bool           # DRAIN set (drained, draining) or down
    reason: str = ""
    ours: bool = False      # drained by hpc-health (its reason says so)


@dataclass
class Decision:
    """What is done to one node, and why; *finding* is the evidence."""
    node: str
    action: str             # DRAIN, RESUME or KEEP (nothing)
    why: str
    finding: Finding | None = None


def findings(verdict_list: Sequence[Verdict], min_change: float | None = None,
             rounds_named: Mapping[tuple, int] | None = None,
             rounds: int = 1) -> list[Finding]:
    """One finding per (node, check) named OUTLIER in a judged per-node run
    (:func:`hpc_health.judge.verdicts.node_outliers` with *min_change*),
    the worst first; *rounds_named* (:func:`rounds_named`) says in how
    many of the *rounds* each was named."""
    worse = {id(m): w for m, _, _, w, _ in pernode.outliers(
        [v.measurement for v in verdict_list],
        pernode.MIN_CHANGE if min_change is None else min_change)}
    groups: dict[tuple[str, str, str], list[Verdict]] = {}
    for v in verdict_list:
        node = pernode.node_of(v.measurement)
        if node and v.measurement.variable is not None:
            key = (v.measurement.partition_fullname, node, v.measurement.test)
            groups.setdefault(key, []).append(v)
    found = []
    for (part, node, check), vs in groups.items():
        hits = [(worse.get(id(v.measurement), 0.0), v) for v in vs if v.verdict == OUTLIER]
        if not hits:
            continue
        by, worst = max(hits, key=lambda h: h[0])
        named = rounds if rounds <= 1 or rounds_named is None else \
            rounds_named.get((part, node, check), 0)
        found.append(Finding(node, part, check, str(worst.measurement.variable),
                             signed(by, worst.measurement.better), len(hits), len(vs),
                             named, rounds))
    return sorted(found, key=lambda f: -f.worse_by)


def rounds_named(report: dict[str, Any], min_change: float | None) -> Counter:
    """{(partition, node, check): rounds in which the node was OUTLIER for
    the check with that round's samples alone}; empty unless the run was
    several rounds (ReFrame ``--reruns``, each round in its own directory)."""
    runs = report.get("runs") or []
    counts: Counter = Counter()
    if len(runs) < 2 or not results.is_rounds_session(report):
        return counts
    for run in runs:
        alone = {"session_info": {}, "runs": [run]}
        judged = [Verdict(m, "") for m in results.measurements(alone)
                  if m.variable is not None and m.value is not None]
        named = verdicts.node_outliers(judged, min_change)
        counts.update({(v.measurement.partition_fullname, pernode.node_of(v.measurement),
                        v.measurement.test) for v in named if v.verdict == OUTLIER})
    return counts


def share_limit(nodes: int, share: float = DRAIN_SHARE) -> int:
    """Nodes of a partition of *nodes* that hpc-health may hold drained at
    once: *share* of them, at least one."""
    return max(1, math.floor(share * nodes + 1e-9))


def plan_drains(found: Sequence[Finding], nodes: int, states: Mapping[str, NodeState],
                share: float = DRAIN_SHARE, interrupted: bool = False,
                broadly_worse: bool = False) -> list[Decision]:
    """What to do with each node of *found* (one partition of *nodes*
    nodes, Slurm's *states* of them): drain the worst first while the
    guards allow, else keep it in service and say which guard held."""
    out: list[Decision] = []
    per_node: dict[str, list[Finding]] = {}
    for f in sorted(found, key=lambda f: -f.worse_by):
        per_node.setdefault(f.node, []).append(f)
    held = sum(1 for s in states.values() if s.drained and s.ours)
    limit = share_limit(nodes, share)
    for node, fs in per_node.items():
        state = states.get(node, NodeState(node, False))
        solid = [f for f in fs if f.rounds <= 1 or f.rounds_named >= MIN_ROUNDS_NAMED]
        worst = (solid or fs)[0]
        if interrupted:
            why = "the run was stopped before it finished"
        elif broadly_worse:
            why = "the partition's other nodes are BROADLY WORSE too: not this node alone"
        elif state.drained and not state.ours:
            why = f"already drained by someone else ({state.reason or 'no reason given'})"
        elif state.drained:
            why = "already drained by hpc-health"
        elif held >= limit:
            why = (f"{held} of the partition's {nodes} nodes drained by hpc-health already: "
                   f"at most {limit} at once")
        elif not solid:
            why = (f"named in {worst.rounds_named} of {worst.rounds} rounds only "
                   f"(at least {MIN_ROUNDS_NAMED} needed)")
        else:
            held += 1
            out.append(Decision(node, DRAIN, "OUTLIER against its peers", worst))
            continue
        out.append(Decision(node, KEEP, why, worst))
    return out


def plan_resumes(healthy: Iterable[str], states: Mapping[str, NodeState],
                 interrupted: bool = False) -> list[Decision]:
    """Drained nodes given back: those hpc-health drained (their reason says
    so) that ran every check of this run healthy, beside at least one
    healthy peer."""
    out = []
    well = set(healthy)
    for node, state in sorted(states.items()):
        if not state.drained:
            continue
        if not state.ours:
            out.append(Decision(node, KEEP, "drained by someone else: never resumed by "
                                            f"hpc-health ({state.reason or 'no reason given'})"))
        elif interrupted:
            out.append(Decision(node, KEEP, "the run was stopped before it finished"))
        elif node not in well:
            out.append(Decision(node, KEEP, "not found healthy by this run"))
        elif not well - {node}:
            # Faster than a sick peer is not healthy: with two nodes, "this
            # one is faster" and "the other is slower" look alike.
            out.append(Decision(node, KEEP, "no healthy peer to be judged against in this run"))
        else:
            out.append(Decision(node, RESUME, "healthy among its peers in this run"))
    return out


def healthy_nodes(verdict_list: Sequence[Verdict]) -> set[str]:
    """Nodes whose every copy in a per-node run passed with no OUTLIER,
    FAIL or DEGRADED figure."""
    seen: set[str] = set()
    sick: set[str] = set()
    for v in verdict_list:
        node = pernode.node_of(v.measurement)
        if not node or v.verdict == SKIPPED:
            continue
        seen.add(node)
        if v.verdict in FAILING:
            sick.add(node)
    return seen - sick


def signed(worse_by: float, better: str | None) -> float:
    """A 'worse by' fraction as the figure moved: down for a bandwidth."""
    return -worse_by if better == HIGHER else worse_by
