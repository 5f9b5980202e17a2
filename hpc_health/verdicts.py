"""Verdicts: what a measurement says about the machine's health.

``PASS``, ``DEGRADED`` (worse than the reference beyond its bound),
``IMPROVED`` (better beyond the bound: re-baseline, not a failure), ``FAIL``
(the build, run or sanity check failed: no trustworthy figure),
``NO-REFERENCE`` (a figure nobody has said what to expect of; never a silent
pass), ``SKIPPED`` (the check could not run here; the reason is given).

Only DEGRADED and FAIL are failures: they make ``hpc-health run`` exit 1.
"""

from dataclasses import dataclass
from typing import Optional

from hpc_health.stats import direction_of

PASS, DEGRADED, IMPROVED, FAIL, NO_REFERENCE, SKIPPED = (
    "PASS", "DEGRADED", "IMPROVED", "FAIL", "NO-REFERENCE", "SKIPPED")
FAILING = {DEGRADED, FAIL}


@dataclass
class Verdict:
    measurement: object
    verdict: str
    deviation: Optional[float] = None   # (value - ref) / |ref|
    reason: str = ""


def judge(m):
    """Verdict of one measurement against the bounds ReFrame applied."""
    if m.result == "skip":
        return Verdict(m, SKIPPED, reason=m.fail_reason or "skipped")
    if m.variable is None or (m.result in ("fail", "abort") and m.fail_phase != "performance"):
        phase = m.fail_phase or m.result
        return Verdict(m, FAIL, reason=f"{phase}: {_first_line(m.fail_reason)}")
    if m.value is None:
        return Verdict(m, FAIL, reason="no value")
    if m.ref is None:
        return Verdict(m, NO_REFERENCE, reason="no reference for this variable")
    deviation = (m.value - m.ref) / abs(m.ref)
    low = None if m.lower is None else m.ref + abs(m.ref) * m.lower
    high = None if m.upper is None else m.ref + abs(m.ref) * m.upper
    below = low is not None and m.value < low
    above = high is not None and m.value > high
    if not (below or above):
        return Verdict(m, PASS, deviation)
    worse = direction_of(m.variable, m.unit)
    degraded = above if worse == "lower" else below
    if degraded:
        return Verdict(m, DEGRADED, deviation, "outside the reference bounds, worse")
    return Verdict(m, IMPROVED, deviation, "outside the reference bounds, better: re-baseline?")


def exit_code(verdicts):
    return 1 if any(v.verdict in FAILING for v in verdicts) else 0


def _first_line(text):
    text = (text or "").strip()
    return text.splitlines()[0] if text else "failed"
