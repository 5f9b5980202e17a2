"""What ``reference capture`` prints: each proposal as a line of a diff
against the reference file, and the summary line under them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hpc_health.store.capture import summary

if TYPE_CHECKING:
    from hpc_health.model.references import ReferenceSet


def diff_lines(old_refs: ReferenceSet | None, proposals: dict[Any, Any]) -> list[str]:
    lines = []
    for (test, names, values, var), prop in proposals.items():
        path = f"{test} {'/'.join(str(v) for v in values)} {var}"
        if "error" in prop:
            lines.append(f"! {path}: {prop['error']}")
            continue
        if "no_reference" in prop:
            lines.append(f"- {path}: no reference: {prop['no_reference']}")
            continue
        value, lower, upper, unit = prop["leaf"]
        new = f"{value:g} {unit} [{_pct(lower)}, {_pct(upper)}]"
        old = None
        if old_refs is not None:
            attrs = dict(zip(names[2:], values[2:]))
            old = old_refs.lookup(test, values[0], values[1], attrs, var)
        extra = f"(runs {len(prop['provenance']['runs'])}, samples {prop['provenance']['samples']}"
        if "mdc" in prop["provenance"]:
            extra += f", MDC {prop['provenance']['mdc']:.0%}"
        if prop.get("constant"):
            extra += ", the same value in every sample"
        if prop["provenance"].get("note"):
            extra += f"; {prop['provenance']['note']}"
        if prop.get("two_levels") and "weak" not in prop["provenance"]:
            at = prop["provenance"].get("level_runs")
            extra += (f"; judged at the worse of two levels, {prop['two_levels']}, from its "
                      f"{at} runs at it" if at else f"; samples at two levels, {prop['two_levels']}")
        extra += ")"
        if "weak" in prop["provenance"]:
            extra += f" WEAK: {prop['provenance']['weak']}"
        if old is None:
            lines.append(f"+ {path}: {new} {extra}")
        else:
            was = f"{old.value:g} {old.unit} [{_pct(old.lower)}, {_pct(old.upper)}]"
            mark = "=" if was == new else "~"
            lines.append(f"{mark} {path}: {was} -> {new} {extra}" if mark == "~"
                         else f"= {path}: {new} {extra}")
    return lines


def _pct(frac):
    return "none" if frac is None else f"{100 * frac:+.0f}%"


def summary_line(proposals: dict[Any, Any]) -> str:
    made, weak, left = summary(proposals)
    split = sum(bool(p.get("two_levels")) for p in proposals.values())
    worse = sum("levels" in p.get("provenance", {}) for p in proposals.values())
    levels = (f"; {split} of the figures with samples at two levels ({worse} judged at the "
              "worse one): the node switches between two states" if split else "")
    return (f"{made} references proposed ({weak} weak{_when_strong(proposals, weak)}; see "
            f"WEAK above), {left} figures left out (see '-' and '!' above){levels}")


def _when_strong(proposals: dict[Any, Any], weak: int) -> str:
    """How many of the weak references healthy nights make strong, and after how many."""
    later = sorted(p["strong_after"] for p in proposals.values()
                   if "weak" in p.get("provenance", {}) and p.get("strong_after"))
    if not weak:
        return ""
    if not later:
        return ", however many healthy nights"
    span = f"{later[0]}" if later[0] == later[-1] else f"{later[0]}-{later[-1]}"
    if len(later) == weak:
        return f": not weak after {span} healthy nights"
    return f": {len(later)} not weak after {span} healthy nights, {weak - len(later)} however many"


#: Baseline runs closer together than this are not nights: their spread is
#: the node's noise within the hours they took.
NIGHT_SECONDS = 20 * 3600


def span_note(starts: Sequence[str]) -> str:
    """What capture says of baseline runs taken within a night (their
    ``started`` times): their spread is the noise from run to run, not
    from night to night, and the gate's promises assume nights (newcomer
    walks 5, 7 and 8: the guest moved, between runs minutes apart, to
    states that ten minutes of baseline never saw).  Empty otherwise."""
    times = sorted(t for t in map(_when, starts) if t is not None)
    if len(times) < 2:
        return ""
    span = (times[-1] - times[0]).total_seconds()
    if span >= NIGHT_SECONDS:
        return ""
    said = f"{span / 60:.0f} minutes" if span < 7200 else f"{span / 3600:.1f} hours"
    return (f"capture: note: these {len(times)} runs span {said}, not {len(times)} nights: "
            "their spread is the noise within that time, and a night at a state they never "
            "saw (another placement of the node's cores, a busy neighbour) fails until the "
            "nights teach it; a site's baseline is its first nights")


def _when(stamp: str) -> datetime | None:
    """A run's ``started`` (ISO 8601, UTC), or None for one that is not:
    a note is not worth refusing a capture over."""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None
