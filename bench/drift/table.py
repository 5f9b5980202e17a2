"""The tables of bench/drift/README.md, made from the results files of
``calibrate.py`` (simulated on recorded noise) and ``real.py`` (real nights
through ``hpc-health run``)::

    python -m bench.drift.table > /tmp/tables.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent


def _pct(part, whole):
    return f"{part}/{whole} ({100 * part / whole:.0f} %)" if whole else "–"


def calibration(res) -> list[str]:
    budget = res["budget_nights_per_false_alarm"]
    lines = [f"False alarms, healthy series of 365 nights scanned every night "
             f"(window {res['window']} nights; budget: one in {budget} figure-nights):", "",
             "| noise | figure-nights | alarms (new) | nights alarmed | one alarm in | "
             "within budget |", "|---|---:|---:|---:|---:|---|"]
    rows = res["false_alarms"] + [dict(res["recorded_pooled"], noise="all nine recordings",
                                       nights_alarmed=None)]
    for f in rows:
        every = f["nights_per_false_alarm"]
        lines.append(f"| {f['noise']} | {f['nights']} | {f['alarm_onsets']} | "
                     f"{'–' if f.get('nights_alarmed') is None else f['nights_alarmed']} | "
                     f"{every or 'none'} | {'yes' if not every or every >= budget else 'no'} |")
    lines += ["", "Steps after 30 healthy nights, the night's figure scaled to the stated "
              "spread:", "",
              "| noise | spread | step | DRIFTING within 5 nights | within 10 | "
              "its night named +-1 (of those found) |", "|---|---:|---:|---|---|---|"]
    for d in res["detection"]:
        lines.append(f"| {d['noise']} | {100 * d['spread']:.0f} % | {100 * d['step']:.0f} % | "
                     f"{_pct(d['within_5'], d['series'])} | {_pct(d['within_10'], d['series'])} "
                     f"| {_pct(d['located_within_1'], d['within_10'])} |")
    return lines


def onsets(clean) -> int:
    """New DRIFTING alarms over the clean nights, any figure: a figure named
    on a night and not on the one before."""
    before: set[str] = set()
    count = 0
    for c in clean:
        now = set(c["drifting"])
        count += len(now - before)
        before = now
    return count


def real(res) -> list[str]:
    clean = res["clean"]
    if not clean:
        return ["(real.json holds no clean nights yet)"]
    values = sorted(c["value"] for c in clean)
    # A clean-only part stopped early has no median recorded yet.
    unit, base = res["unit"], res.get("clean_median", values[len(values) // 2])
    false = f"{sum(1 for c in clean if res['figure'] in c['drifting'])} DRIFTING"
    if all("figures" in c for c in clean):
        false += (f"; every figure of the check: {sum(len(c['figures']) for c in clean)} "
                  f"figure-nights, {onsets(clean)} DRIFTING alarms")
    lo, hi = values[len(values) // 10], values[-1 - len(values) // 10]
    command = " ".join(["hpc-health run --site local --", "-n", res["check"], *res["options"]])
    held, held_text = res.get("session") or {}, ""
    if held.get("held"):
        unheld = sorted(held["unheld"])
        held_text = (f" (rate held at {held['held']} on every night, {held['held_fraction']:g} "
                     f"of the figure unheld: median {unheld[len(unheld) // 2]:.4g} {res['unit']} "
                     f"over {len(unheld)} nights)")
    lines = [f"`{command}`{held_text}, figure {res['figure']}: "
             f"{len(clean)} clean nights (median {base:.4g} {unit}, 10th-90th percentile "
             f"{lo:.4g}-{hi:.4g} {unit}; {false})"
             + (f", then per series up to {res['max_nights']} nights with {res['what']} ("
                + "; ".join(f"{100 * float(w):.0f} %: {d['setting']}"
                            + (f", measured {100 * d['change_measured']:.1f} % worse"
                               if d.get("change_measured") is not None else "")
                            for w, d in res.get("strengths", {}).items()) + ")"
                if res["series"] else "")
             + f"; {res.get('seconds') or '?'} s, {len(res.get('discarded_runs', []))} disturbed "
             "nights re-run." + (f" {res['note']}" if res.get("note") else ""), ""]
    if not res["series"]:
        return lines
    lines += ["| step wanted | series | step measured (median of each series' faulty nights, "
              "median and range over series) | DRIFTING within 5 nights | within 10 | its night "
              "named +-1 (of those found) | change named (median) |",
              "|---:|---:|---|---|---|---|---:|"]
    for worse in sorted({s["worse"] for s in res["series"]}, reverse=True):
        ss = [s for s in res["series"] if s["worse"] == worse]
        found = [s for s in ss if s["found_on"]]
        changes = sorted(s["change"] for s in found)
        med = f"{100 * changes[len(changes) // 2]:+.1f} %" if changes else "–"
        steps = sorted(_median([n["value"] for n in x["nights"]]) / base - 1 for x in ss)
        lines.append(f"| {100 * worse:.0f} % | {len(ss)} | {100 * _median(steps):+.1f} % "
                     f"({100 * steps[0]:+.1f} to {100 * steps[-1]:+.1f} %) | "
                     f"{_pct(sum(s['found_on'] <= 5 for s in found), len(ss))} | "
                     f"{_pct(len(found), len(ss))} | "
                     f"{_pct(sum(bool(s['located']) for s in found), len(found))} | {med} |")
    return lines


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def main() -> int:
    out = []
    cal = HERE / "calibration.json"
    if cal.exists():
        out += ["### Simulated on the recorded noise (calibrate.py)", ""]
        out += calibration(json.loads(cal.read_text())) + [""]
    rl = HERE / "real.json"
    if rl.exists():
        out += ["### Real nights through hpc-health run (real.py)", ""]
        parts = json.loads(rl.read_text())["parts"]
        for part in parts:
            out += real(part) + [""]
        out += [f"All parts: {sum(len(p['clean']) for p in parts)} real clean nights, "
                f"{sum(onsets(p['clean']) for p in parts)} DRIFTING alarms on any figure "
                "(the first memory part's are the host's own fall, above).", ""]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
