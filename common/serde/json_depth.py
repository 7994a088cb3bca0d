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

MAX_DEPTH = 512
"""Arrays and objects nested inside one another, at the most (GeoJSON needs 4)."""


def first_too_deep(data: bytes, limit: int = MAX_DEPTH, *, lines: bool = True) -> int | None:
    """The offset of the first bracket that opens level ``limit + 1``, or ``None``."""
    if data.count(b"[") + data.count(b"{") <= limit:  # no numpy for what cannot be too deep
        return None
    import numpy as np

    delta = np.zeros(256, np.int8)
    delta[[ord("["), ord("{")]] = 1
    delta[[ord("]"), ord("}")]] = -1
    b = np.frombuffer(data, np.uint8)
    idx = np.arange(b.size, dtype=np.int64)
    newline = b == ord("\n") if lines else np.zeros(b.size, bool)
    backslash = b == ord("\\")
    quote = b == ord('"')
    if backslash.any():  # a quote after an odd run of backslashes is escaped
        last_plain = np.maximum.accumulate(np.where(backslash, -1, idx))
        run = idx - 1 - np.concatenate(([-1], last_plain[:-1]))
        quote &= run % 2 == 0
    quotes = np.cumsum(quote, dtype=np.int64)
    in_string = ((quotes - np.maximum.accumulate(np.where(newline, quotes, 0))) & 1).astype(bool)
    depth = np.cumsum(np.where(in_string, 0, delta[b]), dtype=np.int64)
    line_start = np.maximum.accumulate(np.where(newline, idx, -1))
    base = np.where(line_start >= 0, depth[np.maximum(line_start, 0)], 0)
    over = depth - base > limit
    return int(np.argmax(over)) if over.any() else None
