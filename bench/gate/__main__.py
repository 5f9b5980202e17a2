"""The gate's promises measured on the default path (docs/verdicts.md):

1. false failing nights on real clean series (:mod:`.real_series`);
2. on nightly stores made from a real full-suite run (:mod:`.stores`):
   after a five-night baseline, a -20 % loss of every STREAM bandwidth at
   3 % night noise on its first night, a -30 % loss at 10 % noise within
   three nights, and the failing nights among 20 clean ones after capture.

::

    python -m bench.gate                               # the latest stored run as template
    python -m bench.gate --from-run DIR --trials 100 --json gate.json

Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench.gate import real_series, stores
from hpc_health.stats import gate

#: The local site's gated checks on the default path (its ten checks with
#: figures): the number a figure's share of the budget is divided by.
LOCAL_CHECKS = 10


def _latest_run() -> Path:
    from hpc_health.store import rundirs
    runs = rundirs.list_runs("local")
    if not runs:
        sys.exit("no stored run of site 'local': give --from-run DIR (a run directory of "
                 "`hpc-health run`)")
    return Path(runs[-1][0])


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def per_figure(ts: list) -> dict:
    """Each STREAM bandwidth's share of trials caught on night 1 and within
    the faulty nights: the promise is a figure's, not the suite's."""
    names = sorted({name for t in ts for name in t.caught})
    return {name: (sum(t.caught.get(name) == 1 for t in ts) / len(ts),
                   sum(t.caught.get(name) is not None for t in ts) / len(ts))
            for name in names}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gate", description=__doc__.split("\n")[0])
    ap.add_argument("--from-run", type=Path, help="a run directory of `hpc-health run`")
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--clean", type=int, default=20, help="clean nights after capture")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--skip-stores", action="store_true")
    args = ap.parse_args(argv)
    out: dict = {"checks": LOCAL_CHECKS, "budget": gate.FALSE_ALARM_BUDGET}

    start = time.time()
    print("## False failing nights on real clean series\n")
    print("| series | runs are | as recorded: figure-nights | failing | before their retest | "
          "rate | a day apart: figure-nights | failing | before their retest | rate | "
          "allotted (1 figure) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    out["real"] = []
    for eff in (1.0,):
        for row in real_series.false_alarms(LOCAL_CHECKS, eff):
            out["real"].append(row)
            print(f"| {row['series']} | {row['spacing']} | {row['figure_nights']} | "
                  f"{row['failing']} | {row['before_retest']} | {100 * row['rate']:.2f} % | "
                  f"{row['apart_nights']} | {row['apart_failing']} | "
                  f"{row['apart_before_retest']} | {100 * row['apart_rate']:.2f} % | "
                  f"{100 * row['allotted']:.2f} % |")
    print(f"\n({time.time() - start:.0f} s)\n")
    if args.skip_stores:
        return 0

    run_dir = args.from_run or _latest_run()
    tpl = stores.template(run_dir)
    out["template"] = str(run_dir)
    print(f"## Nightly stores from {run_dir.name} ({len(tpl)} figures), {args.trials} trials "
          f"each\n")
    print("| night noise | loss of STREAM's bandwidths | caught on night 1 | within 3 nights "
          "(any STREAM figure) | StreamBandwidth Triad within 3 | references (weak) |")
    print("|---|---|---|---|---|---|")
    out["detection"] = []
    for spread, loss in ((0.03, 0.20), (0.10, 0.30)):
        ts = [stores.trial(tpl, seed, spread, loss, clean=0, faulty=3)
              for seed in range(args.trials)]
        first = sum(t.stream_caught_on == 1 for t in ts) / len(ts)
        within = sum(t.stream_caught_on is not None for t in ts) / len(ts)
        triad = sum(t.triad_caught_on is not None for t in ts) / len(ts)
        refs = sum(t.references for t in ts) / len(ts)
        weak = sum(t.weak for t in ts) / len(ts)
        out["detection"].append({"spread": spread, "loss": loss, "first_night": first,
                                 "within_3": within, "triad_within_3": triad,
                                 "references": refs, "weak": weak})
        print(f"| {_pct(spread)} | -{_pct(loss)} | {_pct(first)} | {_pct(within)} | "
              f"{_pct(triad)} | {refs:.0f} ({weak:.0f}) |")
        out["detection"][-1]["figures"] = per_figure(ts)
    print("\n| night noise | loss | STREAM figure | caught on night 1 | within 3 nights |")
    print("|---|---|---|---|---|")
    for row in out["detection"]:
        for name, (one, three) in row["figures"].items():
            print(f"| {_pct(row['spread'])} | -{_pct(row['loss'])} | {name} | {_pct(one)} | "
                  f"{_pct(three)} |")
    print("\n| night noise | stores | clean nights after capture | stores with a failing night "
          "| failing nights | before their retest |")
    print("|---|---|---|---|---|---|")
    out["false"] = []
    for spread in (0.03, 0.10):
        ts = [stores.trial(tpl, 1000 + seed, spread, 0.0, clean=args.clean, faulty=0)
              for seed in range(args.trials)]
        bad = sum(t.false_nights > 0 for t in ts)
        nights = sum(t.false_nights for t in ts)
        first = sum(t.false_before_retest for t in ts)
        out["false"].append({"spread": spread, "stores": len(ts), "clean": args.clean,
                             "stores_failing": bad, "failing_nights": nights,
                             "before_retest": first})
        print(f"| {_pct(spread)} | {len(ts)} | {args.clean} | {bad} | {nights} of "
              f"{len(ts) * args.clean} | {first} |")
    print(f"\n({time.time() - start:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
