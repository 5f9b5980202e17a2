"""Small text helpers shared by the benchmark parsers.

Non-finite numbers: the parsers return JSON-able data, and strict JSON has no
inf or nan, so a non-finite figure is returned as one of the strings "inf",
"-inf" or "nan".  ``float(value)`` turns it back into the float, and a check
that compares it with a number fails loudly instead of passing by accident.
"""

import math
import re

from . import ParseError

_NON_FINITE = {
    "inf": "inf", "+inf": "inf", "infinity": "inf", "+infinity": "inf",
    "-inf": "-inf", "-infinity": "-inf",
    "nan": "nan", "+nan": "nan", "-nan": "nan",
}

# Lines that only appear when the launcher or the kernel killed the run; their
# presence means the figures around them cannot be trusted.
_FATAL = re.compile(
    r"MPI_ABORT was invoked"
    r"|mpirun (?:detected|noticed) that"
    r"|BAD TERMINATION"
    r"|Segmentation fault"
    r"|Bus error"
    r"|core dumped"
    r"|srun: error"
    r"|\bKilled\b"
)

# A benchmark's own complaint, usually the most useful line to quote.
_COMPLAINT = re.compile(
    r"^\s*(?:ERROR|Error|error)\b"
    r"|^\s*Invalid option"
    r"|requires (?:exactly|at least)"
    r"|[Uu]nrecognized"
    r"|[Pp]ermission denied"
    r"|No such file or directory"
)


def check_text(text, tool):
    """Reject non-strings and empty output before any parsing."""
    if not isinstance(text, str):
        raise TypeError(f"{tool} parser expects str, got {type(text).__name__}")
    if not text.strip():
        raise ParseError(f"empty {tool} output")


def number(token, what):
    """A float, or the canonical string for a non-finite value (see above)."""
    key = token.strip().lower()
    if key in _NON_FINITE:
        return _NON_FINITE[key]
    try:
        value = float(token)
    except ValueError:
        raise ParseError(f"{what}: {token!r} is not a number") from None
    if not math.isfinite(value):
        # float() overflowed a huge literal; keep the rule consistent
        return "inf" if value > 0 else "-inf"
    return value


def integer(token, what):
    try:
        return int(token)
    except ValueError:
        raise ParseError(f"{what}: {token!r} is not an integer") from None


def is_finite(value):
    return isinstance(value, (int, float)) and math.isfinite(value)


def complaint(text):
    """First line that reads like an error message, or None."""
    for line in text.splitlines():
        if _COMPLAINT.search(line) or _FATAL.search(line):
            return line.strip()
    return None


def fatal_line(text):
    """First line showing the run was killed or aborted, or None."""
    for line in text.splitlines():
        if _FATAL.search(line):
            return line.strip()
    return None


def fail(message, text):
    """ParseError with the benchmark's own error line quoted when there is one."""
    line = complaint(text)
    if line:
        return ParseError(f"{message}; the output says: {line!r}")
    return ParseError(message)


def require_terminated(text, tool):
    """Reject output whose last line has no newline.

    Tables without a trailer (OSU, darshan-parser) give no other sign of being
    cut in the middle of a line, and a cut there can leave a shorter but
    plausible number ("0.34" -> "0.3").  Real output always ends with "\\n".
    """
    if not text.endswith("\n"):
        last = text.rstrip("\n").rsplit("\n", 1)[-1]
        raise ParseError(
            f"{tool} output ends in the middle of a line ({last[-40:]!r}); "
            "truncated? (pass the output exactly as written)"
        )
