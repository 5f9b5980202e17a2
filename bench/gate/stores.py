"""Detection and false alarms of the default path on nightly stores made
from a real full-suite run.

One real run directory of ``hpc-health run`` (its ReFrame report and the
checks' samples: every figure of the suite, as this machine measured it) is
the template.  Each synthetic night multiplies every figure and its samples
by lognormal noise of a chosen night-to-night spread: half its variance
shared by the figures of one check (STREAM's kernels rise and fall together),
half the figure's own.  The first five nights are captured exactly as
``reference capture`` does (:func:`hpc_health.store.capture.propose`, the
file written and read back by :func:`hpc_health.store.references.load`);
every later night is judged as ``hpc-health run`` judges it
(:func:`hpc_health.judge.verdicts.judge_all` with the nights before it and
the site's default settings).  What is left out: ReFrame, and the store's
index (the nights are handed over as the index would hand them).
"""

from __future__ import annotations

import copy
import math
import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hpc_health.judge import confirm, nights, verdicts
from hpc_health.model import results
from hpc_health.store import capture, references

BASELINE = 5
STREAM = ("StreamBandwidth", "StreamTriadScaling")


def template(run_dir: Path) -> list[results.Measurement]:
    """The figures of a real run, each with its samples."""
    report = results.load_report(Path(run_dir) / "report.json")
    out = [m for m in results.measurements(report)
           if m.variable is not None and m.value and m.result not in ("skip", "abort", "fail")]
    if not out:
        raise SystemExit(f"{run_dir}: no figures in its report")
    return out


def is_stream_bandwidth(m: results.Measurement) -> bool:
    return m.test in STREAM and m.better == "higher"


def source_of(m: results.Measurement) -> tuple:
    """The measurement a figure is computed from: STREAM's per-core Triad is
    its Triad divided by the thread count, so it moves with it exactly, as
    on the machine; drawn apart, the two would count as two independent
    figures in the capture's prior and budget."""
    return (m.test, tuple(sorted(m.params.items())), m.variable.replace("_per_core", ""))


@dataclass
class Night:
    measurements: list
    run_id: str
    started: str
    common: dict


def night(tpl: list[results.Measurement], n: int, spread: float, rng: random.Random,
          loss: float = 0.0, lossy=is_stream_bandwidth, common: dict | None = None) -> Night:
    """Night *n*: every figure moved by the noise; the *lossy* ones also
    worse by *loss* (a bandwidth lower, a time longer).  *common*: the
    night's per-check part of the noise, given for its retest (which draws
    only each figure's own part again: the pessimistic side for false
    alarms, as a retest minutes later shares what the night shares)."""
    # Sorted: a set's order of strings changes with each process's hash seed,
    # and so would every draw after it.
    common = common or {t: rng.gauss(0.0, spread / math.sqrt(2))
                        for t in sorted({m.test for m in tpl})}
    own: dict = {}
    out = []
    for m in tpl:
        x = copy.copy(m)
        key = source_of(m)
        if key not in own:
            own[key] = rng.gauss(0.0, spread / math.sqrt(2))
        worse = math.exp(common[m.test] + own[key])
        if loss and lossy(m):
            worse *= 1.0 / (1.0 - loss) if m.better == "higher" else 1.0 + loss
        factor = 1.0 / worse if m.better == "higher" else worse
        x.value = m.value * factor
        x.samples = [s * factor for s in (m.samples or [m.value])]
        x.ref = x.lower = x.upper = None
        out.append(x)
    day = 1 + n
    return Night(out, f"202601{day:02d}T020000Z", f"2026-01-{day:02d}T02:00:00Z", common)


def captured(baseline: list[Night], workdir: Path) -> references.ReferenceSet:
    """The references ``reference capture --write`` makes of the nights."""
    found: dict = {}
    for nt in baseline:
        for m in nt.measurements:
            names = ("$partition", "$environ", *m.params)
            values = (m.partition_fullname, m.environ, *m.params.values())
            entry = found.setdefault((m.test, names, values, m.variable), {
                "unit": m.unit, "better": m.better, "runs": [], "samples_by_run": [],
                "busy_by_run": [], "benchmark": m.benchmark})
            entry["runs"].append(nt.run_id)
            entry["samples_by_run"].append(list(m.samples))
            entry["busy_by_run"].append(0.0)
    proposals = capture.propose(found)
    # Stamped as captured the morning after the fifth night, as a site
    # does: the gate counts a figure's nights from its capture on, and the
    # clock of today would put every synthetic night before it (neither the
    # persistence rule nor the learned spread would ever see one).
    for prop in proposals.values():
        if "captured" in (prop.get("provenance") or {}):
            prop["provenance"]["captured"] = baseline[-1].started
    path = workdir / "local.yaml"
    references.write(path, references.merge({}, proposals))
    return references.load(path)


def judged(nt: Night, refs: references.ReferenceSet, past: dict,
           retest=None) -> tuple[list[verdicts.Verdict], bool]:
    """Night *nt* judged as a run judges it, its one-night failures
    retested by ``retest()`` (a night), then added to *past*; and whether
    it failed before its retest."""
    vs = verdicts.judge_all(nt.measurements, refs, past=past, settings={})
    failed_first = any(v.verdict in verdicts.FAILING for v in vs)
    if retest is not None and confirm.wanted(vs):
        vs = confirm.combine(vs, verdicts.judge_all(retest().measurements, refs, past=past,
                                                    settings={}))
    for v in vs:
        m = v.measurement
        if v.verdict in ("PASS", "DEGRADED", "IMPROVED"):
            past.setdefault(nights.figure_key(m), []).append(
                nights.Night(nt.run_id, nt.started, float(m.value), healthy=True, counts=True,
                             failed=v.verdict == "DEGRADED"))
    return vs, failed_first


@dataclass
class Trial:
    stream_caught_on: int | None      # faulty night (1-based) a STREAM figure failed on
    triad_caught_on: int | None       # ... StreamBandwidth Triad itself
    false_nights: int                 # clean nights after capture with a failing figure
    clean_nights: int
    references: int
    weak: int
    false_before_retest: int = 0      # clean nights that failed before their retest
    #: each STREAM bandwidth's first faulty night DEGRADED (1-based), None if never
    caught: dict = field(default_factory=dict)


def trial(tpl, seed: int, spread: float, loss: float, clean: int, faulty: int,
          retest: bool = True) -> Trial:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        base = [night(tpl, n, spread, rng) for n in range(BASELINE)]
        refs = captured(base, Path(tmp))
    past: dict = {}
    false = false_first = 0
    n = BASELINE

    def tonight(lost: float):
        nt = night(tpl, n, spread, rng, lost)
        again = (lambda: night(tpl, n, spread, rng, lost, common=nt.common)) if retest else None
        return judged(nt, refs, past, again)

    for _ in range(clean):
        vs, first = tonight(0.0)
        false += any(v.verdict in verdicts.FAILING for v in vs)
        false_first += first
        n += 1
    caught: dict = {}
    for k in range(1, faulty + 1):
        vs, _ = tonight(loss)
        n += 1
        for v in vs:
            if is_stream_bandwidth(v.measurement):
                name = f"{v.measurement.test} {v.measurement.variable}"
                if caught.get(name) is None:
                    caught[name] = k if v.verdict == "DEGRADED" else None
    on = [k for k in caught.values() if k is not None]
    stream_on = min(on) if on else None
    triad_on = caught.get("StreamBandwidth Triad")
    gated = [p for t in refs.provenance.values() for p in t.values() if "night_spread" in p]
    return Trial(stream_on, triad_on, false, clean, len(gated),
                 sum("weak" in p for p in gated), false_first, caught)
