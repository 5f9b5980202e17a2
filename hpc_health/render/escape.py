"""Text from the store, an import or a server, made safe for where it goes.

A run directory may come from another machine (``import``) and a
dashboard's answer from anywhere: a check name, a reason, a tag or a
reason phrase can carry terminal escapes (ESC, OSC, C1 controls that
recolour, retitle or rewrite a terminal, piped or not), a newline that
forges a line of ``runs``, or characters XML 1.0 forbids.  Each function
here renders one destination; the text keeps what it said, visibly
(``\\x1b``, ``\\n``), rather than losing it.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls, and the Unicode line and paragraph
# separators some terminals and editors break lines at.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# The same, but a newline and a tab are the text's own layout.
_CONTROL_BUT_LAYOUT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
# What XML 1.0 does not allow at all (the C0 controls but tab, newline and
# carriage return; the surrogates and U+FFFE/U+FFFF), and the C1 controls
# it discourages and terminals act on when a CI log shows the file.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    return {0x0a: "\\n", 0x0d: "\\r", 0x09: "\\t"}.get(
        code, f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def one_line(text: object) -> str:
    """*text* as one line of a terminal or a line-based file: every control
    character, the newline included, shown as an escape."""
    return _CONTROL.sub(_visible, str(text))


def lines(text: object) -> str:
    """*text* for a terminal, its own newlines and tabs kept: every other
    control character (ESC and C1 among them) shown as an escape."""
    return _CONTROL_BUT_LAYOUT.sub(_visible, str(text))


def xml(text: str) -> str:
    """*text* as XML 1.0 may hold it (the file parses), with what it may not
    shown as an escape."""
    return _NOT_XML.sub(_visible, text)
