#!/usr/bin/env python3
"""The nightly drift test on recorded noise: how often it raises a false
``DRIFTING`` and what it finds, by simulation.

Healthy nights are made from the recorded 30-run series in
``tests/data/noise`` (nine series, real measurements on this kind of
machine) by the stationary block bootstrap: runs are drawn in blocks of
geometric length (mean ``--block``, default 5), so the episodes of the
recordings (5 runs of 8 B latency at 2.6x, halves of a series 12-15 % apart)
survive into the simulated nights.  One simulated series draws from one
recording.  For comparison the same is measured on independent lognormal
nights (the model of issue 27's synthetic year).  Each simulated night runs
the product's test, :func:`hpc_health.stats.stepscan.scan`, on the last 60
nights, as ``hpc-health run`` does.

- **false alarms**: healthy series of 365 nights per recording, scanned every
  night: the nights on which a new alarm starts, against the budget of one
  in 4 500 figure-nights;
- **detection**: steps of 5 % and 10 % after 30 healthy nights, each series
  scaled so that its nights have the stated spread (robust standard
  deviation of log values): on how many series ``DRIFTING`` appears within 5
  and within 10 nights of the step, and how many of those name the step's
  night within one night.

::

    python bench/drift/calibrate.py              # about a minute on 2 cores
    python bench/drift/calibrate.py --quick      # fewer series, for a look
    python bench/drift/calibrate.py --normal-limits   # stepscan.NORMAL_LIMITS' source

Results go to ``bench/drift/calibration.json`` (``--json``); the tables in
``bench/drift/README.md`` are made from it by ``bench/drift/table.py``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hpc_health.stats import stepscan  # noqa: E402
from hpc_health.stats.constants import MAD_TO_SIGMA  # noqa: E402

NOISE = ROOT / "tests" / "data" / "noise"
WORSE_UP = {"us": True, "s": True}            # times: higher is worse
WINDOW = 60                                   # hpc_health.judge.drift.DRIFT_NIGHTS
CLEAN = 30                                    # healthy nights before a step


def recordings() -> dict[str, np.ndarray]:
    """Each recorded series as log values signed so that up is worse,
    centred on its median."""
    out = {}
    for path in sorted(NOISE.glob("*.csv")):
        with open(path) as fp:
            rows = list(csv.DictReader(fp))
        v = np.log([float(r["value"]) for r in rows])
        if not WORSE_UP.get(rows[0]["unit"], False):
            v = -v
        out[path.stem] = v - np.median(v)
    return out


def healthy(model: str, sources: dict, n_series: int, nights: int, block: float,
            rng: np.random.Generator) -> np.ndarray:
    """*n_series* healthy series of log values (up = worse): resampled from
    one recording (*model* its name, or ``recorded`` for any of them, one per
    series) or independent normal (``lognormal``)."""
    if model == "lognormal":
        return rng.normal(0.0, 1.0, (n_series, nights))
    names = sorted(sources) if model == "recorded" else [model]
    which = rng.integers(0, len(names), n_series)
    out = np.empty((n_series, nights))
    for k, name in enumerate(names):
        rows = np.flatnonzero(which == k)
        if rows.size:
            out[rows] = _long(sources[name], rows.size, nights, block, rng)
    return out


def _long(src: np.ndarray, count: int, nights: int, block: float, rng) -> np.ndarray:
    """Stationary bootstrap of *src* to *nights* nights (longer than src)."""
    reps = math.ceil(nights / src.size)
    tiled = np.tile(src, reps)            # circular blocks wrap around src
    out = stepscan.resample(tiled, count, rng, block)
    return out[:, :nights]


def scaled(series: np.ndarray, spread: float) -> np.ndarray:
    """Each row scaled so the robust spread of its values is *spread*."""
    med = np.median(series, axis=-1, keepdims=True)
    mad = MAD_TO_SIGMA * np.median(np.abs(series - med), axis=-1, keepdims=True)
    # a run of one printed value (0.16 us) has no MAD: its deviation, then
    scale = np.where(mad > 0, mad, np.std(series, axis=-1, keepdims=True))
    return (series - med) * spread / np.maximum(scale, 1e-9)


def nightly(values: np.ndarray, night: int):
    """The scan as the nightly run makes it on *night* (1-based): the last
    :data:`WINDOW` nights up to it; (finding, first night of the window)."""
    lo = max(0, night - WINDOW)
    return stepscan.scan(values[lo:night], "lower"), lo


def false_alarms(series: np.ndarray) -> dict:
    onsets = alarmed = 0
    for row in np.exp(series):
        was = False
        for night in range(2 * stepscan.MIN_SIDE, row.size + 1):
            now = nightly(row, night)[0] is not None
            onsets += now and not was
            alarmed += now
            was = now
    n = series.size
    return {"series": len(series), "nights": int(n), "alarm_onsets": int(onsets),
            "nights_alarmed": int(alarmed),
            "nights_per_false_alarm": round(n / onsets) if onsets else None}


def detection(series: np.ndarray, step: float, after: int = 10) -> dict:
    y = series.copy()
    y[:, CLEAN:] += math.log1p(step)
    first, located = [], 0
    for row in np.exp(y):
        for k in range(1, after + 1):
            found, lo = nightly(row, CLEAN + k)
            if found:
                first.append(k)
                located += abs(found["index"] + lo - CLEAN) <= 1
                break
    f = np.array(first)
    return {"series": len(series), "within_5": int(np.sum(f <= 5)),
            "within_10": int(np.sum(f <= 10)), "located_within_1": int(located),
            "median_nights": float(np.median(f)) if first else None}


def normal_limits(rng, series=400_000) -> dict[int, float]:
    """The (1 - 1/4500) quantile of the scan statistic on independent normal
    nights, per length: the source of stepscan.NORMAL_LIMITS (which makes
    it non-increasing and keeps fewer lengths)."""
    q = 1.0 - 1.0 / stepscan.NIGHTS_PER_FALSE_ALARM
    out = {}
    for n in (6, 7, 8, 9, 10, 12, 15, 20, 25, 30, 40, 50, 60, 100, 200, 365):
        chunk = max(2000, 2_000_000 // n)
        t = np.concatenate([stepscan.statistics(rng.normal(0.0, 1.0, (chunk, n)))[0]
                            for _ in range(max(1, series // chunk))])
        out[n] = round(float(np.quantile(t, q)), 2)
        print(f"  {n} nights: {out[n]}", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--block", type=float, default=stepscan.BLOCK_NIGHTS,
                    help="mean block length of the resampled recordings (runs)")
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--quick", action="store_true", help="fewer series, no results file")
    ap.add_argument("--normal-limits", action="store_true",
                    help="only the quantiles behind stepscan.NORMAL_LIMITS (half a minute)")
    ap.add_argument("--json", type=Path, default=Path(__file__).with_name("calibration.json"))
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    if args.normal_limits:
        normal_limits(rng)
        return 0
    sources = recordings()
    n_clean, n_det = (4, 40) if args.quick else (40, 400)
    result = {"recordings": sorted(sources), "block": args.block, "seed": args.seed,
              "budget_nights_per_false_alarm": stepscan.NIGHTS_PER_FALSE_ALARM,
              "window": WINDOW, "false_alarms": [], "detection": []}
    t0 = time.monotonic()
    print(f"false alarms: {n_clean} healthy series of 365 nights per noise", flush=True)
    for model in [*sorted(sources), "lognormal"]:
        f = false_alarms(healthy(model, sources, n_clean, 365, args.block, rng))
        f["noise"] = model
        result["false_alarms"].append(f)
        print(f"  {model:22s} {f['alarm_onsets']:3d} alarms in {f['nights']} nights "
              f"({f['nights_alarmed']} nights alarmed)", flush=True)
    total = sum(f["nights"] for f in result["false_alarms"][:-1])
    onsets = sum(f["alarm_onsets"] for f in result["false_alarms"][:-1])
    result["recorded_pooled"] = {"nights": total, "alarm_onsets": onsets,
                                 "nights_per_false_alarm": round(total / onsets) if onsets else None}
    print(f"  all recordings: {onsets} alarms in {total} nights", flush=True)
    print(f"detection: {n_det} series per noise and step, step after {CLEAN} nights", flush=True)
    for model, spread in (("recorded", 0.02), ("recorded", 0.03), ("recorded", 0.05),
                          ("lognormal", 0.03)):
        base = healthy(model, sources, n_det, CLEAN + 10, args.block, rng)
        base = scaled(base, spread)
        for step in (0.05, 0.10):
            d = detection(base, step)
            d.update(noise=model, spread=spread, step=step)
            result["detection"].append(d)
            print(f"  {model} {spread:.0%}, step {step:.0%}: within 5 nights {d['within_5']}, "
                  f"within 10 {d['within_10']} of {n_det}; its night +-1: "
                  f"{d['located_within_1']}", flush=True)
    result["seconds"] = round(time.monotonic() - t0, 1)
    print(f"{result['seconds']:.0f} s", flush=True)
    if not args.quick:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
        print(f"results: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
