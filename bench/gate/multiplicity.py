"""How often a check's persistence rule fires on a healthy machine when its
figures move together: the count the gate fits to its level
(:mod:`hpc_health.stats.tail_count`), and the effective count from squared
correlations (:func:`hpc_health.stats.prior.effective_count`, the gate's
count until 2026-11-29), against the union of the figures' three-night
events, simulated.

Each simulated check has ``--figures`` figures whose night noise shares a
part of its variance (their pairwise correlation); its reference is the
mean of five such nights, its spread known (no estimation error: this
isolates the multiplicity).  A figure fails by the persistence rule when
its last three nights are all beyond the product's threshold
(:func:`hpc_health.stats.gate.threshold`) at the level
:func:`hpc_health.stats.gate.levels` gives it for the count made of its
check; the check's rate is the share of nights on which any
of its figures fails, set against the check's share of the budget.

::

    python -m bench.gate.multiplicity --nights 200000
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from hpc_health.stats import gate

#: The local site's gated checks (bench/gate/__main__.py).
LOCAL_CHECKS = 10
RUNS = 5


def check_rate(figures: int, correlation: float, nights: int, seed: int = 1,
               fitted: bool = True) -> dict:
    """The persistence rule's rate over a check of *figures* figures at
    pairwise *correlation*, beside the level it was given: by the count
    fitted to the level, or (*fitted* false) by the squared correlations."""
    rng = np.random.default_rng(seed)
    squared = figures / (1 + (figures - 1) * correlation ** 2)
    family = gate.Family(figures, correlation) if fitted else squared
    lv = gate.levels(gate.FALSE_ALARM_BUDGET, LOCAL_CHECKS, family)
    check_level = gate.night_budget() / LOCAL_CHECKS * gate.SHARE_PERSIST
    k = gate.PERSIST_NIGHTS
    ck = gate.threshold(lv.persist, math.inf, RUNS, k)
    shared, own = math.sqrt(correlation), math.sqrt(1 - correlation)

    def draw(n: int) -> np.ndarray:
        return shared * rng.normal(size=(nights, n, 1)) + own * rng.normal(size=(nights, n, figures))

    reference = draw(RUNS).mean(axis=1)
    t = (draw(k) - reference[:, None, :]) / math.sqrt(1 + 1 / RUNS)
    fired = np.all(t > ck, axis=1)
    return {"figures": figures, "correlation": correlation,
            "count": check_level / lv.persist,
            "check_rate": float(fired.any(axis=1).mean()), "check_level": check_level,
            "figure_rate": float(fired.mean()), "figure_level": lv.persist}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gate.multiplicity",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--figures", type=int, default=10)
    ap.add_argument("--nights", type=int, default=200_000)
    args = ap.parse_args(argv)
    print("| correlation | count | figures counted | check's rate | check's level | ratio | "
          "independent figures its rate is worth |")
    print("|---|---|---|---|---|---|---|")
    for rho in (0.0, 0.5, 0.9, 0.99):
        for fitted in (True, False):
            r = check_rate(args.figures, rho, args.nights, fitted=fitted)
            worth = r["check_rate"] / r["figure_rate"] if r["figure_rate"] else math.nan
            print(f"| {rho} | {'fitted to the level' if fitted else 'squared correlations'} | "
                  f"{r['count']:.2f} | {100 * r['check_rate']:.3f} % | "
                  f"{100 * r['check_level']:.3f} % | "
                  f"{r['check_rate'] / r['check_level']:.2f} | {worth:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
