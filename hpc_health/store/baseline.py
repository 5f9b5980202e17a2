"""A baseline collected on hardware no reference was measured on.

A reference belongs to the hardware it was measured on.  Where a site has no
reference for this hardware (a fresh checkout on a new machine, a node type
the reference file does not know), or none for a check (a check added since
the references were captured), runs are not judged against another
machine's figures: they collect a baseline instead, and each says how far it
is ("baseline 2/5").

The baseline is counted per check (test case on its partition and
environment): a run of some checks is a baseline run for those checks, so a
site that runs its suite in parts reaches references as surely as one that
runs it whole.  Once every check a run measured has the site's
``baseline_runs`` runs, the run prints ``hpc-health reference capture --from
<those runs>``, or ``run --adopt-baseline`` writes the references at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpc_health import paths
from hpc_health.model import results
from hpc_health.site import hardware
from hpc_health.store import capture, references, rundirs

if TYPE_CHECKING:
    from hpc_health.model.references import ReferenceSet
    from hpc_health.model.results import Measurement
    from hpc_health.site.sites import Site

Case = tuple[str, str, str, tuple[str, ...]]

#: Exit codes of runs whose figures can enter a baseline (healthy, drifting,
#: or unhealthy for a failed check: its other figures are still measured).
_COMPLETED = (0, 1, rundirs.EXIT_DRIFTING)


def case_of(m: Measurement) -> Case:
    """The check a measurement belongs to: (test, partition, environ, parameters)."""
    return (m.test, m.partition_fullname, m.environ, tuple(str(v) for v in m.params.values()))


def _case_of_key(key: tuple) -> Case:
    """The check of a capture key (test, index names, index values, variable)."""
    test, _, values, _ = key
    return (test, values[0], values[1], tuple(str(v) for v in values[2:]))


def _measured_cases(measurements):
    """Checks that produced performance figures (a failed performance check
    did measure; a failed build or sanity check did not)."""
    return {case_of(m) for m in measurements
            if m.variable is not None and m.value is not None
            and (m.result == "pass" or m.fail_phase == "performance")}


@dataclass
class Baseline:
    site: str
    collecting: bool
    why: str = ""
    needed: int = 0
    #: check -> stored runs that measured it, oldest first: [(run_dir, meta)]
    runs_of: dict = field(default_factory=dict)
    #: checks this run measured that have no reference (known after the run)
    cases: set = field(default_factory=set)
    #: this run counts and is not stored yet (its checks get one more run)
    pending: bool = False

    def count(self, case: Case) -> int:
        return min(len(self.runs_of.get(case, ())) + (1 if self.pending else 0), self.needed)

    def label_of(self, case: Case) -> str:
        return f"baseline {self.count(case)}/{self.needed}"

    @property
    def label(self) -> str:
        """The least advanced of this run's checks, or where the site stands."""
        if not self.cases:
            # Before the run: as far as the checks run most often.
            most = max((len(r) for r in self.runs_of.values()), default=0)
            return f"baseline {min(most + 1, self.needed)}/{self.needed}"
        return f"baseline {min(self.count(c) for c in self.cases)}/{self.needed}"

    @property
    def complete(self) -> bool:
        return bool(self.collecting and self.cases and not self.pending
                    and all(self.count(c) >= self.needed for c in self.cases))

    def chosen(self) -> list[tuple[Path, dict[str, Any]]]:
        """The runs the references would be captured from: the last
        ``needed`` runs of each of this run's checks, oldest first."""
        picked: dict[str, tuple[Path, dict[str, Any]]] = {}
        for case in self.cases:
            for d, meta in self.runs_of.get(case, [])[-self.needed:]:
                picked[d.name] = (d, meta)
        return [picked[k] for k in sorted(picked, key=lambda k: (picked[k][1].get("started", ""),
                                                                  k))]

    def capture_command(self) -> str:
        ids = ",".join(d.name for d, _ in self.chosen())
        return f"{paths.command()} reference capture --site {self.site} --from {ids} --write"


def _why_not(refs, run_hw):
    """Why the site's references do not apply to this run's hardware, or ''."""
    if refs is None:
        return "no reference file"
    for part, hw in run_hw.items():
        measured_on = refs.hardware.get(part)
        if measured_on and not hardware.same(measured_on, hw):
            return f"{refs.path} was measured on {hardware.describe(measured_on)}"
    return ""


def counts(meta: dict[str, Any]) -> bool:
    """Does a run enter a baseline?  A completed run that is not a per-node
    one (those measure each node alone, with other settings)."""
    return meta.get("exit_code", 0) in _COMPLETED and not meta.get("per_node")


def has_reference(refs: ReferenceSet | None, case: Case) -> bool:
    """Does the reference file say anything of this check: a reference or
    the reason it has none?"""
    if refs is None:
        return False
    test, partition, environ, params = case
    prefix = "/".join((partition, environ, *params)) + "/"
    if any(k.startswith(prefix) for k in refs.provenance.get(test, {})):
        return True
    entry = refs.tests.get(test)
    # Captured files index by partition first (references.merge writes them so).
    return entry is not None and partition in entry[1]


def status(site: Site, refs: ReferenceSet | None, run_hw: dict[str, Any], pending: bool,
           measurements: list[Measurement] | None = None) -> Baseline:
    """Where this site's baseline stands for the hardware *run_hw*.

    Before the run (*measurements* None) it says whether the site collects
    at all; after it, which of the checks it measured have no reference and
    how many runs each has.  *pending*: the current run counts and is not
    stored yet."""
    why = _why_not(refs, run_hw)
    cases = _measured_cases(measurements or [])
    if not why and refs is not None:   # (no reason only where there is a file)
        cases = {c for c in cases if not has_reference(refs, c)}
        if not cases:
            return Baseline(site.name, collecting=False)
        why = f"no reference in {refs.path} for {len(cases)} check(s)"
    runs_of: dict[Case, list[tuple[Path, dict[str, Any]]]] = {}
    for d, meta in rundirs.list_runs(site.name):
        if not ("exit_code" in meta and counts(meta) and (d / "report.json").exists()
                and _same(meta.get("hardware"), run_hw)):
            continue
        try:
            measured = _measured_cases(results.measurements(results.load_report(d / "report.json")))
        except (OSError, ValueError):
            continue
        for case in measured:
            runs_of.setdefault(case, []).append((d, meta))
    return Baseline(site.name, collecting=True, why=why,
                    needed=int(site.settings.get("baseline_runs") or 5), runs_of=runs_of,
                    cases=cases, pending=bool(pending))


def _same(stored, current):
    stored = stored or {}
    return bool(current) and all(hardware.same(stored.get(p), hw) for p, hw in current.items())


def adopt(site: Site, base: Baseline,
          refs: ReferenceSet | None) -> tuple[Path, dict[Any, Any]]:
    """Write the references of this run's checks from their baseline runs;
    *refs*: the site's references as the run loaded them (their other
    checks keep their shares of the budget); (the file's path, the proposals)."""
    chosen = base.chosen()
    found = capture.collect([d for d, _ in chosen])
    for key in [k for k in found if _case_of_key(k) not in base.cases]:
        del found[key]
    proposals = capture.propose(found, [m.get("stack_hash") for _, m in chosen],
                                [m.get("rounds") or 1 for _, m in chosen],
                                site.settings.get("reference_max_mdc") or capture.MAX_MDC,
                                site.settings.get("false_alarm_budget")
                                or capture.FALSE_ALARM_BUDGET, site.settings.get("budget_weights"),
                                capture.kept_checks(refs, found))
    if capture.summary(proposals)[0]:
        data = references.merge(references.load_raw(site.reference_file), proposals,
                             capture.hardware_of([m for _, m in chosen]))
        references.write(site.reference_file, data)
    return site.reference_file, proposals
