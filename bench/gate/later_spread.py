"""Whose word to take for a figure's noise: its five baseline runs', or the
spread the capture judges it with (its own shrunk towards its kind's)?
The clean nights after the capture say.

For every figure whose five baseline runs spread by less than 10 % (log
SD), the figures issue 43 asks to be not weak, this bench takes the clean
nights a newcomer walk stored after its capture (docs/development.md),
each night's figure as a log deviation from the captured reference, and
asks how far they spread against the two estimates: the root mean square
of the deviations (the reference's own error divided out), and how many
nights fall beyond three spreads of each (0.3 % would for normal noise).

    python -m bench.gate.later_spread --root CLONE --store STORE [...] \\
        --json bench/gate/later_spread.json

``CLONE`` is the walk's checkout (its captured ``reference/local.yaml``,
whose provenance names the baseline runs), ``STORE`` its result store;
``--table`` prints the table again from a results file.  A
night is clean when none of its figures ran on a node named busy.  The
nights are minutes apart, not a day.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import subprocess
from pathlib import Path

import numpy as np

from hpc_health import stats
from hpc_health.judge import gating
from hpc_health.model import results
from hpc_health.stats import gate
from hpc_health.stats.constants import to_log
from hpc_health.store import capture, references

SITE = "local"
#: The five-run spread below which issue 43 asks for a reference that is not weak.
QUIET = 0.10


@functools.cache
def _figures(run_dir: Path) -> tuple[dict, bool]:
    """(key -> (unit, samples, better), whether any figure ran on a busy
    node) of a stored run."""
    out, busy = {}, False
    for m in results.measurements(results.load_report(run_dir / "report.json")):
        busy = busy or bool(m.busy)
        if m.variable is None or m.value is None or m.result in ("skip", "abort"):
            continue
        path = "/".join(str(v) for v in (m.partition_fullname, m.environ, *m.params.values()))
        out[(m.test, f"{path}/{m.variable}")] = (m.unit, m.samples or [m.value], m.better)
    return out, busy


def _logs(runs: list[Path], key: tuple[str, str]) -> list[float]:
    """The figure's log of each run that measured it."""
    out = []
    for run in runs:
        found = _figures(run)[0].get(key)
        if found is None:
            continue
        try:
            out.append(float(stats.night_logs([found[1]], found[0])[0]))
        except (ValueError, stats.NoReference):
            continue        # a run whose samples measure nothing (all 0)
    return out


def _leaf(doc: dict, test: str, path: str) -> list | None:
    node = doc.get(test)
    for part in path.split("/"):
        if not isinstance(node, dict):
            return None
        # YAML reads a parameter of 2 as the number 2, the path holds "2".
        node = next((v for k, v in node.items() if str(k) == part), None)
    return node if isinstance(node, list) else None


def walk(root: Path, store: Path) -> list[dict]:
    """One row per quiet figure: its spreads and its clean nights' deviations."""
    ref_file = root / "reference" / f"{SITE}.yaml"
    doc, refs = references.load_raw(ref_file), references.load(ref_file)
    # What a night's verdicts divide the budget by (the local site gives no weights).
    shares = gating.shares(gating.gated_families(refs))
    stored = sorted(p for p in (store / "runs" / SITE).iterdir() if (p / "report.json").exists())
    rows = []
    for test, figs in refs.provenance.items():
        for path, prov in figs.items():
            leaf, noise, key = _leaf(doc, test, path), gating.noise_of(prov), (test, path)
            if leaf is None or noise is None or not isinstance(prov.get("runs"), list):
                continue
            base = [r for r in stored if r.name in prov["runs"]]
            logs = _logs(base, key)
            if len(logs) < 5 or np.std(logs, ddof=1) >= QUIET:
                continue
            after = [r for r in stored if r.name > max(prov["runs"]) and not _figures(r)[1]]
            devs = [x - math.log(float(leaf[0])) for x in _logs(after, key)]
            if not devs:
                continue
            better = _figures(base[0])[0][key][2]
            alone = gating.noise_of({k: v for k, v in prov.items()
                                     if k not in ("prior_spread", "prior_df")})
            assert alone is not None
            worse = [d if better == stats.LOWER else -d for d in devs]
            checks = shares(test)
            rows.append({"figure": f"{test} {path}", "weak": "weak" in prov,
                         "five": float(np.std(logs, ddof=1)), "own": float(prov["night_spread"]),
                         "judged": noise.spread, "runs": noise.runs,
                         "devs": [round(d, 5) for d in devs],
                         "failed_judged": _beyond(worse, noise, checks, better),
                         "failed_own": _beyond(worse, alone, checks, better),
                         "mdc_own": gating.detection(alone, checks, gate.FALSE_ALARM_BUDGET,
                                                     better)[1],
                         "mdc": float(prov.get("mdc") or math.nan)})
    return rows


def _beyond(worse: list[float], noise: gating.Noise, checks: float, better: str) -> int:
    """Nights beyond the one-night bound the gate would enforce with *noise*."""
    b = to_log(gating.bound(noise, checks, gate.FALSE_ALARM_BUDGET, better), better)
    return sum(w > b for w in worse)


def _row_line(rows: list[dict], name: str) -> str:
    if not rows:
        return f"| {name} | 0 | | | | | | | | | |"
    q = [math.sqrt(1.0 + 1.0 / r["runs"]) for r in rows]
    later = [math.sqrt(float(np.mean(np.square(r["devs"])))) / qi for r, qi in zip(rows, q)]
    nights = sum(len(r["devs"]) for r in rows)

    def beyond(key: str) -> str:
        n = sum(int(np.sum(np.abs(r["devs"]) > 3.0 * r[key] * qi)) for r, qi in zip(rows, q))
        return f"{n} ({n / nights:.0%})"

    def failed(key: str) -> str:
        return f"{sum(r[key] for r in rows)} ({sum(r[key] > 0 for r in rows)} figures)"

    def med(xs: list[float]) -> str:
        return f"{100 * float(np.median(xs)):.1f} %"

    return (f"| {name} | {len(rows)} | {nights} | {med([r['own'] for r in rows])} | "
            f"{med([r['judged'] for r in rows])} | {med(later)} | {beyond('own')} | "
            f"{beyond('judged')} | {failed('failed_own')} | {failed('failed_judged')} | "
            f"{sum(r['mdc_own'] <= capture.MAX_MDC for r in rows)} |")


def table(results: dict) -> str:
    """The Markdown table of a results file (``--json``), as the README holds it."""
    rows = results["rows"]
    return "\n".join([
        f"{'; '.join(results['walks'])}: their clean nights read at {results['code']}.",
        "",
        "| figures whose five runs spread < 10 % | figures | clean nights | own spread "
        "(median) | judged with | clean nights' spread | beyond 3 own spreads | beyond 3 "
        "judged | beyond the one-night bound of its own spread | of the judged | not weak "
        "with its own spread alone |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        _row_line([r for r in rows if r["weak"]], "weak at capture"),
        _row_line([r for r in rows if not r["weak"]], "not weak")])


def _commit(where: Path) -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=where).stdout.strip() or "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, action="append", default=[],
                    help="a walk's checkout (repeat with --store for several walks)")
    ap.add_argument("--store", type=Path, action="append", default=[])
    ap.add_argument("--label", action="append", default=[],
                    help="what to call each walk (default: its checkout's name)")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--table", type=Path, help="print the table of a results file")
    ap.add_argument("--figures", action="store_true", help="one line per weak figure too")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return 0
    if not args.root or len(args.root) != len(args.store):
        ap.error("give one --store for each --root")
    rows = []
    for root, store in zip(args.root, args.store):
        for r in walk(root, store):
            rows.append({**r, "walk": root.name})
            if args.figures and r["weak"]:
                print(f"{root.name}: {r['figure']}: five runs {100 * r['five']:.1f} %, judged "
                      f"{100 * r['judged']:.1f} % (MDC {r['mdc']:.0%}; its own spread alone: "
                      f"{r['mdc_own']:.0%}), nights {len(r['devs'])}")
    results = {"code": _commit(Path(__file__).parent),
               "walks": [f"{label} (captured at {_commit(r)})" for r, label in
                         zip(args.root, args.label + [r.name for r in args.root][len(args.label):])],
               "rows": rows}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
