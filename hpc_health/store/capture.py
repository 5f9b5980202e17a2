"""``hpc-health reference capture``: propose references from measured runs.

value = the mean of the runs' figures on the log scale (of a figure whose
samples fall at two levels, of the worse level's: :mod:`hpc_health.stats.levels`),
frozen until the next capture; noise = the spread of those figures, with the prior it
borrows from its kind's (or benchmark's) figures and how the check's figures
move together (:func:`hpc_health.judge.baselines.capture_family`), so
that every run judges it with the nightly gate.  The proposal is printed as
a diff; the file is written only with ``--write``, atomically, and only
after the new content has been validated by the same loader every run uses.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hpc_health import stats
from hpc_health.errors import ConfigError
from hpc_health.judge import baselines, gating
from hpc_health.model import results
from hpc_health.site import hardware
from hpc_health.stats.constants import BETTER_MAX
from hpc_health.stats.gate import FALSE_ALARM_BUDGET, PERSIST_NIGHTS, POWER
from hpc_health.stats.levels import split_as, two_levels, worse_launches
from hpc_health.store import references


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
                                           "samples_by_run": [], "busy_by_run": [],
                                           "min_change": m.min_change,
                                           "benchmark": m.benchmark})
            entry["runs"].append(run_dir.name)
            entry["samples_by_run"].append(m.samples or [m.value])
            entry["busy_by_run"].append(m.busy_share)
    return found


#: Fewest baseline runs a reference is captured from: two runs give the
#: spread one degree of freedom, and a t with one cannot promise anything.
MIN_RUNS = 3
#: Default of the site setting ``reference_max_mdc``.
MAX_MDC = 0.5


def propose(found: dict[Any, Any], stack_hashes: Sequence[str | None] = (),
            rounds: Sequence[int] = (), max_mdc: float = MAX_MDC,
            budget: float = FALSE_ALARM_BUDGET,
            weights: Mapping[str, float] | None = None,
            kept: Iterable[tuple[str, str]] = ()) -> dict[Any, Any]:
    """Proposals per key; ``rounds``: the rounds of each chosen run, recorded
    because a run's spread depends on them (a reference captured with 4
    rounds is too tight for a nightly run with 1).

    Each figure's level is the mean of its runs' figures (log scale) and its
    noise the spread of those figures, shrunk towards its kind's, or its
    benchmark's, other figures (:func:`hpc_health.judge.baselines.capture_family`).  A figure that
    measures nothing (below its timer's resolution), has one run, or whose
    runs spread so far that the gate could not catch a tenfold change gets
    no reference, with the reason; one whose MDC (a sustained loss caught by
    the persistence window's last night, under the site's
    ``false_alarm_budget``, shared between checks by ``weights``, the
    site's ``budget_weights``) is above ``max_mdc`` gets its reference marked
    ``weak``.  The MDC is the one every run prints for the figure on its
    first judged night; ``kept``: the site's gated checks (check,
    partition) this capture leaves as they are, which keep their shares.
    """
    proposals, nights, provs = _baselines(found)
    made = _gated(nights, provs, budget, max_mdc, weights, set(kept))
    for key in found:
        proposals.setdefault(key, made.get(key))
    used = sorted(set(rounds))
    stacks = sorted(set(h for h in stack_hashes if h))
    for prop in proposals.values():
        if "leaf" not in prop:
            continue
        if used and used != [1]:
            prop["provenance"]["rounds"] = used[0] if len(used) == 1 else used
        if stacks:
            prop["provenance"]["stack"] = ",".join(stacks)
    return proposals


def kept_checks(refs: references.ReferenceSet | None, found: dict[Any, Any]) -> set[Any]:
    """The site's gated checks (check, partition) a capture of *found*
    leaves as they are: they keep their shares of the budget, as the
    nightly gate counts them, so capture and run print one MDC."""
    return gating.gated_families(refs) - {gating.family_of(k[0], k[2][0]) for k in found}


def _baselines(found: dict[Any, Any]) -> tuple[dict[Any, Any], dict[Any, Any], dict[Any, Any]]:
    """(proposals of the figures left out, each other figure's baseline
    nights, their provenance so far)."""
    proposals, ready = _measured(found)
    _share_levels(ready)
    nights: dict[Any, baselines.Baseline] = OrderedDict()
    for key, (entry, _, logs, resolution, levels) in ready.items():
        run_ids, at_level, every = list(entry["runs"]), False, (list(entry["runs"]), logs)
        other: tuple = ()
        if levels is not None:
            # Judged at its worse level when the node switched between runs
            # and enough runs saw it: a night at the better one is not a
            # loss, and the worse one's own spread is what a loss beyond it
            # must clear.
            worse = levels.at_worse(entry["samples_by_run"], entry["better"])
            keep = [i for i, xs in enumerate(worse) if xs]
            switched = 2 * levels.pure_runs(entry["samples_by_run"]) > len(worse)
            if len(keep) == MIN_RUNS - 1 and switched:
                # Two runs at the worse level: its spread is pooled with the
                # better level's runs (three or more), each about its own level.
                better = levels.at_worse(entry["samples_by_run"], _opposite(entry["better"]))
                other = tuple(stats.night_logs([xs for xs in better if xs], entry["unit"]))
            if switched and (len(keep) >= MIN_RUNS or len(other) >= MIN_RUNS):
                logs = stats.night_logs([worse[i] for i in keep], entry["unit"])
                run_ids, at_level = [entry["runs"][i] for i in keep], True
            else:
                other = ()
        nights[key] = baselines.Baseline(run_ids, logs, entry["better"], entry["unit"], resolution,
                                      float(entry.get("min_change") or 0.0), levels, at_level,
                                      every if at_level else (), other,
                                      str(entry.get("benchmark") or key[0]))
    return proposals, nights, {key: ready[key][1] for key in ready}


def _measured(found: dict[Any, Any]) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """(proposals of the figures that measure nothing or have too few runs,
    each other figure's (entry without busy runs, provenance so far, run
    logs, printed step as a share of the value, its own two levels or
    None))."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    proposals: dict[Any, Any] = OrderedDict()
    ready: dict[Any, Any] = OrderedDict()
    for key, entry in found.items():
        entry, busy_note = _without_busy_runs(entry)
        prov = {"captured": now, "runs": sorted(set(entry["runs"])),
                "samples": int(sum(len(s) for s in entry["samples_by_run"]))}
        if busy_note:
            prov["note"] = busy_note
        try:
            logs = stats.night_logs(entry["samples_by_run"], entry["unit"])
        except stats.NoReference as err:
            proposals[key] = {"no_reference": str(err), "provenance": prov}
            continue
        except ValueError as err:
            proposals[key] = {"error": str(err)}
            continue
        if logs.size < MIN_RUNS:
            proposals[key] = {"no_reference": f"{logs.size} run(s): a spread from fewer than "
                                              f"{MIN_RUNS} runs promises nothing (one degree of "
                                              f"freedom at most); capture from {MIN_RUNS} or "
                                              "more (five are asked)",
                              "provenance": prov}
            continue
        allx = [x for r in entry["samples_by_run"] for x in r]
        resolution = stats.printed_step(allx) / math.exp(float(np.mean(logs)))
        ready[key] = (entry, prov, logs, resolution,
                      two_levels(entry["samples_by_run"], resolution, entry["better"]))
    return proposals, ready


def _share_levels(ready: dict[Any, Any]) -> None:
    """A figure whose samples did not show two levels on their own takes
    them from another figure of the same test case, measured in the same
    launches, that did, when its own samples bear out that split
    (:func:`split_as`): on this guest a host state moves all of STREAM's
    kernels at once, but Add's and Triad's sample noise hid the gap that
    Copy's showed (walk 17: 77 weak references, STREAM's all-core Triad among
    them at +-74 %).  The split is by launch, not by run: one launch prints
    every kernel, and a run can switch state between its launches."""
    parted: dict[Any, list[tuple[list[str], list[list[bool | None]]]]] = {}
    for key, (entry, _, _, _, levels) in ready.items():
        if levels is not None:
            parted.setdefault((key[0], key[2], entry["better"]), []).append(
                (list(entry["runs"]), worse_launches(levels, entry["samples_by_run"],
                                                     entry["better"])))
    for key, (entry, prov, logs, resolution, levels) in ready.items():
        given = parted.get((key[0], key[2], entry["better"]), []) if levels is None else []
        for runs, worse in given:
            mine = (split_as(entry["samples_by_run"], worse, entry["better"], resolution)
                    if runs == list(entry["runs"]) else None)
            if mine is not None:
                ready[key] = (entry, prov, logs, resolution, mine)
                break


def _gated(nights: dict[Any, Any], provs: dict[Any, Any], budget: float,
           max_mdc: float, weights: Mapping[str, float] | None,
           kept: set[tuple[str, str]]) -> dict[Any, Any]:
    """The proposals of the figures with baseline nights: each benchmark's
    figures on a partition fitted together, the budget shared by the gated
    checks."""
    families: dict[Any, dict[Any, baselines.Baseline]] = OrderedDict()
    for key, base in nights.items():
        families.setdefault((base.benchmark, key[2][0]), OrderedDict())[key] = base
    noise = {}
    for members in families.values():
        noise.update(baselines.capture_family(members, kind=lambda key: (key[0], key[3]),
                                              check=lambda key: key[0]))
    # A family whose every figure is left out takes no share of the budget,
    # which changes the others' (once is enough: fewer checks only lower the MDCs).
    gated = set(families)
    made: dict[Any, Any] = {}
    for _ in range(2):
        made = _judged(nights, noise, provs, gating.shares(gated | kept, weights), budget,
                       max_mdc)
        now = {gating.family_of(k[0], k[2][0]) for k, p in made.items() if "leaf" in p}
        if now in (gated, set()):
            break
        gated = now
    return made


def _spread_said(fig: gating.Noise, base: baselines.Baseline) -> str:
    """The spread a reason's numbers follow from: the figure's own, the two
    levels it comes from when its samples fall at two, and the one it is
    judged with when borrowing moved it (a quiet figure among noisy ones of
    its kind: its few runs cannot tell it apart from them)."""
    own = base.spread
    said = f"its {fig.runs} runs spread by {100 * own:.1f} % (log SD)"
    if base.at_level and base.other_level:
        said = (f"its runs spread by {100 * own:.1f} % (log SD) about each of its two levels "
                f"({_levels_said(base)}; {fig.runs} runs at the worse, "
                f"{len(base.other_level)} at the better)")
    elif base.at_level:
        said = (f"its {fig.runs} runs at the worse of its two levels ({_levels_said(base)}) "
                f"spread by {100 * own:.1f} % (log SD)")
    elif base.levels is not None:
        lv = base.levels
        said += (f", its {lv.n_low + lv.n_high} samples at two levels, {_levels_said(base)} "
                 f"({lv.n_low} and {lv.n_high}): the node switches between two states (a "
                 f"VM's vCPU placement; on a cluster, two kinds of node or of placement)")
    if fig.prior_df and abs(math.log(fig.spread / own)) > math.log(1.25):
        said += (f", judged with {100 * fig.spread:.1f} % ({fig.rests_on()}): "
                 f"the other figures of its kind spread "
                 f"{'more' if fig.spread > own else 'less'}, and {fig.runs} runs "
                 f"cannot tell it apart from them")
    return said


def _judged(nights, noise, provs, shares, budget, max_mdc):
    """Each figure's proposal once the site's gated checks (and so each
    check's share of the budget) are known."""
    out = OrderedDict()
    for key, base in nights.items():
        direction = base.direction
        checks = shares(key[0])
        prov = {**provs[key], **{k: v if isinstance(v, int) else _round(v)
                                 for k, v in noise[key].items() if v is not None}}
        if base.at_level:
            prov.update(levels=[_round(base.levels.low, 6), _round(base.levels.high, 6)],
                        level_runs=len(base.run_ids))
        fig = gating.noise_of(prov)
        assert fig is not None
        if base.resolution:
            prov["resolution"] = _round(base.resolution)
        # Below MIN_CHANGE, the figure's own least change or what its
        # printed decimals can tell, nothing fails without a site's own
        # tolerance; the printed step as the file keeps it (four figures),
        # so that run and capture use one floor.
        least = gating.least_change(base.min_change, float(prov.get("resolution") or 0.0))
        one, sustained = (max(m, least)
                          for m in gating.detection(fig, checks, budget, direction))
        spread = _spread_said(fig, base)
        if sustained >= MAX_ENFORCED[direction]:
            out[key] = {"no_reference": f"cannot gate: {spread}, so under the site's "
                                        f"false_alarm_budget only "
                                        f"{beyond_reach(sustained, direction)}, sustained "
                                        f"over {PERSIST_NIGHTS} nights, could be caught",
                        "provenance": provs[key], "two_levels": _levels_said(base)}
            continue
        value = math.exp(float(np.mean(base.logs)))
        # ReFrame's bound is what the gate enforces on one night at capture,
        # its floor included, so plain ReFrame fails where a night would.
        b = max(gating.bound(fig, checks, budget, direction), least)
        prov.update(estimator=stats.ESTIMATOR, mdc=_round(sustained),
                    mdc_one_night=_round(one))
        strong_after = None
        if sustained > max_mdc:
            strong_after = gating.nights_to(fig, checks, budget, direction, max_mdc)
            later = gating.when_strong(strong_after, fig, max_mdc,
                                       base.levels is not None and not base.at_level)
            prov["weak"] = (f"catches {change_said(sustained, direction)} by its {PERSIST_NIGHTS}rd "
                            f"night ({change_said(one, direction)} on one night; {_POWER_SAID}), above "
                            f"the site's reference_max_mdc of {max_mdc:.0%}: {spread}; {later}")
        # The file's bound is ReFrame's (the gate enforces tonight's own):
        # within what a reference file may hold.
        b = min(b, references.MAX_BOUND["upper"])
        lower, upper = _leaf_bounds(b, base)
        out[key] = {"leaf": [_round(value, 6), _round(lower), _round(upper), base.unit],
                    "provenance": prov, "constant": base.spread == 0,
                    "strong_after": strong_after, "two_levels": _levels_said(base)}
    return out


def _leaf_bounds(b: float, base: baselines.Baseline) -> tuple[float, float]:
    """(lower, upper) of the file's entry: *b* on both sides, or for a
    figure judged at the worse of two levels, on the better side the other
    level and *b* beyond it, so that ReFrame passes a night at either."""
    better = b
    if base.at_level:
        ratio = base.levels.high / base.levels.low
        better = (ratio * (1 + b) - 1 if base.direction == stats.HIGHER
                  else 1 - (1 - min(b, BETTER_MAX)) / ratio)
    if base.direction == stats.HIGHER:
        return -min(b, BETTER_MAX), min(better, references.MAX_BOUND["upper"])
    return -min(better, BETTER_MAX), b


def _opposite(direction: str) -> str:
    return stats.LOWER if direction == stats.HIGHER else stats.HIGHER


def _levels_said(base: baselines.Baseline) -> str:
    """``48868 and 75504 MB/s`` for a baseline at two levels, else ''."""
    if base.levels is None:
        return ""
    return " and ".join(f"{x:.0f}" if abs(x) >= 1000 else f"{x:.3g}"
                        for x in (base.levels.low, base.levels.high)) + f" {base.unit}"


_POWER_SAID = f"{round(POWER * 5)} times in 5" if round(POWER * 5) == POWER * 5 \
    else f"{POWER:.0%} of occasions"

#: The widest loss a captured reference may need to catch (a tenfold change
#: either way).  Past it a reference gates nothing; the figure is left out
#: with its spread.
MAX_ENFORCED = {stats.LOWER: 9.0, stats.HIGHER: 0.9}


def change_said(worse: float, direction: str) -> str:
    """A loss as a person reads it: a bandwidth's fall of 36 %, a time's
    rise of 57 %, and past a doubling in times, not "5560 % worse"."""
    if direction == stats.HIGHER:
        return f"a fall of {worse:.0%}"
    return f"a rise of {worse:.0%}" if worse < 1.0 else f"a rise to {_times(1.0 + worse)}"


def beyond_reach(worse: float, direction: str) -> str:
    """The least change a figure that cannot gate could show, as a person
    reads it: a time 35 times its reference, not "3362 % worse"; a
    bandwidth falling to 0.3 % of its reference, not "100 % worse"."""
    if direction == stats.LOWER:
        return f"a rise to {_times(1.0 + worse)} or more"
    share = 100.0 * (1.0 - worse)
    return (f"a fall to {share:.2g} % of its reference or below" if share >= 0.01 else
            "a fall to under 0.01 % of its reference")


def _times(times: float) -> str:
    said = f"{times:.0f}" if times >= 1000 else f"{times:.3g}"
    return f"{said} times its reference"


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


def summary(proposals: dict[Any, Any]) -> tuple[int, int, int]:
    """(references proposed, weak among them, figures left out) of a proposal."""
    made = [p for p in proposals.values() if "leaf" in p]
    weak = sum("weak" in p["provenance"] for p in made)
    left = sum("leaf" not in p for p in proposals.values())
    return len(made), weak, left


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
