"""JSON from elsewhere nested too deeply, refused with the file, line and column.

The ingest side of ``common.serde.json_depth``: Json and GeoJson documents, NdJson and
NdGeoJson files read by Python or with an inferred schema, and the lines re-read to locate an
error are scanned before they are parsed; past ``MAX_DEPTH`` a ``ReadError`` names where.
Lines are independent in NDJSON; a document is one text whose lines are numbered from 1.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.serde.json_depth import MAX_DEPTH, first_too_deep
from coordinator.ingest.errors import ReadError

_CHUNK = 4 << 20


def check_text(data: bytes, where: Callable[[int], str], *, lines: bool = True) -> None:
    """Refuse ``data`` if it nests too deeply; ``where`` names its 1-based line ``n``;
    ``lines``: NDJSON (each line on its own), otherwise one document."""
    at = first_too_deep(data, lines=lines)
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
