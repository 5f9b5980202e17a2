"""The pure-Python half of the fault-injection proof: the statistics exactly as
the product applies them, the night schedule, the calibration step and the
results table.  No processes, no root; ``tests/test_fault_injection.py``
exercises it.
"""

from __future__ import annotations

import json
import math
from statistics import median

from hpc_health import stats

from .workloads import Metric

CLEAN = "clean"
#: nominal degradations: name -> fraction worse
SIZES = {"10%": 0.10, "25%": 0.25}
#: detection targets from the issue
TARGET_LARGE = 0.95          # ~25 %: DEGRADED in >= 95 % of trials
TARGET_SMALL = 0.80          # ~10 %: >= 80 %, where MDC <= 10 %
SMALL_MDC_LIMIT = 0.10
TARGET_FALSE_ALARMS = 0.01   # over all verdicts of the clean nights


def worse_by(value, ref, direction):
    """Fraction by which ``value`` is worse than ``ref`` (negative: better),
    as VerdictResult.worse_by counts it."""
    dev = (value - ref) / ref
    return dev if direction == stats.LOWER else -dev


def log_worse(value, ref, direction):
    d = math.log(value) - math.log(ref)
    return d if direction == stats.LOWER else -d


def from_log_worse(x, direction):
    return math.expm1(x) if direction == stats.LOWER else -math.expm1(-x)


# --- schedule ------------------------------------------------------------------

def schedule(n_clean, trials, sizes=tuple(SIZES)):
    """Order of the nights after the baseline: faulty nights of every size
    alternate (a size is never measured in one block), and the clean nights
    are spread evenly between them, so slow drift and episodes hit clean and
    faulty nights alike instead of passing for a detection.  With as many
    clean as faulty nights this is strictly clean/faulty/clean/faulty."""
    faulty = []
    for i in range(trials):
        # ABBA within each pair of rounds: neither size always comes first
        faulty += list(sizes) if i % 2 == 0 else list(reversed(sizes))
    n_f = len(faulty)
    out, fi = [], 0
    for c in range(n_clean):
        # faulty nights due before clean night c (even spreading)
        due = round((c + 1) * n_f / (n_clean + 1)) if n_clean else n_f
        while fi < due:
            out.append(faulty[fi])
            fi += 1
        out.append(CLEAN)
    out += faulty[fi:]
    return out


def interleave(trials, baseline):
    """``baseline`` nights spread evenly through ``trials``, each in the
    middle of its share of the block, so the reference is drawn from the
    same stretch of the machine's life as the nights it judges: a level that
    drifts over the block moves both."""
    n, nb = len(trials), len(baseline)
    # trial nights that go before baseline night j
    before = [int((j + 0.5) * n / nb) for j in range(nb)]
    out, bi = [], 0
    for ti in range(n + 1):
        while bi < nb and before[bi] <= ti:
            out.append(baseline[bi])
            bi += 1
        if ti < n:
            out.append(trials[ti])
    return out


# --- calibration step ---------------------------------------------------------------

def next_strength(points, target, s_min, s_max, slope=1.0):
    """Next fault strength to try, from (strength, induced fraction) pairs.

    Assumes the induced change grows like a power of the strength and fits
    that power through the two points nearest the target (clamped to
    0.3-3, so one noisy point cannot send the search far away); with one
    point the power is ``slope``.  A point with no measurable effect doubles
    the strength.  Returns None when the search cannot get closer (already
    at the bound it would need to cross).
    """
    good = [(s, e) for s, e in points if s > 0 and e > 0.005]
    if not good:
        s = 2 * max(s for s, _ in points)
    else:
        good.sort(key=lambda p: abs(math.log(p[1] / target)))
        s0, e0 = good[0]
        p = slope
        if len(good) >= 2:
            s1, e1 = good[1]
            if s1 != s0 and e1 != e0 and (s1 - s0) * (e1 - e0) > 0:
                p = math.log(e1 / e0) / math.log(s1 / s0)
        p = min(3.0, max(0.3, p))
        s = s0 * (target / e0) ** (1.0 / p)
    s = min(s_max, max(s_min, s))
    if any(abs(s - q) <= 1e-9 * max(1.0, abs(q)) for q, _ in points):
        return None
    return s


def best_point(points, target):
    return min(points, key=lambda p: abs(math.log(max(p[1], 1e-4) / target)))


def fit_strength(points, target, s_min, s_max):
    """Strength for ``target`` from a least-squares power law through all
    tries, or None when they do not support one.

    One try is one clean/faulty pair, as noisy as a single run; a fit through
    all of them averages that noise, where keeping the single closest try
    would keep its luck.  Only interpolation (and a little beyond the tried
    range) is trusted.
    """
    good = [(math.log(s), math.log(e)) for s, e in points if s > 0 and e > 0.01]
    if len({x for x, _ in good}) < 2:
        return None
    xs, ys = zip(*good)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    p = sum((x - mx) * (y - my) for x, y in good) / sxx
    if not 0.3 <= p <= 3.0:
        return None
    s = math.exp(mx + (math.log(target) - my) / p)
    lo, hi = min(math.exp(x) for x in xs), max(math.exp(x) for x in xs)
    if not lo / 1.5 <= s <= hi * 1.5:
        return None
    return min(s_max, max(s_min, s))


# --- verdicts ---------------------------------------------------------------

def reference_for(baseline_nights, metric):
    """The product's reference from the baseline nights of one metric."""
    runs = [night["values"][metric.name] for night in baseline_nights]
    return stats.propose_reference(runs, metric.unit, metric.direction)


def promised_mdc(ref, direction, k, n_metrics=1, alpha=stats.ALPHA):
    """The MDC a night of ``k`` samples will report against ``ref``, known
    before any faulty night is run (the MDC does not depend on the night's
    values, only on the reference, ``k`` and the Holm family size)."""
    res = stats.verdict(ref, [ref.value] * max(1, k), direction, alpha / max(1, n_metrics))
    return res.mdc


def sizes_to_trial(mdc, sizes=SIZES):
    """({size: nominal} worth trialling, {size: promised MDC} not trialled).

    A small size is only claimed where the MDC is at most SMALL_MDC_LIMIT;
    where the baseline already promises more, its trials could not change
    the table's answer ("not claimed") and would only cost machine time.
    """
    run, skip = {}, {}
    for size, nominal in sizes.items():
        if nominal < 0.2 and mdc is not None and mdc > SMALL_MDC_LIMIT:
            skip[size] = mdc
        else:
            run[size] = nominal
    return run, skip


def judge(refs, metrics, values, alpha=stats.ALPHA):
    """All verdicts of one night, Holm-corrected across its metrics as the
    product's judge_all does; {metric: summary dict}."""
    items = [(refs[m.name], values[m.name], m.direction) for m in metrics]
    out = {}
    for m, res in zip(metrics, stats.decide_many(items, alpha)):
        out[m.name] = {"verdict": res.verdict, "value": res.value, "worse_by": res.worse_by,
                       "p": res.p_worse, "mdc": res.mdc, "bound": res.bound}
    return out


def rejudge(results, alpha=stats.ALPHA):
    """The same nights judged again by the current statistics: references
    re-proposed from each fault's baseline nights, every trial night's
    verdicts and the promised MDC recomputed.  The measurements are untouched,
    so a change to the statistics can be weighed on nights already recorded
    (in-sample: fresh nights are the proof).  Returns a new results dict."""
    out = json.loads(json.dumps(results))
    for fault in out.get("faults", {}).values():
        baseline = [n for n in fault.get("nights", []) if n.get("phase") == "baseline"]
        if fault.get("status") != "ok" or not baseline:
            continue
        metrics = [Metric(**m) for m in fault["metrics"]]
        refs = {m.name: reference_for(baseline, m) for m in metrics}
        fault["reference"] = {k: r.to_dict() for k, r in refs.items()}
        for n in fault["nights"]:
            if n.get("phase") == "trial":
                n["verdicts"] = judge(refs, metrics, n["values"], alpha)
        primary = next(m for m in metrics if m.name == fault["primary"])
        mdc = promised_mdc(refs[primary.name], primary.direction, fault["samples"],
                           len(metrics), alpha)
        fault["promised_mdc"] = mdc
        fault["estimator"] = stats.ESTIMATOR
        if fault.get("not_trialled"):
            fault["not_trialled"] = {size: mdc for size in fault["not_trialled"]}
    out.setdefault("meta", {})["rejudged"] = {"estimator": stats.ESTIMATOR}
    return out


# --- summary -------------------------------------------------------------------

#: What judged records written before faults carried ``estimator``: each
#: run's figure was then the median of its samples.
LEGACY_ESTIMATOR = "median"


def estimator_of(fault):
    return fault.get("estimator", LEGACY_ESTIMATOR)


def _rate(k, n):
    return k / n if n else None


def summarize_fault(fault):
    """Rows (one per size and metric) and the clean-night false alarms of one
    fault record, from its nights only, so a table can always be rebuilt
    from the JSON."""
    metrics = fault["metrics"]
    nights = [n for n in fault.get("nights", []) if n.get("phase") == "trial"]
    clean = [n for n in nights if n["kind"] == CLEAN]
    clean_verdicts = [n["verdicts"][m["name"]]["verdict"] for n in clean for m in metrics]
    false_alarms = sum(v == stats.DEGRADED for v in clean_verdicts)
    fa = {"clean_nights": len(clean), "verdicts": len(clean_verdicts),
          "degraded": false_alarms, "rate": _rate(false_alarms, len(clean_verdicts)),
          "reruns": fault.get("reruns", 0),
          "loaded": sum(bool(n.get("loaded")) for n in nights)}
    rows = []
    for size, nominal in SIZES.items():
        faulty = [n for n in nights if n["kind"] == size]
        if not faulty:
            continue
        for m in metrics:
            name, direction = m["name"], m["direction"]
            hits = sum(n["verdicts"][name]["verdict"] == stats.DEGRADED for n in faulty)
            # each night's figure as the verdict saw it, then the median night
            clean_med = (median([stats.location(n["values"][name]) for n in clean])
                         if clean else None)
            faulty_med = median([stats.location(n["values"][name]) for n in faulty])
            mdcs = [n["verdicts"][name]["mdc"] for n in nights
                    if n["verdicts"][name]["mdc"] is not None]
            mdc = median(mdcs) if mdcs else None
            row = {
                "fault": fault["name"], "size": size, "nominal": nominal,
                "metric": name, "primary": name == fault.get("primary"),
                "trials": len(faulty), "detected": hits,
                "detection_rate": _rate(hits, len(faulty)),
                "induced": (worse_by(faulty_med, clean_med, direction)
                            if clean_med else None),
                "mdc": mdc,
                "knob": (fault.get("calibration", {}).get(size) or {}).get("knob"),
                "false_alarm_rate": fa["rate"],
            }
            row["target"] = target_status(row)
            rows.append(row)
    for size, mdc in (fault.get("not_trialled") or {}).items():
        rows.append({
            "fault": fault["name"], "size": size, "nominal": SIZES[size],
            "metric": fault.get("primary"), "primary": True, "trials": 0, "detected": 0,
            "detection_rate": None, "induced": None, "mdc": mdc, "knob": None,
            "false_alarm_rate": fa["rate"],
            # an interleaved baseline can end up promising more than the pilot did
            "target": (f"not claimed (MDC {_pct(mdc)} > 10 %), not trialled"
                       if mdc is None or mdc > SMALL_MDC_LIMIT
                       else "NOT met: not trialled (the pilot promised an MDC above 10 %)")})
    rows.sort(key=lambda r: SIZES[r["size"]])
    return rows, fa


def target_status(row):
    rate = row["detection_rate"]
    if row["nominal"] >= 0.2:
        return "met" if rate is not None and rate >= TARGET_LARGE else "NOT met"
    if row["mdc"] is not None and row["mdc"] > SMALL_MDC_LIMIT:
        return f"not claimed (MDC {_pct(row['mdc'])} > 10 %)"
    return "met" if rate is not None and rate >= TARGET_SMALL else "NOT met"


def summarize(results):
    rows, total_v, total_d, total_n, skipped = [], 0, 0, 0, []
    reruns = loaded = 0
    by_fault = {}
    for name, fault in results.get("faults", {}).items():
        if fault.get("status") != "ok":
            skipped.append((name, fault.get("reason", fault.get("status"))))
            continue
        r, fa = summarize_fault(fault)
        by_fault[name] = fa
        rows += r
        total_v += fa["verdicts"]
        total_d += fa["degraded"]
        total_n += fa["clean_nights"]
        reruns += fa["reruns"]
        loaded += fa["loaded"]
    return {"rows": rows, "skipped": skipped, "reruns": reruns, "loaded": loaded,
            "false_alarms_by_fault": by_fault,
            "false_alarms": {"clean_nights": total_n, "verdicts": total_v,
                             "degraded": total_d, "rate": _rate(total_d, total_v),
                             "target": ("met" if total_n >= 30 and total_v
                                        and total_d / total_v <= TARGET_FALSE_ALARMS
                                        else "NOT met")}}


def _pct(x, digits=1):
    if x is None:
        return "–"
    if abs(x) >= 10:
        return f"{'>' if x > 0 else '<-'}1000 %"   # beyond any figure worth reading
    return f"{100 * x:.{digits}f} %"


def _samples_text(fault, default_k):
    k = fault.get("samples", default_k)
    rounds = fault.get("rounds") or 1
    text = f"{k}" if rounds == 1 else f"{k} in {rounds} rounds"
    # records before the option were all baseline-first
    if fault.get("baseline_placement") == "interleaved":
        text += ", baseline interleaved"
    return text


def _knob_text(knob):
    if not knob:
        return "–"
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in knob.items())


def render_table(results):
    """Markdown table of the measured results (README section)."""
    s = summarize(results)
    lines = [
        "| fault | metric | samples/run | run figure | nominal | measured change | fault setting | "
        "trials | detected | false alarms (clean) | MDC | target |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    default_k = (results.get("meta", {}).get("options") or {}).get("samples")
    for r in s["rows"]:
        fault, fa = results["faults"][r["fault"]], s["false_alarms_by_fault"][r["fault"]]
        metric = r["metric"] + ("" if r["primary"] else " (secondary)")
        lines.append(
            f"| {r['fault']} | {metric} | {_samples_text(fault, default_k)} | "
            f"{estimator_of(fault)} | {r['size']} | {_pct(r['induced'])} | "
            f"{_knob_text(r['knob'])} | {r['trials']} | "
            f"{r['detected']}/{r['trials']} = {_pct(r['detection_rate'], 0)} | "
            f"{fa['degraded']}/{fa['verdicts']} = {_pct(fa['rate'])} | "
            f"{_pct(r['mdc'])} | {r['target']} |")
    fa = s["false_alarms"]
    lines.append("")
    lines.append(f"False alarms over all clean nights: {fa['degraded']} DEGRADED of "
                 f"{fa['verdicts']} verdicts in {fa['clean_nights']} clean nights = "
                 f"{_pct(fa['rate'], 2)} (target ≤ 1 % over ≥ 30 clean runs: {fa['target']}).")
    lines.append(f"Runs discarded and re-run because other processes used the CPUs: "
                 f"{s['reruns']}; runs kept although loaded (re-runs exhausted): {s['loaded']}.")
    for name, why in s["skipped"]:
        lines.append(f"Not measured: `{name}`: {why}.")
    return "\n".join(lines)


def render_summary(results, labels=None):
    """The short table for the project README: the ~25 % size of every fault,
    its primary metric only, with the false-alarm line.  ``labels``: fault
    name -> what the row says instead of the name."""
    s = summarize(results)
    labels = labels or {}
    lines = ["| fault (25 % nominal) | samples/run | run figure | measured change | detected | "
             "MDC | target |",
             "|---|---|---|---|---|---|---|"]
    default_k = (results.get("meta", {}).get("options") or {}).get("samples")
    for r in s["rows"]:
        if r["size"] != "25%" or not r["primary"]:
            continue
        fault = results["faults"][r["fault"]]
        lines.append(
            f"| {labels.get(r['fault']) or r['fault']}: `{r['metric']}` | "
            f"{_samples_text(fault, default_k)} | "
            f"{estimator_of(fault)} | {_pct(r['induced'], 0)} | {r['detected']}/{r['trials']} | "
            f"{_pct(r['mdc'], 0)} | {r['target']} |")
    fa = s["false_alarms"]
    lines.append("")
    lines.append(f"False alarms: {fa['degraded']} `DEGRADED` in {fa['verdicts']} verdicts over "
                 f"{fa['clean_nights']} clean runs ({_pct(fa['rate'], 2)}; target ≤ 1 %: "
                 f"{fa['target']}).")
    return "\n".join(lines)


def render_text(results):
    """Plain per fault and size listing for the terminal."""
    s = summarize(results)
    out = []
    for r in s["rows"]:
        out.append(f"{r['fault']:<14} {r['size']:>4} {r['metric']:<24} trials {r['trials']:>3}  "
                   f"detection {_pct(r['detection_rate'], 0):>6}  "
                   f"false-alarm {_pct(r['false_alarm_rate']):>7}  MDC {_pct(r['mdc']):>7}  "
                   f"induced {_pct(r['induced']):>7}  {r['target']}")
    fa = s["false_alarms"]
    out.append(f"clean nights {fa['clean_nights']}, verdicts {fa['verdicts']}, DEGRADED "
               f"{fa['degraded']} = {_pct(fa['rate'], 2)} ({fa['target']})")
    out.append(f"re-run because of foreign load: {s['reruns']}; kept although loaded: "
               f"{s['loaded']}")
    for name, why in s["skipped"]:
        out.append(f"not measured: {name}: {why}")
    return "\n".join(out)
