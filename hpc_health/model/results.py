"""Reading ReFrame's JSON run report: the data contract between a run and
everything hpc-health says about it (never the perflog strings)."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpc_health.errors import ConfigError
from hpc_health.jobside import nodeload
from hpc_health.stats import location

_PARAM = re.compile(r"%([A-Za-z_]\w*)=(\S+)")
# ReFrame's --distribute adds these to the display name of each copy.
_DISTRIBUTED = re.compile(r"\s*%\.(part|nid)=(\S+)")


@dataclass
class Measurement:
    """One performance variable of one test case, or one failed case."""
    test: str                 # test class name
    check: str                # display name (with parameters)
    system: str
    partition: str
    environ: str
    variable: str | None   # None for a case that produced no figure
    value: float | None = None
    unit: str = ""
    ref: float | None = None       # None: no reference
    lower: float | None = None
    upper: float | None = None
    result: str = ""          # ReFrame's result for the case: pass/fail/skip/abort
    fail_phase: str | None = None
    fail_reason: str | None = None
    params: dict = field(default_factory=dict)
    nodes: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    node: str | None = None    # the node a --distribute copy was pinned to
    rounds: int = 1               # rounds whose samples were pooled (--rounds)
    better: str | None = None  # "higher" | "lower", as the check declared it
    note: str = ""                # why the check applied no reference
    busy: str = ""                # "node busy: …" when others used the node meanwhile
    busy_share: float = 0.0       # the share of the node's cores others used meanwhile
    capability: str = ""          # declared capability it is a fraction of (Figure.capability)
    proof: str = ""               # what the run showed was applied (a forced setting)
    finding: str = ""             # a finding the check names beside the figure
    min_change: float = 0.0       # the smallest change it is a finding at (Figure.min_change)
    benchmark: str = ""           # the benchmark's file of checks (reframe_checks/<benchmark>.py)

    @property
    def partition_fullname(self) -> str:
        return f"{self.system}:{self.partition}"


def load_report(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        with open(path) as fp:
            return json.load(fp)
    except FileNotFoundError:
        raise ConfigError(path, "ReFrame wrote no run report") from None
    except ValueError as err:
        raise ConfigError(path, f"not a ReFrame JSON run report: {err}") from None


def _case_key(tc):
    return (tc.get("unique_name") or tc.get("name"), tc.get("system"),
            tc.get("partition"), tc.get("environ"))


def is_rounds_session(report: dict[str, Any]) -> bool:
    """Was the session repeated whole (``--reruns``, the rounds of a
    per-node run) rather than retried (``--max-retries``)?  Both append runs
    to the report; only the cmdline tells them apart."""
    args = shlex.split((report.get("session_info") or {}).get("cmdline") or "")
    return any(a == "--reruns" or a.startswith("--reruns=") for a in args)


def attempts(report: dict[str, Any]) -> dict[Any, list[dict[str, Any]]]:
    """Every attempt of every case, in order: {key: [testcase, ...]}."""
    found: dict[Any, list[dict[str, Any]]] = {}
    for run in report.get("runs", []):
        for tc in run.get("testcases", []):
            found.setdefault(_case_key(tc), []).append(tc)
    return found


def testcases(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One testcase per case.

    After retries, the last attempt (ReFrame keeps one run per retry).
    After rounds (``--reruns``), the first failed round if any failed -- a
    crash in one round is a failure, whatever the other rounds did -- else
    the last round.
    """
    rounds = is_rounds_session(report)
    out = []
    for tries in attempts(report).values():
        failed = [tc for tc in tries if _failed(tc)]
        out.append(failed[0] if rounds and failed else tries[-1])
    return out


SAMPLES_FILE = "hpc-health-samples.json"


def case_samples(tc: dict[str, Any]) -> dict[str, list[float]]:
    """Samples a check kept for its performance variables (see
    hpc_health/checklib/check.py); {} when it kept none."""
    # A case whose figures fell outside ReFrame's bounds fails its
    # performance stage and is never copied to the output directory; its
    # stage directory is kept instead.
    for where in (tc.get("outputdir"), tc.get("stagedir")):
        if not where:
            continue
        try:
            with open(f"{where}/{SAMPLES_FILE}") as fp:
                data = json.load(fp)
        except (OSError, ValueError):
            continue
        return {k: [float(x) for x in v] for k, v in data.items() if isinstance(v, list)}
    return {}


def _failed(tc):
    """Failed before its figures (or its dependency did).  Failing only
    ReFrame's reference bounds is not a failure here: hpc-health judges
    those figures itself."""
    result = tc.get("result")
    if result in ("fail", "abort"):
        return tc.get("fail_phase") != "performance"
    return result == "fail_deps"


def _judgeable(tc):
    """Ran to its figures."""
    return tc.get("result") != "skip" and not _failed(tc)


def merged_samples(rounds: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """The samples of every round of a case, pooled per variable: each node's
    figure then rests on all its rounds, so a disturbance that hit one round
    is outvoted."""
    pooled: dict[str, list[float]] = {}
    for tc in rounds:
        for var, vals in case_samples(tc).items():
            pooled.setdefault(var, []).extend(vals)
    return pooled


def inherited_reason(tc: dict[str, Any], cases: Any) -> str | None:
    """Why a case was skipped, or failed for its dependencies.

    ReFrame 4.10's run report keeps no reason for a skip, and none for a
    case whose dependency failed (result ``fail_deps``): our checks keep
    their skip reasons in the ``skip_reason`` variable, and a case held up
    by a dependency takes the dependency's reason (a build fixture skipped
    for want of Spack, or failed with Spack's error).
    """
    if tc.get("fail_reason"):
        return tc["fail_reason"]
    if tc.get("skip_reason"):
        return tc["skip_reason"]
    for dep_name, dep_part, dep_env in tc.get("dependencies_actual") or []:
        dep = cases.get((dep_name, dep_part, dep_env))
        if dep is None or dep.get("result") == "pass":
            continue
        if dep.get("result") in ("skip", "fail_deps"):
            what, why = "skipped", inherited_reason(dep, cases)
        else:
            what, why = "failed", f"{dep.get('fail_phase')}: {dep.get('fail_reason')}"
        name = (dep.get("display_name") or dep_name).split()[0]
        return f"{name} {what}: {why}" if why else f"{name} {what}"
    return None


#: ReFrame's reason for a case it was running when the run was stopped
#: (hpc-health stops ReFrame with SIGINT).
_ABORTED_BY_STOP = "aborted due to KeyboardInterrupt"


def _stopped_said(reason: str | None) -> str | None:
    """ReFrame's reason, said as what it is when the case was cut short by a
    stop: the operator's or the scheduler's doing, not the machine's."""
    if reason and _ABORTED_BY_STOP in reason:
        return "stopped before it finished: the run was stopped (a signal), not a fault it found"
    return reason


def measurements(report: dict[str, Any]) -> list[Measurement]:
    out = []
    cases = {(tc.get("unique_name"), f"{tc.get('system')}:{tc.get('partition')}",
              tc.get("environ")): tc for tc in testcases(report)}
    tries = attempts(report) if is_rounds_session(report) else {}
    for tc in testcases(report):
        if tc.get("fixture") and tc.get("result") == "pass":
            continue
        name = tc.get("display_name") or tc.get("name", "?")
        pinned = {m.group(1): m.group(2) for m in _DISTRIBUTED.finditer(name)}
        name = _DISTRIBUTED.sub("", name)
        params = {m.group(1): tc.get(m.group(1), _coerce(m.group(2)))
                  for m in _PARAM.finditer(name)}
        base = dict(test=name.split()[0], check=name, node=pinned.get("nid"),
                    system=tc.get("system", ""),
                    partition=tc.get("partition", ""), environ=tc.get("environ", ""),
                    result=tc.get("result", ""), fail_phase=tc.get("fail_phase"),
                    fail_reason=(inherited_reason(tc, cases)
                                 if tc.get("result") in ("skip", "fail_deps")
                                 else _stopped_said(tc.get("fail_reason"))), params=params,
                    nodes=list(tc.get("job_nodelist") or []),
                    busy=nodeload.note(_mapping(tc.get("node_load"))),
                    busy_share=nodeload.share(_mapping(tc.get("node_load"))),
                    benchmark=Path(str(tc.get("filename") or "")).stem)
        perf = tc.get("perfvalues") or {}
        errors = _mapping(tc.get("figure_errors"))
        if not perf and not errors:
            out.append(Measurement(variable=None, **base))
            continue
        better = _mapping(tc.get("figure_better"))
        capability = _mapping(tc.get("figure_capability"))
        least = _mapping(tc.get("figure_min_change"))
        base["note"] = tc.get("reference_note") or ""
        proofs, findings = _mapping(tc.get("figure_proof")), _mapping(tc.get("findings"))
        for var, why in errors.items():
            out.append(Measurement(**{**base, "fail_reason": f"figure not read: {why}"},
                                   variable=var, better=better.get(var),
                                   proof=proofs.get(var, "")))
        rounds = [t for t in tries.get(_case_key(tc), [tc])
                  if _judgeable(t) and t.get("perfvalues")] or [tc]
        samples = merged_samples(rounds)
        for key, vals in perf.items():
            value, ref, lower, upper, unit = vals[:5]
            var = key.split(":")[-1]
            if len(rounds) > 1 and samples.get(var):
                # The figure the verdict judges: the location of every
                # round's samples, not a summary of the rounds' figures.
                value = location(samples[var])
            no_ref = (ref == 0 and lower is None and upper is None)
            out.append(Measurement(
                variable=var, value=_num(value), unit=unit or "",
                ref=None if no_ref else ref, lower=lower, upper=upper,
                samples=samples.get(var, []), rounds=len(rounds),
                better=better.get(var), capability=capability.get(var, ""),
                proof=proofs.get(var, ""), finding=findings.get(var, ""),
                min_change=float(least.get(var) or 0.0), **base))
    return out


def _mapping(value):
    """A dict variable as the run report keeps it ('<undefined>' in reports
    of checks that do not have it)."""
    return value if isinstance(value, dict) else {}


def _num(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else f


def _coerce(text):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text
