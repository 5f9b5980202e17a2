"""A figure's baseline at capture and what its spread rests on: its runs
(at the worse of two levels when the node switched between two states),
and the strength it borrows from the other figures of its kind
(:mod:`hpc_health.stats.prior`).  ``reference capture`` writes what
:func:`capture_family` returns into the reference file's provenance, where
:func:`hpc_health.judge.gating.noise_of` reads it every night."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpc_health.stats import prior, tail_count
from hpc_health.stats.constants import MIN_SPREAD


@dataclass
class Baseline:
    """One figure's baseline nights: the run ids and each run's log figure;
    ``resolution``: one printed step of its samples as a fraction of the value;
    ``min_change``: the smallest change its check calls a finding;
    ``levels``: the two levels its samples fall at, if they do."""
    run_ids: list
    logs: np.ndarray
    direction: str
    unit: str = ""
    resolution: float = 0.0
    min_change: float = 0.0
    #: its samples' two levels (:func:`hpc_health.stats.levels.two_levels`)
    levels: Any = None
    #: *run_ids* and *logs* are of the worse level's samples alone: the
    #: reference is that level
    at_level: bool = False
    #: every baseline run and its log figure (default: *run_ids*, *logs*):
    #: how the figure moves with the others of its check
    every_run: tuple = ()
    #: the better level's log figures of its runs, when the worse level's
    #: few runs borrow its spread (:attr:`spread`)
    other_level: tuple = ()
    #: the benchmark it is a figure of: the figures whose prior it shares
    benchmark: str = ""

    def moves(self) -> tuple[list, np.ndarray]:
        """(run ids, log figures) of every baseline run."""
        return (list(self.every_run[0]), self.every_run[1]) if self.every_run \
            else (self.run_ids, self.logs)

    @property
    def spread(self) -> float:
        """The runs' log SD, never below what the benchmark's printed
        resolution (a uniform rounding error of one step) or its timer
        (:data:`MIN_SPREAD`) can tell: runs that print the same value
        are not known to be quieter than that."""
        floor = max(MIN_SPREAD, self.resolution / math.sqrt(12.0))
        if self.other_level:
            # Pooled about each level's own mean: the node's two states are
            # each as quiet as the other (1-3 % on this guest), and two runs
            # at the worse one give its spread one degree of freedom alone.
            ss = sum(float(np.sum((np.asarray(x) - np.mean(x)) ** 2))
                     for x in (self.logs, self.other_level))
            return max(math.sqrt(ss / self.df), floor)
        return max(float(np.std(self.logs, ddof=1)), floor)

    @property
    def df(self) -> int:
        """Degrees of freedom of :attr:`spread`."""
        return len(self.logs) - 1 + max(len(self.other_level) - 1, 0)


def capture_family(figures: Mapping[Any, Baseline],
                   kind: Callable[[Any], Any] | None = None,
                   check: Callable[[Any], Any] | None = None) -> dict[Any, dict[str, Any]]:
    """The provenance the gate needs for each figure of one benchmark on
    one partition: its spread and degrees of freedom, the prior it borrows
    from, and its check's distinct figures and how they move together (its
    multiplicity, :mod:`hpc_health.stats.tail_count`; *check* names a
    figure's check, default: one check).

    The prior is fitted to the figures of the same *kind* (the variable of
    a check: a halo time at 1 MiB beside the other 1 MiB times, not beside
    8 B ones, whose noise is of another order) when there are
    :data:`prior.MIN_FIGURES` of that kind, else to the whole benchmark:
    STREAM's four kernels with every core and its Triad per thread count,
    one memory measured by one program."""
    groups: dict[Any, dict[Any, Baseline]] = {}
    checks: dict[Any, dict[Any, Baseline]] = {}
    for k, b in figures.items():
        groups.setdefault(kind(k) if kind else None, {})[k] = b
        checks.setdefault(check(k) if check else None, {})[k] = b
    out: dict[Any, dict[str, Any]] = {}
    few = [k for g in groups.values() if len(g) < prior.MIN_FIGURES for k in g]
    if few:
        # Kinds with too few figures borrow from the whole benchmark.
        whole = _borrowing(figures)
        out.update({k: whole[k] for k in few})
    for group in groups.values():
        if len(group) >= prior.MIN_FIGURES:
            out.update(_borrowing(group))
    for members in checks.values():
        runs = _matrix(members)
        fam = prior.family(runs)
        shown = tail_count.correlation_shown(fam.correlation, runs.shape[0])
        for k in members:
            out[k].update(check_figures=int(fam.figures), check_correlation=shown,
                          check_apart=int(fam.apart) or None)
    return out


def _borrowing(figures: Mapping[Any, Baseline]) -> dict[Any, dict[str, Any]]:
    """Each figure's spread and the prior fitted to *figures*, held to what
    their effective number of independent figures can lend."""
    keys = list(figures)
    s2 = [figures[k].spread ** 2 for k in keys]
    dfs = [float(figures[k].df) for k in keys]
    lenders = prior.effective_count(_matrix(figures))
    p_var, p_df = prior.fit_prior(s2, dfs)
    p_df = min(p_df, prior.prior_df_cap(lenders, float(np.mean(dfs)) if dfs else 0.0))
    p_df = p_df if p_df >= 0.5 else 0.0     # half a degree of freedom lends nothing
    out = {}
    for k, var, df in zip(keys, s2, dfs):
        out[k] = {"night_spread": var ** 0.5, "night_df": int(df),
                  "prior_spread": p_var ** 0.5 if p_df > 0 else None,
                  "prior_df": p_df if p_df > 0 else None}
    return out


def _matrix(figures: Mapping[Any, Baseline]) -> np.ndarray:
    """Runs × figures of log figures, NaN where a run lacks a figure."""
    run_ids = sorted({r for b in figures.values() for r in b.moves()[0]})
    col = {r: i for i, r in enumerate(run_ids)}
    x = np.full((len(run_ids), len(figures)), np.nan)
    for j, b in enumerate(figures.values()):
        for r, v in zip(*b.moves()):
            x[col[r], j] = v
    return x
