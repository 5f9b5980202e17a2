"""The health table printed at the end of a run and by ``hpc-health report``."""

import math
import re

from hpc_health.render import escape

COLUMNS = ("check", "partition", "environ", "variable", "value", "reference",
           "bounds", "dev %", "MDC %", "noise (runs+nights, df)", "verdict")


def fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float):
        if not math.isfinite(x):
            return str(x)
        if x == 0:
            return "0"
        mag = abs(x)
        if mag >= 1000:
            return f"{x:.0f}"
        if mag >= 1:
            return f"{x:.3g}" if mag < 100 else f"{x:.1f}"
        return f"{x:.3g}"
    return str(x)


def _bounds(m):
    if m.ref is None:
        return "-"
    low = "-inf" if m.lower is None else fmt(m.ref + abs(m.ref) * m.lower)
    high = "+inf" if m.upper is None else fmt(m.ref + abs(m.ref) * m.upper)
    return f"[{low}, {high}]"


def rows(verdicts):
    out = []
    for v in verdicts:
        m = v.measurement
        unit = f" {m.unit}" if m.unit and m.value is not None else ""
        dev = "-" if v.deviation is None else f"{100 * v.deviation:+.1f}"
        mdc = "-" if v.mdc is None else f"{100 * v.mdc:.0f}"
        out.append((m.check, m.partition_fullname, m.environ, m.variable or "-",
                    fmt(m.value) + unit, fmt(m.ref), _bounds(m), dev, mdc,
                    getattr(v, "noise", "") or "-",
                    f"{v.verdict} ({v.tag})" if getattr(v, "tag", "") else v.verdict))
    return out


def columns(header, body):
    """Lines of a plain text table, each column as wide as its widest cell.
    A cell is one line without control characters, whatever a stored or
    imported run holds."""
    body = [[escape.one_line(c) for c in r] for r in body]
    widths = [max(len(c), *(len(r[i]) for r in body)) if body else len(c)
              for i, c in enumerate(header)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for r in body:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return lines


def render(verdicts, show_reasons=True):
    lines = columns(COLUMNS, rows(verdicts))
    if show_reasons:
        lines += notes(verdicts)
    return "\n".join(lines)


_WEAK = ("its reference catches only changes of its MDC or more (the MDC column), above "
         "the site's reference_max_mdc; every quiet night adds to what its spread rests on "
         "(the noise column), and its MDC falls as the nights pass")
_WEAK_AFTER = _WEAK + ": not weak after about the healthy nights in brackets, at the spread " \
    "it is judged with"
_WEAK_STAYS = ("its reference catches only changes of its MDC or more (the MDC column), above "
               "the site's reference_max_mdc, and at the spread it is judged with stays so "
               "however many healthy nights its spread learns from: only a quieter figure "
               "would not be (more rounds a night, a quieter node)")

# "OsuBuild skipped: <reason>": a dependent's reason is its build's.
_INHERITED = re.compile(r"^\w+ (skipped|failed): ")


def notes(verdicts):
    """One line per reason, naming the checks it holds for: 20 checks
    skipped for want of Spack are one line, not twenty."""
    groups = {}
    for v in verdicts:
        tag = getattr(v, "tag", "")
        if tag == "weak reference":
            after = getattr(v, "strong_after", 0)
            name = f"{v.measurement.check} {v.measurement.variable}"
            text = _WEAK_AFTER if after > 0 else _WEAK_STAYS if after < 0 else _WEAK
            groups.setdefault(("WEAK REFERENCE", text), []).append(
                f"{name} ({after})" if after > 0 else name)
        m = v.measurement
        for kind, text in (("FINDING", m.finding), ("APPLIED", m.proof)):
            if text and m.check not in groups.setdefault((kind, text), []):
                groups[(kind, text)].append(m.check)
        if v.verdict in ("PASS", "NO-REFERENCE"):
            if (v.verdict == "NO-REFERENCE" and tag) or tag == "not confirmed":
                reason = v.reason           # left out by the capture, withdrawn by a retest
            elif not v.measurement.busy:
                continue
            else:
                reason = v.measurement.busy     # said even where nothing failed
        elif not v.reason:
            continue
        else:
            reason = _INHERITED.sub("", v.reason) if v.verdict == "SKIPPED" else v.reason
        checks = groups.setdefault((v.verdict, reason), [])
        name = v.measurement.check
        # A figure's own finding, or why the capture left it out, names the
        # figure: two of one check left out at two spreads are two lines.
        if (v.verdict in ("DEGRADED", "IMPROVED", "XFAIL", "OUTLIER") or tag == "not confirmed"
                or (v.verdict == "NO-REFERENCE" and tag)) and v.measurement.variable:
            name = f"{name} {v.measurement.variable}"
        if name not in checks:
            checks.append(name)
    lines = []
    for (verdict, reason), checks in groups.items():
        if len(checks) == 1:
            lines.append(f"{verdict}: {checks[0]}: {reason}")
        else:
            lines.append(f"{verdict} ({len(checks)}): {reason}")
            lines.append(f"    {', '.join(checks)}")
    return [escape.one_line(line) for line in lines]


def summary(verdicts):
    counts = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def broad_line(b):
    """All figures together: the broad-shift verdict and its numbers."""
    if b is None:
        return "all figures together: not testable with fewer than 3 runs in all"
    how = "worse" if b.change >= 0 else "better"
    return (f"{b.word}: {b.worse} of {b.figures} figures worse, {b.better} better; the typical "
            f"figure {abs(b.change):.1%} {how} [{b.low:+.1%}, {b.high:+.1%}] (+: worse; 95 %, "
            f"t test over the runs' indices, {b.runs_a} against {b.runs_b} runs, "
            f"p={b.p_value:.2g})")
