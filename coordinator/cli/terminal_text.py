"""Text from elsewhere made safe to show on a terminal: control characters shown, not obeyed.

A dataset's values, column names, descriptions, keywords, transform SQL and the messages that
quote them come from whoever wrote the dataset. Printed raw, an ESC sequence in them sets the
window title, clears the screen or rewrites what the user reads; a bidi override reorders it.
Every human-readable rendering (tables, error lines, event lines) passes such text through
``visible``: C0 controls, DEL, C1 controls, the Unicode line and paragraph separators and the
bidi embedding, override and isolate marks become ``\\xNN`` / ``\\uNNNN``. Machine formats
(``-o json|csv|yaml|ndjson``, exports) keep the exact values.
"""

from __future__ import annotations

import re

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_LINE = re.compile(f"[\n\t{_CONTROLS}]")
_BLOCK = re.compile(f"[{_CONTROLS}]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, lines: bool = False) -> str:
    """``text`` with its control characters escaped; ``lines`` keeps line breaks and tabs
    (a table cell may span lines), otherwise the result is one line."""
    pattern = _BLOCK if lines else _LINE
    return pattern.sub(_escape, text) if pattern.search(text) else text
