"""Verdicts: what a measurement says about the machine's health.

``PASS``, ``DEGRADED`` (worse than the reference beyond its bound *and*
significantly so given the noise the reference was captured with),
``IMPROVED`` (better beyond the bound: re-baseline, not a failure), ``FAIL``
(the build, run or sanity check failed: no trustworthy figure),
``NO-REFERENCE`` (a figure nobody has said what to expect of; never a silent
pass), ``SKIPPED`` (the check could not run here; the reason is given),
``OUTLIER`` (``--per-node``: this node is worse than its peers in the same
run, see :mod:`hpc_health.judge.pernode`), ``XFAIL`` (worse, as the reference's
``$xfail`` says is known).

Only DEGRADED, FAIL and OUTLIER are failures: they make ``hpc-health run``
exit 1.
The statistics are in :mod:`hpc_health.stats`; this module maps a run's
measurements onto them, all variables of a run judged together so that false
alarms are controlled over the run, not per variable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpc_health import stats
from hpc_health.judge import gating, nights
from hpc_health.model.figures import DIRECTIONS
from hpc_health.site import hardware
from hpc_health.stats import DEGRADED, IMPROVED, NO_REFERENCE, PASS, gate  # noqa: F401

if TYPE_CHECKING:
    from hpc_health.model.references import ReferenceSet
    from hpc_health.model.results import Measurement

FAIL, SKIPPED, OUTLIER, XFAIL = "FAIL", "SKIPPED", "OUTLIER", "XFAIL"
FAILING = {DEGRADED, FAIL, OUTLIER}

# Provenance fields of a reference file that describe its noise.
_NOISE_FIELDS = ("spread", "between_run_spread", "between_run_spread_better",
                 "within_run_spread", "episode_floor", "too_noisy", "estimator")


@dataclass
class Verdict:
    measurement: Measurement
    verdict: str
    deviation: float | None = None   # (value - ref) / |ref|
    reason: str = ""
    mdc: float | None = None         # minimum detectable worsening, fraction
    p_value: float | None = None
    method: str = ""                    # "noise" | "bound-only"
    #: shown beside the verdict in the table: "below the timer's resolution",
    #: "weak reference", "3 nights, -14.0 %"
    tag: str = ""
    #: what the figure's spread rests on: "3.1 % 5+12 df 16+8"
    noise: str = ""
    #: DEGRADED by the gate's one-night rule: a retest confirms it or not
    #: (:mod:`hpc_health.judge.confirm`)
    one_night: bool = False
    #: what its retest made of a one-night failure: "confirmed", "withdrawn"
    #: (:data:`~hpc_health.judge.confirm.NOT_CONFIRMED`), "stands" (the
    #: retest measured nothing); "" when there was none
    retest: str = ""
    #: a weak reference judged by the gate: the healthy nights after which
    #: it is not weak (:func:`hpc_health.judge.gating.nights_to`), -1 when
    #: no number of nights will do; 0 when not weak or not known
    strong_after: int = 0
    #: a one-night failure: how much its loss may shrink on its retest (log)
    #: and still be confirmed (:func:`hpc_health.judge.gating.retest_shrank`)
    retest_shrink: float | None = None


def stats_reference(m: Measurement, provenance: dict[str, Any] | None = None) -> stats.Reference:
    """The measurement's reference plus the noise our reference file
    recorded beside it."""
    prov = provenance or {}
    noise = {k: prov[k] for k in _NOISE_FIELDS if k in prov}
    runs = prov.get("runs")
    if isinstance(runs, list):
        runs = len(runs)
    assert m.ref is not None, "only a measurement with a reference has one to convert"
    return stats.Reference(value=m.ref, lower=m.lower, upper=m.upper, unit=m.unit,
                           n=prov.get("samples"), runs=runs, **noise)


def _early(m):
    """Verdicts that need no reference."""
    if m.result == "skip":
        return Verdict(m, SKIPPED, reason=_first_line(m.fail_reason) or "skipped")
    if m.variable is None or (m.result in ("fail", "abort") and m.fail_phase != "performance"):
        phase = m.fail_phase or m.result
        reason = _first_line(m.fail_reason) or "failed"
        if "timed out" in reason:
            reason += (f" - a hung benchmark, or one slower than its limit: raise it with "
                       f"-S {m.test}.time_limit=… if the machine is right")
        return Verdict(m, FAIL, reason=f"{phase}: {reason}")
    if m.value is None:
        return Verdict(m, FAIL, reason=_first_line(m.fail_reason) or "no value")
    finite, dropped = stats.clean(m.samples or [m.value])
    if finite.size == 0:
        # STREAM prints inf for arrays too small to time: not a figure.
        return Verdict(m, FAIL, reason=f"no finite value ({dropped} non-finite sample(s))")
    if m.better not in DIRECTIONS:
        return Verdict(m, FAIL, reason="the check declares no direction for this figure "
                                       "(Figure.better): it cannot be judged")
    return None


def _reference(m, refs, run_hardware):
    """(reference, provenance, why there is none) for a measurement, from
    the site's reference file when there is one (both bounds: ReFrame was
    handed only the worse one), else what ReFrame applied."""
    if m.note:
        return None, {}, m.note
    if refs is None:
        return (m.ref, None), {}, None if m.ref is not None else "no reference for this figure"
    measured_on = refs.hardware.get(m.partition_fullname)
    here = (run_hardware or {}).get(m.partition_fullname)
    if measured_on and here and not hardware.same(measured_on, here):
        return None, {}, (f"reference measured on {hardware.describe(measured_on)}, "
                          f"this is {hardware.describe(here)}")
    r = refs.lookup(m.test, m.partition_fullname, m.environ, m.params, m.variable, m.unit)
    if r is None:
        return None, {}, _NONE
    m.ref, m.lower, m.upper = r.value, r.lower, r.upper
    return (r.value, r.xfail), r.provenance, None


_NONE = "no reference for this figure"


def captured_provenance(m: Measurement, refs: ReferenceSet | None) -> dict:
    """What the reference file says of this figure's capture, by the path
    ``reference capture`` writes it at: a reference's provenance, or a
    left-out figure's (its runs, and why it was left out); {} if none."""
    if refs is None:
        return {}
    path = "/".join(str(v) for v in (m.partition_fullname, m.environ, *m.params.values(),
                                      m.variable))
    return refs.provenance.get(m.test, {}).get(path) or {}


def _left_out(m: Measurement, refs: ReferenceSet | None) -> str:
    """The reference file's reason for leaving this figure out, or ''."""
    return captured_provenance(m, refs).get("no_reference", "")


def _short(reason: str) -> str:
    """The reason's first clause, for the table's verdict column."""
    return reason.split(":")[0].split(";")[0].strip()


def judge_all(measurements: Sequence[Measurement], refs: ReferenceSet | None = None,
              run_hardware: dict[str, Any] | None = None, alpha: float = stats.ALPHA,
              baseline: str | Callable[[Measurement], str] = "",
              past: Mapping[Any, list[Any]] | None = None,
              settings: Mapping[str, Any] | None = None) -> list[Verdict]:
    """Verdicts for all measurements of one run.

    *refs* (a :class:`hpc_health.model.references.ReferenceSet`) supplies both
    bounds and the noise recorded with each reference; *run_hardware*
    ({partition: hardware}) what this run ran on, so that no figure is
    judged against a reference measured on other hardware.  A figure that
    cannot be judged gets its own FAIL; the others are still judged.
    *baseline* ("baseline 2/5", or a function of the measurement giving
    it) is said of every figure without reference.  A figure the reference
    file names as left out (``no_reference``: below the timer's resolution,
    too noisy) says why instead.  A reference captured with its spread is
    judged by the gate (:mod:`hpc_health.judge.gating`) with the figure's
    *past* nights (:func:`hpc_health.judge.nights.past`) and the site's
    *settings* (``false_alarm_budget``, ``budget_weights``, ``tolerance``); older references by
    the per-run test of :func:`hpc_health.stats.decide_many`.
    """
    settings = settings or {}
    budget = float(settings.get("false_alarm_budget") or gate.FALSE_ALARM_BUDGET)
    checks = gating.shares(gating.gated_families(refs), settings.get("budget_weights"))
    label = baseline if callable(baseline) else (lambda m: baseline)
    out = [_early(m) for m in measurements]
    legacy = []     # (index, reference, provenance, xfail): judged together
    for i, m in enumerate(measurements):
        if out[i] is not None:
            continue
        found, prov, why = _reference(m, refs, run_hardware)
        if found is None or found[0] is None:
            left_out = _left_out(m, refs) if why == _NONE else ""
            if left_out:
                out[i] = Verdict(m, NO_REFERENCE, reason=left_out, tag=_short(left_out))
                continue
            reason = "; ".join(r for r in (why, label(m)) if r)
            out[i] = Verdict(m, NO_REFERENCE, reason=reason)
            continue
        out[i] = _gated(m, found[1], prov, (past or {}).get(nights.figure_key(m), []),
                        checks(m.test), budget, settings.get("tolerance"),
                        float(settings.get("reference_max_mdc") or 0.5))
        if out[i] is None:
            legacy.append((i, prov, found[1]))
    for i, v in _judged_per_run(measurements, legacy, alpha):
        out[i] = v
    for v in out:
        if v.measurement.busy and v.verdict != SKIPPED:
            # The likely cause beside the verdict: a busy node reads as a slow one.
            v.reason = "; ".join(r for r in (v.reason, v.measurement.busy) if r)
    return out


def _judged_per_run(measurements, legacy, alpha):
    """References without a captured spread, judged as before the gate: the
    per-run test with Holm's correction over them (or bounds only)."""
    items = [(stats_reference(measurements[i], prov), measurements[i].samples
              or [measurements[i].value], measurements[i].better) for i, prov, _ in legacy]
    for (i, prov, xfail), res in zip(legacy, stats.decide_many(items, alpha) if items else []):
        m = measurements[i]
        verdict, reason = res.verdict, res.reason + _rounds_note(m, prov)
        if xfail and verdict == DEGRADED:
            verdict, reason = XFAIL, f"known issue ($xfail): {xfail}; {reason}"
        elif xfail:
            reason = f"expected to fail ($xfail: {xfail}) but did not: remove the $xfail; {reason}"
        weak = prov.get("weak")
        if weak:
            reason = f"{reason}{gating.WEAK_NOTE}{weak}"
        yield i, Verdict(m, verdict, deviation=res.deviation, reason=reason, mdc=res.mdc,
                         p_value=res.p_value, method=res.method,
                         tag="weak reference" if weak else "")


def _gated(m, xfail, prov, past_nights, checks, budget, tolerances, max_mdc):
    """A figure judged by the gate, with its xfail and weak notes; None for
    a reference captured without its spread."""
    value = stats.location(m.samples or [m.value])
    tol = gating.tolerance_of(tolerances, m.test, m.variable)
    night = gating.judge_night(value, m.ref, m.better, prov, past_nights, checks, budget, tol,
                               busy=bool(m.busy), least=m.min_change)
    if night is None:
        return None
    verdict, reason = night.verdict, night.reason + _rounds_note(m, prov)
    # Tonight's enforced bound, as the table shows it (the file's is the capture's).
    m.lower, m.upper = ((-min(night.bound, 0.99), m.upper) if m.better == "higher"
                        else (m.lower, night.bound))
    if xfail and verdict == DEGRADED:
        verdict, reason = XFAIL, f"known issue ($xfail): {xfail}; {reason}"
    tag = night.tag
    strong_after = None
    if not tag and prov.get("weak") and night.mdc > max_mdc:
        # Weak until the nights it has learned from bring its MDC under;
        # said with tonight's MDC (the capture's reason is in the file).
        tag = "weak reference"
        strong_after = gating.nights_to(night.noise, checks, budget, m.better, max_mdc)
        reason = (f"{reason}{gating.WEAK_NOTE}its MDC ({night.mdc:.0%}) is above the site's "
                  f"reference_max_mdc of {max_mdc:.0%}; "
                  f"{gating.when_strong(strong_after, night.noise, max_mdc)}")
    noise = f"{100 * night.noise.spread:.1f}% {night.noise.rests_on()}"
    return Verdict(m, verdict, deviation=night.deviation, reason=reason, mdc=night.mdc,
                   p_value=night.p_value, method="gate", tag=tag, noise=noise,
                   one_night=verdict == DEGRADED and not night.tag,
                   retest_shrink=night.retest_shrink,
                   strong_after=(0 if tag != "weak reference" else
                                 -1 if strong_after is None else strong_after))


def _rounds_note(m, prov):
    """A run with fewer rounds than its reference's runs had spreads more
    than the reference expects: say so (false alarms become likelier)."""
    want = prov.get("rounds")
    if not isinstance(want, int) or m.rounds >= want:
        return ""
    return (f"; reference captured with {want} rounds, this run had {m.rounds}: "
            f"run with --rounds {want} (or the site's rounds setting)")


def node_outliers(verdicts: list[Verdict], min_change: float | None = None) -> list[Verdict]:
    """Per-node runs: name the nodes that stand out from their peers.

    A node is named for a check when it is worse than its peers on at least
    half of that check's figures: a throttled CPU or a bad DIMM hurts most of
    them, while noise on a shared machine hurts one here and there.  The check
    column names the node of every figure.
    """
    from collections import defaultdict

    from hpc_health.judge import pernode
    flagged = {id(m): (node, z, worse, peers) for m, node, z, worse, peers in
               pernode.outliers([v.measurement for v in verdicts],
                                pernode.MIN_CHANGE if min_change is None else min_change)}
    per_check = defaultdict(list)
    for v in verdicts:
        node = pernode.node_of(v.measurement)
        if node and v.measurement.variable is not None:
            per_check[(v.measurement.check, node)].append(v)
    for (check, node), vs in per_check.items():
        hits = [v for v in vs if id(v.measurement) in flagged]
        named = 2 * len(hits) >= len(vs) and hits
        for v in vs:
            v.measurement.check = f"{check} @{node}"
            if named and v in hits:
                _, z, worse, peers = flagged[id(v.measurement)]
                v.verdict = OUTLIER
                v.reason = (f"node {node} is {100 * worse:.0f}% worse than its peers "
                            f"({', '.join(peers)}; robust z {z:.1f}) on {len(hits)} of "
                            f"{len(vs)} figures")
    return verdicts


def exit_code(verdicts: Iterable[Verdict]) -> int:
    return 1 if any(v.verdict in FAILING for v in verdicts) else 0


def _first_line(text):
    text = (text or "").strip()
    return text.splitlines()[0] if text else ""
