"""Text printed to a terminal: document text, file names and error messages come from the
corpus, and a control character in them is an instruction to the terminal (ESC starts a
sequence that can retitle the window, clear the screen or recolour what follows, BEL rings).
One helper, `for_terminal`, writes each such character as a visible escape."""

from __future__ import annotations

import re

# C0 controls but newline and tab, DEL, C1 controls, lone surrogates, and the bidirectional
# marks that reorder what a reader sees (U+202A-U+202E, U+2066-U+2069)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def for_terminal(text: object, keep_lines: bool = True) -> str:
    """`text` with every control character written as an escape (ESC as \\x1b); newlines and
    tabs are kept when `keep_lines`, escaped too when not (a table cell, a file name)."""
    return (_CONTROL if keep_lines else _CONTROL_ALL).sub(_escape, str(text))
