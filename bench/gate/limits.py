"""What a figure's gate can promise, from its night spread and the nights
its spread rests on: the MDC by the third night (4 times in 5) under the
local site's default budget, computed by the gate's own functions.

A table for reading a capture's ``weak`` references: whether a figure is
weak follows from its spread, the degrees of freedom behind it and its
check's number of independent figures, not from how it was run.

::

    python -m bench.gate.limits
"""

from __future__ import annotations

import math

from hpc_health.stats import gate

#: The local site's gated checks (bench/gate/__main__.py).
LOCAL_CHECKS = 10
SPREADS = (0.03, 0.05, 0.075, 0.10, 0.15)
#: Baseline runs' degrees of freedom (five runs: 4), then healthy nights learned.
DFS = (4, 9, 19, 34, 64)
#: A check whose figures move as one (STREAM's four kernels) and one of twenty
#: independent figures (the halo exchange counts about that many).
EFFECTIVE = (1, 20)


def table() -> str:
    head = "| night spread | independent figures in its check | " + \
        " | ".join(f"df {df}" for df in DFS) + " |"
    rows = [head, "|" + "---|" * (2 + len(DFS))]
    for eff in EFFECTIVE:
        lv = gate.levels(gate.FALSE_ALARM_BUDGET, LOCAL_CHECKS, eff)
        for s in SPREADS:
            cells = []
            for df in DFS:
                loss = -math.expm1(-gate.detectable(s, df, 5, lv).sustained)
                cells.append(f"{100 * loss:.0f} %")
            rows.append(f"| {100 * s:g} % | {eff} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(f"MDC by the third night, as a loss of a bandwidth; {LOCAL_CHECKS} gated checks, "
          f"budget {gate.FALSE_ALARM_BUDGET:g} failing night a site-month, five baseline runs "
          "(df 4) and the healthy nights learned since")
    print()
    print(table())
