"""Per-node health: the one slow node among its peers, no reference needed.

``hpc-health run --per-node`` runs the single-node checks on every node of a
partition (ReFrame's ``--distribute``).  For each figure, each node is
compared with its peers *in the same run* by a modified z-score (Iglewicz
and Hoaglin):

    z = 0.6745 * (median_node - center) / scale

where ``center`` is the median of the peers' medians and ``scale`` the larger
of the peers' between-node MAD and their typical within-node MAD (the
samples of one run).  The within-node part keeps this usable on small
partitions: with two nodes the MAD of the peers' medians is 0 or undefined.
A node is an OUTLIER when its z on the worse side exceeds
:data:`Z_THRESHOLD` *and* it is worse than its peers by at least
:data:`MIN_CHANGE`.  With two nodes "one is faster" and "the other is slower"
cannot be told apart; from three nodes on a fast node is not mistaken for
slow peers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hpc_health import stats

if TYPE_CHECKING:
    from hpc_health.model.results import Measurement

#: Iglewicz and Hoaglin's recommended cut for the modified z-score.
Z_THRESHOLD = 3.5
#: Smallest relative difference from the peers that is reported.  The
#: recorded 1-thread STREAM series moved 12.5 % between two episodes minutes
#: apart on one and the same machine; a node must be worse than that.
MIN_CHANGE = 0.20
#: MAD of a quantised series can be 0; the peers' spread is never taken
#: below this fraction of their median.
MIN_SPREAD = 0.005


def node_of(m: Measurement) -> str | None:
    if m.node:
        return m.node
    return m.nodes[0] if len(m.nodes) == 1 else None


def outliers(measurements: Sequence[Measurement],
             min_change: float = MIN_CHANGE) -> list[tuple[Any, ...]]:
    """[(measurement, node, z, worse_by, peers)] for every figure where one
    node stands out on the worse side."""
    groups = defaultdict(list)
    for m in measurements:
        node = node_of(m)
        if node is None or m.value is None or m.variable is None:
            continue
        params = tuple(sorted((k, str(v)) for k, v in m.params.items()))
        groups[(m.test, params, m.partition_fullname, m.environ, m.variable)].append((node, m))
    found = []
    for members in groups.values():
        if len({n for n, _ in members}) < 2:
            continue
        direction = members[0][1].better
        if direction not in stats.DIRECTIONS:
            continue    # undeclared: FAIL in the verdicts, never a guess here
        sign = 1.0 if direction == stats.LOWER else -1.0
        for node, m in members:
            mine, _ = stats.clean(m.samples or [m.value])
            peers = [stats.clean(p.samples or [p.value])[0] for n, p in members if n != node]
            peers = [p for p in peers if p.size]
            if mine.size == 0 or not peers:
                continue
            medians = np.array([np.median(p) for p in peers])
            center = float(np.median(medians))
            between = float(np.median(np.abs(medians - center)))
            within = float(np.median([np.median(np.abs(p - np.median(p))) for p in peers]))
            scale = max(between, within, MIN_SPREAD * abs(center))
            med_n = float(np.median(mine))
            z = sign * 0.6745 * (med_n - center) / scale
            worse_by = sign * (med_n - center) / abs(center)
            if z > Z_THRESHOLD and worse_by >= min_change:
                found.append((m, node, z, worse_by, sorted({n for n, _ in members if n != node})))
    return found
