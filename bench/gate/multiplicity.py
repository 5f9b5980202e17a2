"""How often a check's persistence rule fires on a healthy machine when its
figures move together: the effective count (:func:`hpc_health.stats.prior.effective_count`,
from squared correlations) against the union of the figures' three-night
events, simulated.

Each simulated check has ``--figures`` figures whose night noise shares a
part of its variance (their pairwise correlation); its reference is the
mean of five such nights, its spread known (no estimation error: this
isolates the multiplicity).  A figure fails by the persistence rule when
its last three nights are all beyond the product's threshold
(:func:`hpc_health.stats.gate.threshold`) at the level
:func:`hpc_health.stats.gate.levels` gives it for the count the formula
makes of its check; the check's rate is the share of nights on which any
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


def check_rate(figures: int, correlation: float, nights: int, seed: int = 1) -> dict:
    """The persistence rule's rate over a check of *figures* figures at
    pairwise *correlation*, beside the level it was given."""
    rng = np.random.default_rng(seed)
    effective = figures / (1 + (figures - 1) * correlation ** 2)
    lv = gate.levels(gate.FALSE_ALARM_BUDGET, LOCAL_CHECKS, effective)
    k = gate.PERSIST_NIGHTS
    ck = gate.threshold(lv.persist, math.inf, RUNS, k)
    shared, own = math.sqrt(correlation), math.sqrt(1 - correlation)

    def draw(n: int) -> np.ndarray:
        return shared * rng.normal(size=(nights, n, 1)) + own * rng.normal(size=(nights, n, figures))

    reference = draw(RUNS).mean(axis=1)
    t = (draw(k) - reference[:, None, :]) / math.sqrt(1 + 1 / RUNS)
    fired = np.all(t > ck, axis=1)
    return {"figures": figures, "correlation": correlation, "effective": effective,
            "check_rate": float(fired.any(axis=1).mean()), "check_level": lv.persist * effective,
            "figure_rate": float(fired.mean()), "figure_level": lv.persist}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gate.multiplicity",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--figures", type=int, default=10)
    ap.add_argument("--nights", type=int, default=200_000)
    args = ap.parse_args(argv)
    print("| correlation | effective count | check's rate | check's level | ratio | "
          "independent figures its rate is worth |")
    print("|---|---|---|---|---|---|")
    for rho in (0.0, 0.5, 0.9):
        r = check_rate(args.figures, rho, args.nights)
        worth = r["check_rate"] / r["figure_rate"] if r["figure_rate"] else math.nan
        print(f"| {rho} | {r['effective']:.2f} | {100 * r['check_rate']:.3f} % | "
              f"{100 * r['check_level']:.3f} % | {r['check_rate'] / r['check_level']:.1f} | "
              f"{worth:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
