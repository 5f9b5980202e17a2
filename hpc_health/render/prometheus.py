"""A run's figures and verdicts in Prometheus' text exposition format, for
node_exporter's textfile collector (``*.prom``): gauges only, no client
timestamps, base units in the metric names."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from hpc_health.judge import verdicts as V
from hpc_health.render import escape

#: Declared unit -> (base-unit suffix, factor to the base unit).
UNITS = {
    "us": ("seconds", 1e-6), "ms": ("seconds", 1e-3), "s": ("seconds", 1.0),
    "MB/s": ("bytes_per_second", 1e6), "GB/s": ("bytes_per_second", 1e9),
    "MiB/s": ("bytes_per_second", 1 << 20), "GiB/s": ("bytes_per_second", 1 << 30),
    "B": ("bytes", 1.0), "ops/s": ("operations_per_second", 1.0),
    "messages/s": ("messages_per_second", 1.0), "ratio": ("ratio", 1.0),
}
#: Every state a figure's verdict gauge has, one series each (1 for the state it is in).
STATES = (V.PASS, V.DEGRADED, V.IMPROVED, V.FAIL, V.NO_REFERENCE, V.SKIPPED, V.OUTLIER, V.XFAIL)


def _unit(unit: str) -> tuple[str, float]:
    if unit in UNITS:
        return UNITS[unit]
    # An undeclared unit keeps its name (made a valid metric name), unscaled.
    return re.sub(r"[^a-zA-Z0-9_]", "_", unit.replace("/", "_per_")).strip("_") or "value", 1.0


def _label(value: object) -> str:
    # One line without control characters (a name from an imported run may
    # hold any), then the format's own escapes.
    return escape.one_line(value).replace("\\", "\\\\").replace('"', '\\"')


def _labels(**kv: object) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in kv.items()) + "}"


def _num(x: float) -> str:
    return repr(float(x)) if math.isfinite(x) else ("+Inf" if x > 0 else "-Inf" if x < 0 else "NaN")


def render(site: str, run_id: str, started_s: float | None, vs: Sequence[V.Verdict],
           ahead: str = "") -> str:
    """The exposition text of one judged run; *ahead* says it is dated in
    the future.  A figure measured per node (``run --per-node``) carries
    the node as a label: one series per node, not one name for all."""
    series: dict[str, list[str]] = {}
    helps = {
        "hpc_health_run_timestamp_seconds": "When the run started (Unix time).",
        "hpc_health_run_healthy": "1 if the run was healthy (exit 0), else 0.",
        "hpc_health_verdict": "One series per state; 1 for the state the figure is in.",
        "hpc_health_mdc_ratio": "Smallest worsening the reference catches (fraction; MDC, docs/verdicts.md).",
    }

    def add(name: str, labels: str, value: float) -> None:
        series.setdefault(name, []).append(f"{name}{labels} {_num(value)}")

    run = _labels(site=site, run=run_id)
    if started_s is not None:
        add("hpc_health_run_timestamp_seconds", run, started_s)
    add("hpc_health_run_healthy", run, 0.0 if V.exit_code(vs) else 1.0)
    for v in vs:
        m = v.measurement
        labels = dict(site=site, partition=m.partition_fullname, check=m.check,
                      figure=m.variable or "", environ=m.environ)
        if m.node:
            labels["node"] = m.node
        for s in STATES:
            add("hpc_health_verdict", _labels(**labels, state=s), 1.0 if v.verdict == s else 0.0)
        if m.variable is None or m.value is None:
            continue
        suffix, factor = _unit(m.unit)
        figure = f"hpc_health_figure_{suffix}"
        helps.setdefault(figure, f"A figure's value tonight, in {suffix.replace('_', ' ')}.")
        add(figure, _labels(**labels), m.value * factor)
        if m.ref is not None:
            ref = f"hpc_health_reference_{suffix}"
            helps.setdefault(ref, f"A figure's reference value, in {suffix.replace('_', ' ')}.")
            add(ref, _labels(**labels), m.ref * factor)
        if v.mdc is not None:
            add("hpc_health_mdc_ratio", _labels(**labels), v.mdc)
    out = [f"# hpc-health: run {escape.one_line(run_id)} is {escape.one_line(ahead)}"] \
        if ahead else []
    for name, lines in series.items():
        out += [f"# HELP {name} {helps.get(name, name)}", f"# TYPE {name} gauge", *lines]
    return "\n".join(out) + "\n"
