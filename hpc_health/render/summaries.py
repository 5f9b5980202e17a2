"""CI summaries of stored runs: Markdown for job logs and merge-request
comments, JUnit XML for a CI system's test view.  Rendered from the verdicts
the judge layer gives; nothing here judges."""

from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpc_health.errors import ConfigError
from hpc_health.judge import verdicts as V
from hpc_health.render import escape, table

#: Verdicts a CI system shows as failures, and as skipped (nothing judged).
FAILING = (V.DEGRADED, V.FAIL, V.OUTLIER)
NOT_JUDGED = (V.SKIPPED, V.NO_REFERENCE)


def state(vs: Sequence[V.Verdict]) -> str:
    return "UNHEALTHY" if V.exit_code(vs) else "HEALTHY"


def _cell(text: Any) -> str:
    """One cell of a Markdown table: one line, no control character, no
    column break."""
    return escape.one_line(text).replace("|", "\\|")


def _code(text: Any) -> str:
    """Text inside a Markdown code span: one line, no backquote to end it."""
    return escape.one_line(text).replace("`", "'")


def markdown(site: str, run_id: str, vs: Sequence[V.Verdict],
             stack: Sequence[tuple[str, str, str]] = (), specs: Sequence[tuple] = (),
             previous: str | None = None, ahead: str = "") -> str:
    """The verdict line, the failing rows with their reasons, and what of the
    software stack changed since *previous* (the run before); *ahead* says
    the run is dated in the future."""
    lines = [f"### hpc-health `{_code(site)}` run `{_code(run_id)}`: **{state(vs)}** "
             f"({table.summary(vs)})", ""]
    if ahead:
        lines += [f"**Run `{_code(run_id)}` is {_cell(ahead)}.**", ""]
    bad = [v for v in vs if v.verdict in FAILING]
    if bad:
        lines += ["| check | partition | environ | figure | value | reference | dev % | verdict "
                  "| why |", "|---|---|---|---|---|---|---|---|---|"]
        for row, v in zip(table.rows(bad), bad):
            check, part, env, var, value, ref, _bounds, dev, _mdc, _noise, verdict = row
            lines.append("| " + " | ".join(_cell(c) for c in (check, part, env, var, value, ref,
                                                               dev, verdict, v.reason)) + " |")
    else:
        lines.append("No figure is DEGRADED and no check failed.")
    if previous:
        lines += ["", f"**Software stack since run `{previous}`:** "
                  + ("unchanged." if not (stack or specs) else "")]
        lines += [f"- {_cell(what)}: `{_code(a)}` → `{_code(b)}`" for what, a, b in stack]
        lines += [f"- Spack {_cell(change)} `{_code(name)}`: `{_code(a)}` → `{_code(b)}`"
                  for change, name, a, b in specs]
    return "\n".join(lines) + "\n"


def junit(site: str, runs: Sequence[tuple[str, Sequence[V.Verdict]]],
          ahead: Mapping[str, str] | None = None) -> bytes:
    """JUnit XML: a test suite per run, a test case per judged figure (a
    check without figures is one case); DEGRADED, FAIL and OUTLIER are
    failures with their reason, SKIPPED and NO-REFERENCE skipped.  A run
    of *ahead* (run id: why) says it is dated in the future, as a property
    of its suite."""
    root = ET.Element("testsuites", name=f"hpc-health {site}")
    for run_id, vs in runs:
        suite = ET.SubElement(root, "testsuite", name=f"hpc-health {site} {run_id}",
                              tests=str(len(vs)),
                              failures=str(sum(v.verdict in FAILING for v in vs)),
                              skipped=str(sum(v.verdict in NOT_JUDGED for v in vs)),
                              errors="0")
        if (ahead or {}).get(run_id):
            props = ET.SubElement(suite, "properties")
            ET.SubElement(props, "property", name="hpc-health.dated_in_the_future",
                          value=(ahead or {})[run_id])
        for v in vs:
            m = v.measurement
            case = ET.SubElement(suite, "testcase", classname=f"{site}.{m.check}",
                                 name=f"{m.variable or m.check} [{m.partition_fullname} "
                                      f"{m.environ}]")
            text = (f"{v.verdict}: value {table.fmt(m.value)} {m.unit}, reference "
                    f"{table.fmt(m.ref)}; {v.reason}")
            if v.verdict in FAILING:
                ET.SubElement(case, "failure", message=f"{v.verdict}: {v.reason}"[:500],
                              type=v.verdict).text = text
            elif v.verdict in NOT_JUDGED:
                ET.SubElement(case, "skipped", message=f"{v.verdict}: {v.reason}"[:500])
            else:
                ET.SubElement(case, "system-out").text = text
    # Names and reasons come from stored or imported runs: whatever they
    # hold, the file must parse (ElementTree writes control characters raw).
    for element in root.iter():
        element.attrib = {k: escape.xml(v) for k, v in element.attrib.items()}
        if element.text:
            element.text = escape.xml(element.text)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write_atomically(path: str | Path, data: bytes) -> Path:
    """Write *data* to *path* through a temporary file in the same
    directory: a reader never sees half a file, and an error leaves
    nothing behind.  ConfigError (exit 2) for a directory that is missing
    or cannot be written."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ConfigError(path, f"no directory {folder}: create it first")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    except OSError as err:
        raise ConfigError(path, f"cannot write in {folder}: {err.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fp:
            fp.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as err:
        os.unlink(tmp)
        raise ConfigError(path, f"cannot write: {err.strerror}") from None
    return path
