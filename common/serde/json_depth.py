"""How deeply JSON from elsewhere may nest: found before any parser recurses into it (pure).

Python's ``json`` recurses once per level (a ``RecursionError`` past about a thousand) and
pyarrow's JSON reader, when it infers a schema, crashes the process on some hundred thousand
levels. Every JSON text from elsewhere (ingested files, Smart Transfer Protocol messages) is
scanned here first. The scan is vectorised (numpy over the bytes): brackets inside strings do
not count and an escaped quote does not end a string. In ``lines`` mode (NDJSON) each line is
a text of its own and starts at depth 0; otherwise the text is one document whose line breaks
are plain whitespace (a pretty-printed document nests across lines).
"""

from __future__ import annotations

from functools import cache
from typing import Any

MAX_DEPTH = 512
"""Arrays and objects nested inside one another, at the most (GeoJSON needs 4)."""


def first_too_deep(data: bytes, limit: int = MAX_DEPTH, *, lines: bool = True) -> int | None:
    """The offset of the first bracket that opens level ``limit + 1``, or ``None``; scanned
    in chunks whose state carries over (memory bounded by the chunk, not the text)."""
    if data.count(b"[") + data.count(b"{") <= limit:  # no numpy for what cannot be too deep
        return None
    scan = _Scan(limit, lines)
    view = memoryview(data)
    for start in range(0, len(data), _CHUNK):
        at = scan.feed(view[start : start + _CHUNK])
        if at is not None:
            return start + at
    return None


_CHUNK = 1 << 20


class _Scan:
    """The scan's state between chunks: the depth on the current line (or in the document),
    whether it is inside a string, and the backslashes the last chunk ended with."""

    def __init__(self, limit: int, lines: bool) -> None:
        self.limit = limit
        self.lines = lines
        self.depth = 0
        self.in_string = False
        self.backslashes = 0

    def feed(self, chunk: memoryview) -> int | None:
        """The offset in ``chunk`` of the first bracket past the limit, or ``None``."""
        import numpy as np

        b = np.frombuffer(chunk, np.uint8)
        idx = np.arange(b.size, dtype=np.int64)
        backslash = b == ord("\\")
        quote = b == ord('"')
        if self.backslashes or backslash.any():  # a quote after an odd run of them is escaped
            last_plain = np.maximum.accumulate(np.where(backslash, -1 - self.backslashes, idx))
            before = np.concatenate(([-1 - self.backslashes], last_plain[:-1]))
            quote &= (idx - 1 - before) % 2 == 0
            self.backslashes = int(b.size - 1 - last_plain[-1])
        quotes = np.cumsum(quote, dtype=np.int64) + self.in_string
        newline = b == ord("\n") if self.lines else None
        if newline is not None:  # a line starts outside any string
            quotes -= np.maximum.accumulate(np.where(newline, quotes, 0))
        in_string = (quotes & 1).astype(bool)
        depth = np.cumsum(np.where(in_string, 0, _delta()[b]), dtype=np.int64) + self.depth
        if newline is not None:  # and at depth 0
            line_start = np.maximum.accumulate(np.where(newline, idx, -1))
            depth -= np.where(line_start >= 0, depth[np.maximum(line_start, 0)], 0)
        over = depth > self.limit
        if over.any():
            return int(np.argmax(over))
        self.depth = int(depth[-1])
        self.in_string = bool(in_string[-1])
        return None


@cache
def _delta() -> Any:
    """A bracket's change of depth, by byte value."""
    import numpy as np

    delta = np.zeros(256, np.int8)
    delta[[ord("["), ord("{")]] = 1
    delta[[ord("]"), ord("}")]] = -1
    return delta
