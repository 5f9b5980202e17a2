"""``hpc-health reference capture``: propose references from measured runs.

value = location (Huber M-estimate) of all samples of all runs; bounds from
the observed noise (:func:`hpc_health.judge.stats.propose_reference`: between-run
episodes included, clamped to a documented floor and cap).  The proposal is
printed as a diff; the file is written only with ``--write``, atomically, and
only after the new content has been validated by the same loader every run
uses.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hpc_health.errors import ConfigError
from hpc_health.judge import results, stats
from hpc_health.site import hardware
from hpc_health.store import references

if TYPE_CHECKING:
    from hpc_health.store.references import ReferenceSet


def _round(x, digits=4):
    if x is None:
        return None
    return float(f"{x:.{digits}g}")


def collect(run_dirs: Sequence[Path], partition: str | None = None) -> dict[Any, Any]:
    """Samples per reference key over the given stored runs.

    Key: (test, index names, index values, variable); the index is
    ``[$partition, $environ, <parameters in display order>]``.
    """
    found: dict[Any, Any] = OrderedDict()
    for run_dir in run_dirs:
        report = results.load_report(run_dir / "report.json")
        for m in results.measurements(report):
            if m.variable is None or m.value is None or m.result in ("skip", "abort"):
                continue
            if m.result == "fail" and m.fail_phase != "performance":
                continue
            if partition and m.partition != partition:
                continue
            names = ("$partition", "$environ", *m.params)
            values = (m.partition_fullname, m.environ, *m.params.values())
            key = (m.test, names, values, m.variable)
            entry = found.setdefault(key, {"unit": m.unit, "better": m.better, "runs": [],
                                           "samples_by_run": [], "busy_by_run": []})
            entry["runs"].append(run_dir.name)
            entry["samples_by_run"].append(m.samples or [m.value])
            entry["busy_by_run"].append(m.busy_share)
    return found


#: Default of the site setting ``reference_max_mdc``.
MAX_MDC = 0.5


def propose(found: dict[Any, Any], stack_hashes: Sequence[str | None] = (),
            rounds: Sequence[int] = (), max_mdc: float = MAX_MDC) -> dict[Any, Any]:
    """Proposals per key; ``rounds``: the rounds of each chosen run, recorded
    because a run's spread depends on them (a reference captured with 4
    rounds is too tight for a nightly run with 1).

    A figure that measures nothing (below its timer's resolution) or whose
    healthy runs alone vary beyond the cap gets no reference, with the
    reason; one whose MDC is above ``max_mdc`` gets its reference marked
    ``weak``, with the baseline runs that would bring it under.  The MDC is
    that of a run judging all the figures found (Holm over that family).
    """
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    proposals: dict[Any, Any] = OrderedDict()
    family = max(1, len(found))
    for key, entry in found.items():
        test, names, values, var = key
        entry, busy_note = _without_busy_runs(entry)
        prov = {"captured": now, "runs": sorted(set(entry["runs"])),
                "samples": int(sum(len(s) for s in entry["samples_by_run"]))}
        if busy_note:
            prov["note"] = busy_note
        try:
            ref = stats.propose_reference(entry["samples_by_run"], entry["unit"],
                                          entry["better"], family=family)
        except stats.NoReference as err:
            proposals[key] = {"no_reference": str(err), "provenance": prov}
            continue
        except ValueError as err:
            proposals[key] = {"error": str(err)}
            continue
        if ref.too_noisy:
            proposals[key] = {"no_reference": f"{ref.note.split(';')[0]}; more runs do not "
                                              "narrow it (it is the runs' own spread): more "
                                              "samples per run (rounds) or a quieter "
                                              "partition would",
                              "provenance": prov}
            continue
        enforced = ref.upper if entry["better"] == stats.LOWER else -(ref.lower or 0.0)
        if enforced is not None and enforced >= MAX_ENFORCED[entry["better"]]:
            need = stats.runs_for_mdc(ref, entry["better"], max_mdc, family)
            more = (f"{need - (ref.runs or 0)} more baseline runs ({need} in all) would bring "
                    f"it to {max_mdc:.0%}" if need else "more runs alone would not")
            proposals[key] = {"no_reference": f"cannot gate: from {ref.runs} run(s) of "
                                              f"{prov['samples']} sample(s) the test flags "
                                              f"only a change of {enforced:.0%} or more; {more}",
                              "provenance": prov}
            continue
        for name in ("spread", "between_run_spread", "between_run_spread_better",
                     "within_run_spread", "episode_floor", "mdc"):
            value = getattr(ref, name)
            if value is not None:
                prov[name] = _round(value)
        prov["estimator"] = ref.estimator
        if ref.mdc is not None and ref.mdc > max_mdc:
            prov["weak"] = weak_reason(ref, entry["better"], max_mdc, family)
        used = sorted(set(rounds))
        if used and used != [1]:
            prov["rounds"] = used[0] if len(used) == 1 else used
        stacks = sorted(set(h for h in stack_hashes if h))
        if stacks:
            prov["stack"] = ",".join(stacks)
        proposals[key] = {"leaf": [_round(ref.value, 6), _round(ref.lower), _round(ref.upper),
                                   entry["unit"]], "provenance": prov,
                          "constant": len({x for r in entry["samples_by_run"] for x in r}) == 1}
    return proposals


#: The widest bound a captured reference may need (the change the test can
#: flag at all): a tenfold change either way.  Past it a reference gates
#: nothing (one run of one sample: +10^107 %); the figure is left out with
#: the runs that would make it useful.
MAX_ENFORCED = {stats.LOWER: 9.0, stats.HIGHER: 0.9}

#: A baseline run during which other processes used this share of the node
#: or more measured them, not the machine: left out of the capture.
BUSY_SHARE = 0.5


def _without_busy_runs(entry: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The entry without the runs measured on a busy node, and what was left
    out; all of them when fewer than half the runs (or two) were quiet,
    since then there is no quiet baseline to keep."""
    busy = [b >= BUSY_SHARE for b in entry.get("busy_by_run") or []]
    quiet = busy.count(False)
    if not any(busy) or quiet < max(2, (len(busy) + 1) // 2):
        return entry, ""
    keep = [i for i, b in enumerate(busy) if not b]
    left = [entry["runs"][i] for i, b in enumerate(busy) if b]
    kept = {**entry, "runs": [entry["runs"][i] for i in keep],
            "samples_by_run": [entry["samples_by_run"][i] for i in keep]}
    return kept, (f"left out {len(left)} run(s) during which other processes used half the "
                  f"node or more: {', '.join(left)}")


def weak_reason(ref: stats.Reference, direction: str, max_mdc: float, family: int) -> str:
    """Why a reference is weak and what would make it strong enough."""
    why = (f"catches only changes of {ref.mdc:.0%} or more, above the site's "
           f"reference_max_mdc of {max_mdc:.0%}")
    need = stats.runs_for_mdc(ref, direction, max_mdc, family)
    if need is None:
        return (f"{why}; more baseline runs alone would not bring it there (the episode "
                f"floor or this figure's own noise): more samples per run (rounds) would")
    return (f"{why}; {need - (ref.runs or 0)} more baseline runs ({need} in all) would bring "
            "it there")


def hardware_of(metas: Sequence[dict[str, Any]],
                partition: str | None = None) -> dict[str, Any]:
    """{partition: hardware} the chosen runs were measured on; ConfigError
    when they disagree (one reference cannot belong to two machines)."""
    found: dict[str, Any] = {}
    for meta in metas:
        for part, hw in (meta.get("hardware") or {}).items():
            if partition and part.split(":")[-1] != partition:
                continue
            if part in found and not hardware.same(found[part], hw):
                raise ConfigError(meta.get("run_id", "?"), f"runs on {part} were measured on "
                                  f"{hardware.describe(found[part])} and on "
                                  f"{hardware.describe(hw)}: capture each machine apart")
            found.setdefault(part, hw)
    return found


def merge(data: dict[str, Any], proposals: dict[Any, Any],
          measured_on: dict[str, Any] | None = None) -> dict[str, Any]:
    """Apply proposals to the parsed reference document *data* (in place),
    with the hardware each partition's runs were measured on."""
    if measured_on:
        data.setdefault(references.HARDWARE_KEY, {}).update(measured_on)
    prov_root = data.setdefault(references.PROVENANCE_KEY, {})
    for (test, names, values, var), prop in proposals.items():
        path = "/".join(str(v) for v in values) + "/" + var
        if "no_reference" in prop:
            if _leaf(data.get(test), values, var) is None:
                # Said in every run's table instead of "no reference".
                prov_root.setdefault(test, {})[path] = {
                    **prop["provenance"], "no_reference": prop["no_reference"]}
            continue
        if "leaf" not in prop:
            continue
        section = data.setdefault(test, {})
        if section.get("$index") not in (None, list(names)):
            # A different index means a different shape: start that test anew
            # rather than mixing two layouts ReFrame would misread.
            section.clear()
            prov_root.pop(test, None)
        section["$index"] = list(names)
        node = section
        for v in values:
            node = node.setdefault(v, {})
        node[var] = prop["leaf"]
        prov_root.setdefault(test, {})[path] = prop["provenance"]
    if not prov_root:
        data.pop(references.PROVENANCE_KEY)
    # Tests first for people; what they were measured on and how, last.
    for key in (references.HARDWARE_KEY, references.PROVENANCE_KEY):
        moved = data.pop(key, None)
        if moved is not None:
            data[key] = moved
    return data


def _leaf(section, values, var):
    node = section
    for v in values:
        if not isinstance(node, dict) or v not in node:
            return None
        node = node[v]
    return node.get(var) if isinstance(node, dict) else None


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


def summary(proposals: dict[Any, Any]) -> tuple[int, int, int]:
    """(references proposed, weak among them, figures left out) of a proposal."""
    made = [p for p in proposals.values() if "leaf" in p]
    weak = sum("weak" in p["provenance"] for p in made)
    left = sum("leaf" not in p for p in proposals.values())
    return len(made), weak, left


def summary_line(proposals: dict[Any, Any]) -> str:
    made, weak, left = summary(proposals)
    return (f"{made} references proposed ({weak} weak: see WEAK above), {left} figures "
            f"left out (see '-' and '!' above)")


def write(path: Path, data: dict[str, Any]) -> None:
    """Validate, then replace atomically; the old file survives any error."""
    text = ("# References of this site, captured by `hpc-health reference capture`.\n"
            "# ReFrame 4.10's external reference format, with both bounds: the checks hand\n"
            "# ReFrame the worse one.  $hardware and $provenance are hpc-health's.\n"
            + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fp:
        fp.write(text)
        fp.flush()
        os.fsync(fp.fileno())
    try:
        references.load(tmp)
    except ConfigError:
        os.unlink(tmp)
        raise
    os.replace(tmp, path)


def load_raw(path: Path) -> dict[str, Any]:
    if not os.path.exists(path):
        return {}
    with open(path) as fp:
        return yaml.safe_load(fp) or {}


def stored_runs(site: str, texts: Sequence[str]) -> list[tuple[Path, dict[str, Any]]]:
    """(run_dir, run.json) of the runs the run sets *texts* name, of *site*
    only (references are per site), each once, oldest first."""
    from hpc_health.store import index, runsets
    chosen = {}
    with index.open_index() as idx:
        for text in texts:
            rs = runsets.resolve(idx, text, site)
            if rs.site != site:
                raise ConfigError(text, f"runs of site {rs.site!r} cannot be references of "
                                  f"site {site!r}")
            for r in rs.runs:
                chosen[r.run_id] = (r.dir, r.meta)
    return [chosen[k] for k in sorted(chosen, key=lambda k: (chosen[k][1].get("started", ""), k))]
