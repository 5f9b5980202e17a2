"""What each benchmark declares for the core, beside its parser, and the
declarations found.

A benchmark's parser module (``hpc_health/parsers/<bench>.py``) ends with
one ``BENCHMARK = Benchmark(...)``: the parsers ``hpc-health parse`` offers,
the sections of a partition's settings it owns in ``site.yaml`` (JSON
schemas, each key with its ``default`` and ``description``), what those
schemas cannot say, and the pictures of its figures the HTML report draws
beyond the curve every axis gets, and the archives an offline Spack kit must hold
of it (:class:`KitSource`).  :func:`declared` finds them by walking
the package, so the site schema (:mod:`hpc_health.site.schema`), ``hpc-health
parse``, the report and Spack's kit (:mod:`hpc_health.spack.kit_sources`,
one layer up) learn a new benchmark from its own module: adding one edits
no module in ``site/``, ``spack/``, ``cli/``, ``judge/`` or ``run/``.  The
declarations are here, in the core, and not in the check library, because
loading a site or drawing a report must not import ReFrame.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

# --- building blocks of the settings' JSON schemas ------------------------------

PATH = {"type": ["string", "null"]}
POSINT = {"type": ["integer", "null"], "minimum": 1}
SPEC = {"type": ["string", "null"], "minLength": 1}
BOOL = {"type": ["boolean", "null"]}
BYTES = {"type": ["integer", "string", "null"], "pattern": r"^[0-9]+[kKmMgGtT]?$", "minimum": 1}
#: The MPI a sweep forces its settings through (``auto``: found by the job).
MPI = {"enum": ["auto", "openmpi", "mpich", "cray-mpich", None], "default": "auto"}


def strict(properties: dict[str, Any]) -> dict[str, Any]:
    """A settings section: only the keys given, each optional (null means
    its default), the section itself optional."""
    return {"type": ["object", "null"], "additionalProperties": False,
            "properties": properties, "default": {}}


# --- pictures -------------------------------------------------------------------

@dataclass(frozen=True)
class Split:
    """One stacked bar per group of a test: the share of each part in their
    sum.  A figure ``<group>_<part>`` is one part (Darshan: ``posix_meta_time``);
    ``note`` names a figure of the group printed inside the first part's bar
    (its value as bytes)."""

    title: str
    groups: tuple[str, ...]
    parts: tuple[tuple[str, str], ...]      # (figure suffix, label)
    axis: str
    note: str = ""


@dataclass(frozen=True)
class SideBySide:
    """A size curve drawn as bars, one per value of the parameter *param*
    at each size, instead of a curve each (the halo exchange's strategies)."""

    param: str
    xtitle: str


Plot = Union[Split, SideBySide]


# --- sources -----------------------------------------------------------------------

@dataclass(frozen=True)
class KitSource:
    """One archive an offline Spack kit holds (``hpc-health spack kit``): its
    *file* name in the kit, the official *url* and *project* it comes from,
    and either the *sha256* of the file (a release tarball) or the
    *files_sha256* of its files (a commit's archive), checked by
    :mod:`hpc_health.spack.kit_sources`.  *develop*: the Spack package built
    from it as a develop tree, for a benchmark Spack cannot fetch offline
    (STREAM's recipe names only its git repository)."""

    file: str
    url: str
    project: str
    sha256: str = ""
    files_sha256: str = ""
    develop: str = ""


# --- the declaration --------------------------------------------------------------

#: What the schema cannot say: the problems in one partition's settings (as
#: written, defaults not filled in), each as (key path in the partition, why).
SettingsCheck = Callable[[Mapping[str, Any]], Iterable[tuple[list, str]]]


@dataclass(frozen=True)
class Benchmark:
    """One benchmark's part of the core.  ``settings``: {section of a
    partition: its schema}; ``parsers``: {name: plain function from an
    output's text to its figures}; ``kit``: the archives of it an offline
    Spack kit must hold as they are; ``mirrored``: the specs whose sources
    ``spack mirror create`` fetches into the kit's mirror with Spack's own
    recipes (the versions Spack picks and the one a site may pin);
    ``built_out_of_source``: its Spack packages built out of source
    (CMake), whose develop tree a build uses in place instead of a copy."""

    parsers: Mapping[str, Callable[[str], dict]] = field(default_factory=dict)
    settings: Mapping[str, dict] = field(default_factory=dict)
    check_settings: SettingsCheck | None = None
    plots: tuple[Plot, ...] = ()
    kit: tuple[KitSource, ...] = ()
    mirrored: tuple[str, ...] = ()
    built_out_of_source: tuple[str, ...] = ()


@functools.lru_cache(maxsize=1)
def declared() -> dict[str, Benchmark]:
    """{parser module: its declaration}, every module of
    ``hpc_health.parsers`` that has one (helpers start with ``_``)."""
    found = {}
    here = str(Path(__file__).resolve().parent)
    for info in sorted(pkgutil.iter_modules([here]), key=lambda i: i.name):
        if info.name.startswith("_") or info.name == "registry":
            continue
        module = importlib.import_module(f"hpc_health.parsers.{info.name}")
        bench = getattr(module, "BENCHMARK", None)
        if isinstance(bench, Benchmark):
            found[info.name] = bench
    return found


def _merged(what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for module, bench in declared().items():
        for name, value in getattr(bench, what).items():
            if name in out:
                raise ValueError(f"{what} {name!r} is declared by both parsers/{owner[name]}.py "
                                 f"and parsers/{module}.py")
            out[name], owner[name] = value, module
    return out


def parsers() -> dict[str, Callable[[str], dict]]:
    """{name: parser} of every benchmark (``hpc-health parse NAME``)."""
    return _merged("parsers")


def settings() -> dict[str, dict]:
    """{section of a partition's settings: its schema} of every benchmark."""
    return _merged("settings")


def check_settings(partition: Mapping[str, Any]) -> list[tuple[list, str]]:
    """Every benchmark's problems in one partition's settings."""
    return [problem for bench in declared().values() if bench.check_settings
            for problem in bench.check_settings(partition)]


def plots() -> list[Plot]:
    """The pictures every benchmark declares."""
    return [plot for bench in declared().values() for plot in bench.plots]


def kit_sources() -> list[KitSource]:
    """The archives every benchmark needs in an offline Spack kit, in file
    name order."""
    return sorted((source for bench in declared().values() for source in bench.kit),
                  key=lambda source: source.file)


def built_out_of_source() -> set[str]:
    """The Spack packages whose develop tree is used in place."""
    return {name for bench in declared().values() for name in bench.built_out_of_source}


def mirrored() -> list[str]:
    """The specs whose sources an offline Spack kit's mirror holds."""
    return [spec for bench in declared().values() for spec in bench.mirrored]
