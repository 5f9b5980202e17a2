"""What a run prints besides ReFrame's progress lines: the header, which of
ReFrame's lines to show, and the one sentence on what to do next."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

from hpc_health import paths
from hpc_health.judge import verdicts
from hpc_health.site import hardware
from hpc_health.spack import kit as spack_kit
from hpc_health.store import capture, rundirs


def header(site, run_dir, run_hw, refs, base, rounds, partition=None):
    """What this run is about to do, before ReFrame's progress lines."""
    lines = [f"hpc-health: site {site.name} ({site.chosen_because}), run {run_dir.name}",
             f"  results:    {run_dir}"]
    for p in ([partition] if partition else site.partitions):
        full = f"{site.name}:{p}"
        lines.append(f"  partition:  {full}: {hardware.describe(run_hw.get(full))}")
    if base.collecting:
        lines.append(f"  references: {base.why}; collecting a baseline on this hardware: "
                     f"this run is {base.label}")
    else:
        lines.append(f"  references: {refs.path}")
    lines.append(f"  Spack:      {spack_line(site)}")
    lost = rundirs.unfinished_before(run_dir)
    if lost:
        rid, meta = lost
        lines.append(f"  previous:   run {rid} (started {meta.get('started')}) never finished: "
                     "its process was killed (kill -9, the OOM killer) or the machine stopped "
                     f"before it closed the run; that night is lost, what it left is in "
                     f"{run_dir.parent / rid}")
    if rounds > 1:
        lines.append(f"  rounds:     {rounds} (the session runs {rounds} times)")
    return lines


def spack_line(site):
    found, how, fix = spack_kit.status(site)
    return how if found else f"{how}: every check that needs Spack will be SKIPPED. To fix: {fix}"


def broad_line(whole):
    """The night as a whole (:func:`hpc_health.judge.broad.tonight`)."""
    return (f"{whole.word} tonight: {whole.worse} of {whole.figures} figures worse than "
            f"their recent nights; the median figure {_worse(whole.change)} than its "
            f"reference, where the last {whole.nights} nights were {_worse(whole.usual)} "
            f"(spread {100 * whole.spread:.1f} %): {_worse(whole.beyond)} than usual")


def _worse(change):
    """A signed change (positive: worse) in words."""
    return f"{100 * abs(change):.1f} % {'worse' if change >= 0 else 'better'}"


def drift_lines(drifts, nights):
    """The DRIFTING lines after the table (:func:`hpc_health.judge.drift.drifting`)."""
    if not drifts:
        return []
    lines = [f"Stayed worse over the last {nights} stored runs (the `history` test):"]
    for d in drifts:
        t = d.trend
        stack = (f"stack changed at run {d.stack_changed_at}" if d.stack_changed_at
                 else "stack unchanged")
        lines.append(f"DRIFTING  {t.check}  {t.variable} on {t.partition}: since run {d.run} "
                     f"({d.started}): {100 * d.change:+.1f} % \u00b1 {100 * d.half_width:.1f} %, "
                     f"{d.nights} runs; {stack}")
    return lines


def _size_of_change(v):
    """How far a figure moved, either way, on the log scale (a time 3x longer
    and a bandwidth at a third are as far): the one to look at first."""
    d = v.deviation
    return abs(math.log1p(d)) if d is not None and d > -1 else 0.0


def _drift_step(hh, site, drifts, tonight, needed):
    """The Next: line of a night whose figures drifted: their series, and
    the capture of only their checks from the runs since (every other
    reference stays as strong as it is)."""
    d = drifts[0]
    tests = list(dict.fromkeys(x.trend.test for x in drifts))
    only = " ".join(f"--check '{t}'" for t in tests)
    when = "" if d.nights >= needed else f", once there are {needed} ({d.nights} so far)"
    return (f"Next: {len(drifts)} figure(s) have stayed worse for several runs (DRIFTING "
            f"above); the series: {hh} history --site {site} --check '{d.trend.test}' --var "
            f"{d.trend.variable}; if the change is intended (an upgrade you accept), "
            f"re-baseline {'its check' if len(tests) == 1 else 'their checks'} from the runs "
            f"since{when}: {hh} reference capture --site {site} {only} "
            f"--from {d.run}..{tonight} --write")


def next_step(site, verdict_list, base, run_dir, adopted=False, drifts=(), whole=None,
              stopped_by=None):
    """One sentence on what to do now, its commands as the user can type
    them here (:func:`hpc_health.paths.command`)."""
    hh = paths.command()
    counts = {}
    for v in verdict_list:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    if counts.get(verdicts.DEGRADED) or counts.get(verdicts.OUTLIER):
        worst = max((v for v in verdict_list if v.verdict in (verdicts.DEGRADED, verdicts.OUTLIER)),
                    key=_size_of_change)
        m = worst.measurement
        return (f"Next: look at the {worst.verdict} figures above; when it started: "
                f"{hh} history --site {site.name} --check '{m.test}' --var {m.variable}")
    if stopped_by:
        return (f"Next: the run was stopped by {stopped_by}; the checks that completed are "
                "judged above and kept, the one it cut short says so; run again for a whole "
                "night (a stopped run counts towards no baseline)")
    if counts.get(verdicts.FAIL):
        return (f"Next: the FAIL lines above give each reason; ReFrame's full output is "
                f"{run_dir / 'reframe.out'}")
    if whole is not None and whole.word:
        return (f"Next: tonight's figures are {whole.word.lower()} than on the recent nights "
                "(above): what changed since the last run, software stack included: "
                f"{hh} compare --site {site.name} {whole.previous} {run_dir.name}; if it "
                "stays, DRIFTING names each figure that moved")
    if drifts:
        return _drift_step(hh, site.name, drifts, run_dir.name, base.needed)
    if base.complete and adopted:
        return "Next: the next run is judged against the references just written."
    if base.complete:
        return (f"Next: the baseline is complete ({base.needed} runs of each check on this "
                f"hardware); make it the reference: {base.capture_command()}")
    if base.collecting and base.cases:
        return (f"Next: run again: {base.label} on this hardware; after "
                f"{base.needed} runs of each check the run prints the command that turns "
                "them into references (or run with --adopt-baseline)")
    # Weak references before SKIPPED: more nights fix the one, while a check
    # skipped for want of a second node stays skipped on this machine.
    weak = sum(v.tag == "weak reference" for v in verdict_list)
    if weak:
        return (f"Next: nothing failed; {weak} figure(s) have weak references (WEAK REFERENCE "
                f"above): keep running nightly: every quiet night adds to what their spread "
                f"rests on (the noise column) and their MDC falls; the WEAK REFERENCE lines "
                f"say after about how many each is not weak, or that no number of nights will "
                f"do; `{hh} reference show --site {site.name}` says what each caught at "
                f"capture")
    if counts.get(verdicts.SKIPPED):
        return "Next: the SKIPPED lines above say what is missing for those checks."
    if counts.get(verdicts.IMPROVED):
        return ("Next: some figures IMPROVED beyond their bounds: if that change is expected, "
                f"re-capture the references ({hh} reference capture --site {site.name})")
    return "Next: nothing to do; run it again tomorrow."


def adoption_lines(base, written, proposals):
    """What ``run --adopt-baseline`` wrote, and what it left out and why."""
    made, weak, _left = capture.summary(proposals)
    lines = [f"hpc-health: baseline of {len(base.chosen())} runs adopted: {made} references "
             f"written to {written}" if made else
             f"hpc-health: baseline of {len(base.chosen())} runs: no figure could be given a "
             f"reference; nothing written"]
    if weak:
        lines.append(f"  {weak} of them weak (they catch only large changes; each nightly run "
                     f"adds to their spread's degrees of freedom): {paths.command()} reference show")
    for (test, _, values, var), prop in proposals.items():
        if "leaf" not in prop:
            why = prop.get("no_reference") or prop.get("error")
            lines.append(f"  left out: {test} {'/'.join(str(v) for v in values)} {var}: {why}")
    return lines


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: ReFrame's line for a finished test case: "[       OK ] ( 5/40) Name ... /hash @part+env".
_FINISHED = re.compile(r"^\[\s*(OK|FAIL|SKIP|ERROR|ABORT|XFAIL|XPASS)\s*\]\s*\(\s*(\d+)/(\d+)\)\s+"
                       r"(\S+)")


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """Where a run is, between ReFrame's lines: after each finished test
    case, ``[k/N] Name: 2m10s elapsed, ~3m05s left``; what is left comes from
    the previous comparable run's duration, else from the pace so far."""

    def __init__(self, previous_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.previous_s, self.clock, self.start = previous_s, clock, clock()

    def __call__(self, line: str) -> str:
        m = _FINISHED.match(_ANSI.sub("", line))
        if not m:
            return ""
        k, n, name = int(m.group(2)), int(m.group(3)), m.group(4)
        elapsed = self.clock() - self.start
        if self.previous_s is not None and elapsed < self.previous_s:
            left = f"~{_clock(self.previous_s - elapsed)} left (as long as the previous run)"
        elif self.previous_s is not None:
            left = f"longer than the previous run ({_clock(self.previous_s)})"
        else:
            left = f"~{_clock(elapsed * (n - k) / max(k, 1))} left" if k < n else "done"
        return f"hpc-health: [{k}/{n}] {name}: {_clock(elapsed)} elapsed, {left}"


class ProgressFilter:
    """Which of ReFrame's lines the terminal shows: its progress lines and
    warnings, not the full FAILURE INFO (hpc-health's table gives each
    failure's reason; everything stays in reframe.out)."""

    def __init__(self):
        self.in_failures = False

    def __call__(self, line):
        if "SUMMARY OF FAILURES" in line:
            self.in_failures = True
        elif self.in_failures and line.startswith("Log file(s) saved"):
            self.in_failures = False
            return False
        if self.in_failures:
            return False
        return line.startswith("[") or "WARNING" in line or "ERROR" in line


def previous_duration(site_name, meta):
    """Seconds the checks of the last completed run of the same selection
    took (its Spack pre-build left out: the clock starts after this run's),
    or None."""
    same = ("partition", "select_tags", "reframe_args", "per_node", "rounds")
    for _, prev in reversed(rundirs.list_runs(site_name)):
        if prev.get("run_id") == meta.get("run_id") or prev.get("exit_code") not in \
                (0, 1, rundirs.EXIT_DRIFTING):
            continue
        if any(prev.get(k) != meta.get(k) for k in same):
            continue
        try:
            start = time.strptime(prev["started"], "%Y-%m-%dT%H:%M:%SZ")
            end = time.strptime(prev["finished"], "%Y-%m-%dT%H:%M:%SZ")
        except (KeyError, TypeError, ValueError):
            continue
        built = (prev.get("prebuild") or {}).get("seconds") or 0.0
        return max(time.mktime(end) - time.mktime(start) - float(built), 0.0)
    return None
