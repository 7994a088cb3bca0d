"""How deeply JSON from elsewhere may nest, checked before any parser recurses into it.

Python's ``json`` recurses once per level (a ``RecursionError`` past about a thousand) and
pyarrow's JSON reader, when it infers a schema, crashes the process on some hundred thousand
levels. So every JSON text the readers take (Json and GeoJson documents, NdJson and NdGeoJson
files read by Python or with an inferred schema, the lines re-read to locate an error) is
checked here first: nesting deeper than ``MAX_DEPTH`` arrays and objects is refused with the
line and column where it passes the limit. Lines are independent (NDJSON); a document is one
text whose lines are numbered from 1.

The check is vectorised (numpy over the bytes): brackets inside strings do not count, an
escaped quote does not end a string, and each line starts at depth 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from coordinator.ingest.errors import ReadError

MAX_DEPTH = 512
"""Arrays and objects nested inside one another, at the most (GeoJSON needs 4)."""

_CHUNK = 4 << 20
_DELTA = np.zeros(256, np.int8)
_DELTA[[ord("["), ord("{")]] = 1
_DELTA[[ord("]"), ord("}")]] = -1


def first_too_deep(data: bytes, limit: int = MAX_DEPTH) -> int | None:
    """The offset of the first bracket that opens level ``limit + 1``, or ``None`` (pure)."""
    b = np.frombuffer(data, np.uint8)
    delta = _DELTA[b]
    if b.size == 0 or np.count_nonzero(delta == 1) <= limit:
        return None
    idx = np.arange(b.size, dtype=np.int64)
    newline = b == ord("\n")
    backslash = b == ord("\\")
    quote = b == ord('"')
    if backslash.any():  # a quote after an odd run of backslashes is escaped
        last_plain = np.maximum.accumulate(np.where(backslash, -1, idx))
        run = idx - 1 - np.concatenate(([-1], last_plain[:-1]))
        quote &= run % 2 == 0
    quotes = np.cumsum(quote, dtype=np.int64)
    in_string = ((quotes - np.maximum.accumulate(np.where(newline, quotes, 0))) & 1).astype(bool)
    depth = np.cumsum(np.where(in_string, 0, delta), dtype=np.int64)
    line_start = np.maximum.accumulate(np.where(newline, idx, -1))
    base = np.where(line_start >= 0, depth[np.maximum(line_start, 0)], 0)
    over = depth - base > limit
    return int(np.argmax(over)) if over.any() else None


def check_text(data: bytes, where: Callable[[int], str]) -> None:
    """Refuse ``data`` if it nests too deeply; ``where`` names its 1-based line ``n``."""
    at = first_too_deep(data)
    if at is None:
        return
    line_start = data.rfind(b"\n", 0, at) + 1
    column = len(data[line_start:at].decode("utf-8", errors="replace")) + 1
    raise ReadError(
        f"JSON nested deeper than {MAX_DEPTH} arrays and objects (column {column})",
        path=where(1 + data.count(b"\n", 0, at)),
    )


def check_file(path: Path, where: Callable[[int], str]) -> None:
    """``check_text`` over a file (``where`` names its line ``n``), read in whole lines."""
    lines = 0
    carry = b""
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            data = carry + chunk
            end = data.rfind(b"\n") + 1
            if end:
                check_text(data[:end], _after(where, lines))
                lines += data.count(b"\n", 0, end)
            carry = data[end:]
    check_text(carry, _after(where, lines))


def _after(where: Callable[[int], str], lines: int) -> Callable[[int], str]:
    return lambda n: where(lines + n)


def loads(text: str, where: str) -> Any:
    """``json.loads`` of one text from elsewhere, located as ``where``: too deep or invalid
    is a ``ReadError`` there (the depth is checked first)."""
    check_text(text.encode("utf-8", errors="replace"), lambda _: where)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ReadError(f"invalid JSON: {e.msg}", path=where) from None
