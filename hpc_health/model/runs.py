"""A stored run as the store's index knows it, where the runs are kept, a
set of runs a command is about, and what the judgement reads from the index
(:class:`FigureIndex`: the store's ``Index`` is one)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hpc_health import paths


def runs_dir(site: str | None = None) -> Path:
    """The store's run directories, or one site's."""
    root = paths.store_root() / "runs"
    return root / site if site else root


@dataclass
class Run:
    """One stored run as the index knows it."""
    site: str
    run_id: str
    started: str
    meta: dict

    @property
    def tags(self) -> list[str]:
        return list(self.meta.get("tags") or [])

    @property
    def dir(self) -> Path:
        return runs_dir(self.site) / self.run_id


@dataclass
class RunSet:
    """The stored runs a command is about, as its user wrote them (*text*,
    resolved by :func:`hpc_health.store.runsets.resolve`)."""
    text: str
    site: str
    partition: str | None = None
    runs: list = field(default_factory=list)        # Run, oldest first

    @property
    def label(self) -> str:
        ids = [r.run_id for r in self.runs]
        what = ids[0] if len(ids) == 1 else f"{len(ids)} runs {ids[0]} .. {ids[-1]}"
        text = self.text if self.text.startswith(f"{self.site}:") else f"{self.site}:{self.text}"
        return f"{text} ({what})"


class FigureIndex(Protocol):
    """What the judgement reads from the store's index: the figures of stored
    runs (:meth:`hpc_health.store.index.Index.figures`), each a
    :class:`hpc_health.model.results.Measurement` with ``run`` (its
    :class:`Run`), ``verdict`` and ``verdict_reason`` set beside its fields."""

    def figures(self, runs: Sequence[Run], variable: str | None = None, check: str | None = None,
                partition: str | None = None, samples: bool = True) -> list[Any]:
        ...
