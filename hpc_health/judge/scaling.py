"""How a start-up time grows with the number of ranks.

A healthy launcher and PMIx grow start-up about with log2 P (a tree of
daemons, a collective address exchange); one that fell back to a flat
exchange grows with P, which is invisible at two nodes and fatal at two
thousand.  The model ``t(P) = a + b log2 P + c P`` is fitted with
non-negative coefficients (a time does not shrink with more ranks); with
fewer than three scale points the linear term is left out (two points
cannot tell it from the logarithmic one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

#: A linear term explaining at least this share of the largest scale point's
#: time is named as a finding ("start-up grows linearly").
LINEAR_SHARE_FINDING = 0.5


@dataclass(frozen=True)
class StartupFit:
    a: float
    b: float           # per doubling of the ranks
    c: float           # per rank
    ranks: tuple[int, ...]

    def at(self, p: float) -> float:
        return self.a + self.b * math.log2(p) + self.c * p

    @property
    def linear_share(self) -> float:
        """Share of the time at the largest scale point the linear term makes."""
        p = max(self.ranks)
        total = self.at(p)
        return self.c * p / total if total > 0 else 0.0

    def describe(self, unit: str = "s") -> str:
        return (f"t(P) = {self.a:.4g} + {self.b:.4g}·log2 P + {self.c:.4g}·P {unit} "
                f"over P = {', '.join(str(p) for p in self.ranks)}")


def fit_startup(ranks: Sequence[int], times: Sequence[float]) -> StartupFit:
    """Non-negative least squares of ``a + b log2 P + c P`` on the points."""
    if len(ranks) != len(times) or not ranks:
        raise ValueError("one time per scale point is needed")
    p = np.asarray(ranks, dtype=float)
    t = np.asarray(times, dtype=float)
    columns = [np.ones_like(p), np.log2(p)] + ([p] if len(set(ranks)) >= 3 else [])
    coef, _ = nnls(np.column_stack(columns), t)
    c = float(coef[2]) if len(coef) > 2 else 0.0
    return StartupFit(float(coef[0]), float(coef[1]), c, tuple(int(x) for x in ranks))


def scale_points(nodes: int, ranks_per_node: int) -> list[tuple[int, int]]:
    """(nodes, ranks per node) of each scale point: the ranks of one node
    doubled up to a full node, then full nodes doubled up to the partition
    (each maximum included when not a power of two)."""
    def doubling(limit):
        out, x = [], 1
        while x < limit:
            out.append(x)
            x *= 2
        return out + [limit]
    return [(1, r) for r in doubling(ranks_per_node)] + \
        [(n, ranks_per_node) for n in doubling(nodes)[1:]]
