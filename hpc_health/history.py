"""Reading the store across runs: series of one variable, and two sites or
partitions side by side.  Nothing here re-runs a benchmark."""

import dataclasses

from hpc_health import changepoint, hardware, results, stats, store, verdicts


def _matches(m, check, var, partition):
    if m.variable != var or m.value is None:
        return False
    if partition and m.partition != partition:
        return False
    return check in (m.test, m.check) or m.check.startswith(check + " ")


def series(site, check, var, partition=None, runs=None):
    """[(run_id, started, check, partition, value, samples)] oldest first;
    *runs* (a :class:`hpc_health.store.Scan`) collects the damaged runs."""
    out = []
    runs = runs or store.scan(site)
    for run_dir, meta, report in runs.reports():
        for m in results.measurements(report):
            if _matches(m, check, var, partition):
                out.append({"run": run_dir.name, "started": meta.get("started", ""),
                            "check": m.check, "variable": m.variable,
                            "partition": m.partition_fullname,
                            "value": m.value, "unit": m.unit, "better": m.better,
                            "samples": m.samples or [m.value], "stack": meta.get("stack_hash"),
                            "measurement": m,
                            "hardware": (meta.get("hardware") or {}).get(m.partition_fullname)})
    return out


def reference_for(refs, point):
    """The stored reference of a series point as drift detection uses it
    (value as the healthy level, its recorded noise as the yardstick), or
    None: no reference file or entry, a known issue (``$xfail``: the level is
    known not to hold), or a reference measured on other hardware than the
    point's run (its level says nothing about this machine)."""
    if refs is None:
        return None
    m = point["measurement"]
    measured_on = refs.hardware.get(m.partition_fullname)
    if measured_on and not hardware.same(measured_on, point.get("hardware")):
        return None
    r = refs.lookup(m.test, m.partition_fullname, m.environ, m.params, m.variable)
    if r is None or r.xfail:
        return None
    # The noise fields travel in the provenance, as for the nightly verdict.
    return verdicts.stats_reference(
        dataclasses.replace(m, ref=r.value, lower=r.lower, upper=r.upper, unit=r.unit or m.unit),
        r.provenance)


def drift(points, reference=None):
    """Step degradation over one check's series, or None.  *reference* (a
    :class:`hpc_health.stats.Reference`, see :func:`reference_for`) sets the
    healthy level and, when it carries noise, the size a step must have."""
    if not points:
        return None
    direction = points[-1]["better"]
    if direction not in stats.DIRECTIONS:
        return None     # undeclared direction: never guessed
    values = [p["value"] for p in points]
    return changepoint.step_degradation(
        values, [p["started"] for p in points], direction, reference=reference,
        samples_per_night=max(1, min(len(p["samples"]) for p in points)))


def latest_measurements(site, partition=None, run_id=None, runs=None):
    """(run id, figures) of the latest readable run (or of *run_id*)."""
    runs = runs or store.scan(site)
    found = [r for r in runs.reports() if not run_id or r[0].name == run_id]
    if not found:
        return None, []
    run_dir, _, report = found[-1]
    ms = [m for m in results.measurements(report)
          if m.variable is not None and m.value is not None
          and (partition is None or m.partition == partition)]
    return run_dir.name, ms


def side_by_side(a, b):
    """Pair the figures of two runs by check and variable (sites differ in
    system, partition and environment names, so those are not matched)."""
    index = {}
    for m in b:
        index.setdefault((m.check, m.variable), m)
    rows = []
    for m in a:
        other = index.get((m.check, m.variable))
        if other is None or not m.value:
            continue
        ratio = other.value / m.value
        better = ratio > 1 if m.better == stats.HIGHER else ratio < 1
        rows.append((m.check, m.variable, m.value, other.value, m.unit, ratio,
                     "=" if abs(ratio - 1) < 0.005 else ("B better" if better else "B worse")))
    return rows
