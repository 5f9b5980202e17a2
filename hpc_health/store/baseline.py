"""A baseline collected on hardware no reference was measured on.

A reference belongs to the hardware it was measured on.  Where a site has no
reference for this hardware (a fresh checkout on a new machine, a node type
the reference file does not know), runs are not judged against another
machine's figures: they collect a baseline instead, and each says how far
it is ("baseline 2/5").  After the site's ``baseline_runs`` runs, ``hpc-health
reference capture --from <those runs>`` turns them into references, or
``run --adopt-baseline`` does it at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpc_health.site import hardware
from hpc_health.store import capture, rundirs

if TYPE_CHECKING:
    from hpc_health.site.sites import Site
    from hpc_health.store.references import ReferenceSet

#: Exit codes of runs whose figures can enter a baseline (healthy, or
#: unhealthy for a failed check: its other figures are still measured).
_COMPLETED = (0, 1)


@dataclass
class Baseline:
    site: str
    collecting: bool
    why: str = ""
    needed: int = 0
    runs: list = field(default_factory=list)   # [(run_dir, meta)], oldest first
    # True: this run counts and is not stored yet; False: it is stored;
    # None: it does not count.
    pending: object = True

    def counts(self) -> bool:
        return self.pending is not None

    @property
    def count(self) -> int:
        return min(len(self.runs) + (1 if self.pending is True else 0), self.needed)

    @property
    def label(self) -> str:
        label = f"baseline {self.count}/{self.needed}"
        return label if self.counts() else f"{label} (this run selects checks: it does not count)"

    @property
    def complete(self) -> bool:
        return self.collecting and self.pending is False and len(self.runs) >= self.needed

    def chosen(self) -> list[tuple[Path, dict[str, Any]]]:
        return self.runs[-self.needed:]

    def capture_command(self) -> str:
        ids = ",".join(d.name for d, _ in self.chosen())
        return f"hpc-health reference capture --site {self.site} --from {ids} --write"


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
    """Does a run enter a baseline?  Only whole sessions: a run of selected
    checks would leave the others with fewer runs than the baseline says."""
    return (meta.get("exit_code", 0) in _COMPLETED and not meta.get("per_node")
            and not meta.get("select_tags") and not meta.get("reframe_args") and not meta.get("partition"))


def status(site: Site, refs: ReferenceSet | None, run_hw: dict[str, Any],
           pending: bool | None) -> Baseline:
    """Where this site's baseline stands for the hardware *run_hw*;
    *pending*: the current run is not stored with its verdict yet."""
    why = _why_not(refs, run_hw)
    if not why:
        return Baseline(site.name, collecting=False)
    runs = [(d, meta) for d, meta in rundirs.list_runs(site.name)
            if "exit_code" in meta and counts(meta) and (d / "report.json").exists()
            and _same(meta.get("hardware"), run_hw)]
    return Baseline(site.name, collecting=True, why=why,
                    needed=int(site.settings.get("baseline_runs") or 5), runs=runs,
                    pending=pending)


def _same(stored, current):
    stored = stored or {}
    return bool(current) and all(hardware.same(stored.get(p), hw) for p, hw in current.items())


def adopt(site: Site, base: Baseline) -> Path:
    """Write the baseline's runs into the site's reference file; its path."""
    chosen = base.chosen()
    found = capture.collect([d for d, _ in chosen])
    proposals = capture.propose(found, [m.get("stack_hash") for _, m in chosen],
                                [m.get("rounds") or 1 for _, m in chosen])
    data = capture.merge(capture.load_raw(site.reference_file), proposals,
                         capture.hardware_of([m for _, m in chosen]))
    capture.write(site.reference_file, data)
    return site.reference_file
