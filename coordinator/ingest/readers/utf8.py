"""UTF-8 validation of text inputs and of the string columns of any batch.

ODF ``string`` columns hold UTF-8 (Arrow's ``utf8``). pyarrow's JSON reader copies the bytes of
a JSON string as they are, so invalid UTF-8 would be committed and break every later reader;
the text formats are therefore checked before they are parsed (one streamed pass; the error
names the line), and every batch the writer receives (Parquet, shapefiles, preprocess results)
has its string columns validated.
"""

from __future__ import annotations

import codecs
from pathlib import Path

import pyarrow as pa

from common.arrow_strings import invalid_utf8_column
from coordinator.ingest.errors import ReadError

CHUNK = 1 << 20


def check_utf8_file(path: Path, *, name: str) -> None:
    """Raise ``ReadError`` at ``name:line`` for the first invalid UTF-8 sequence of ``path``."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            pending = decoder.getstate()[0]
            if chunk and not pending and chunk.isascii():  # valid as it is, and fast to see
                offset += len(chunk)
                continue
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as e:
                position = offset - len(pending) + e.start
                raise _error_at(path, name, position, e.object[e.start]) from None
            if not chunk:
                return
            offset += len(chunk)


def _error_at(path: Path, name: str, position: int, byte: int) -> ReadError:
    """The error for the invalid byte at ``position`` (0-based), located by line and column."""
    line, line_start, offset = 1, 0, 0
    with open(path, "rb") as f:
        while offset < position:
            chunk = f.read(min(CHUNK, position - offset))
            if not chunk:
                break
            newlines = chunk.count(b"\n")
            if newlines:
                line += newlines
                line_start = offset + chunk.rindex(b"\n") + 1
            offset += len(chunk)
    column = position - line_start + 1
    return ReadError(
        f"invalid UTF-8: byte 0x{byte:02x} at byte {column} of the line", path=f"{name}:{line}"
    )


def check_utf8_batch(batch: pa.RecordBatch, *, name: str) -> None:
    """Raise ``ReadError`` naming the column when a string column holds invalid UTF-8."""
    column = invalid_utf8_column(batch)
    if column is not None:
        raise ReadError(f"column {column!r}: invalid UTF-8 in a string value", path=name)
