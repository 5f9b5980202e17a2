"""Many figures of one run: significance corrected across them (Holm,
Benjamini-Hochberg), so a run with many figures does not raise more false
alarms."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hpc_health.stats.constants import ALPHA
from hpc_health.stats.noise import VerdictResult, decide, evaluate


def adjust(p_values: Sequence[float | None], alpha: float = ALPHA,
           method: str = "holm") -> list[bool]:
    """Which hypotheses to reject while controlling false alarms over the family.

    ``"holm"``: family-wise error <= alpha (no false DEGRADED anywhere in the
    run with probability >= 1 - alpha), valid under any dependence between the
    variables, which share a node and its episodes.  ``"bh"``: Benjamini-
    Hochberg, false-discovery rate <= alpha; more power, but expects some false
    alarms on a run with many real degradations.  None/NaN entries (no test)
    are never rejected and do not count towards the family size.
    """
    p = np.array([np.nan if v is None else float(v) for v in p_values], dtype=float)
    out = np.zeros(p.size, dtype=bool)
    ok = np.isfinite(p)
    m = int(ok.sum())
    if m == 0:
        return out.tolist()
    pv = p[ok]
    if method == "holm":
        order = np.argsort(pv, kind="stable")
        thresholds = alpha / (m - np.arange(m))
        passed = pv[order] <= thresholds
        k = m if passed.all() else int(np.argmin(passed))   # first failure stops
        rej: np.ndarray = np.zeros(m, dtype=bool)
        rej[order[:k]] = True
    elif method in ("bh", "fdr_bh", "benjamini-hochberg"):
        # Imported here: scipy.stats costs every command 0.4 s of start-up
        # (over a second on a loaded machine), and only this method needs it.
        from scipy import stats as _st
        rej = _st.false_discovery_control(pv, method="bh") <= alpha
    else:
        raise ValueError(f"unknown method {method!r}: use 'holm' or 'bh'")
    out[ok] = rej
    return out.tolist()


def holm_levels(p_values: Sequence[float | None], alpha: float = ALPHA) -> list[float | None]:
    """The two-sided level at which Holm's step-down procedure judges each
    hypothesis: alpha / (m - i) for the i-th smallest p-value while they
    are rejected, and for every one after the first that is not, the level
    at which the procedure stopped.  An interval at that level excludes 0
    exactly when :func:`adjust` rejects, so a printed interval and the
    decision never disagree.  None entries get None."""
    ranked = sorted((float(v), i) for i, v in enumerate(p_values)
                    if v is not None and np.isfinite(v))
    out: list[float | None] = [None] * len(p_values)
    m = len(ranked)
    stopped = None
    for rank, (p, i) in enumerate(ranked):
        level = alpha / (m - rank)
        if stopped is None and p > level:
            stopped = level
        out[i] = stopped if stopped is not None else level
    return out


def decide_many(items: Sequence[tuple], alpha: float = ALPHA,
                method: str = "holm") -> list[VerdictResult]:
    """Verdicts for all variables of one run, ``items`` = (ref, samples,
    direction), with the significance corrected across them (:func:`adjust`).

    Worse-side and better-side tests are separate families (IMPROVED is only a
    hint and must not make a DEGRADED harder to reach).  Variables judged on
    bounds only have no p-value and are outside the families.  The MDC is
    reported at alpha / family size, Holm's strictest step, so it is what the
    run can promise for every variable.
    """
    evals = [evaluate(ref, samples, direction) for ref, samples, direction in items]
    sig_w = adjust([e.p_worse for e in evals], alpha, method)
    sig_b = adjust([e.p_better for e in evals], alpha, method)
    m = max(1, sum(e.p_worse is not None for e in evals))
    out = []
    for e, (ref, _, direction), sw, sb in zip(evals, items, sig_w, sig_b):
        out.append(decide(e, ref, direction, alpha / m, sig_worse=sw, sig_better=sb,
                           test=f"{method} over {m} variables, alpha {alpha:.2g}"))
    return out

