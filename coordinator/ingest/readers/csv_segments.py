"""A CSV file cut into segments of whole records, for parsing them in parallel.

pyarrow's streaming CSV reader converts one block after another on one thread: on a large file
it is the slowest stage of an ingest. Parsing is parallel when the file is cut into segments
that each begin at a record and end after one, and each segment is parsed on its own (by
``pyarrow.csv.read_csv``); the reader then yields the segments' records in file order.

A newline ends a record unless it is inside a quoted value, and a value can only be quoted if
the text holds the quote character. So the file is cut at its last newline before every
``size`` bytes while no quote character has been seen; at the first quote character the
cutting stops at the last newline before it, and ``SegmentCutter.rest`` gives that offset: the
rest of the file is left to the streaming reader, whose block splitting follows quotes. A
record longer than a segment stops the cutting the same way. A file without quotes (the usual
numbers, codes, times and names) is thus parsed in parallel to its end, and any other file
exactly as before from its first quote on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SEGMENT_BYTES = 4 << 20
"""Bytes of CSV text per segment: large enough for a batch to amortise the per-batch work of
the pipeline, small enough that the segments parsed ahead hold little memory."""


@dataclass(frozen=True, slots=True)
class Segment:
    offset: int
    """Where the segment starts in the file (0: the first, which holds any header)."""
    data: memoryview


def whole_records(chunk: bytes, quote: bytes, *, at_end: bool) -> tuple[int, bool]:
    """How many bytes at the start of ``chunk`` are whole records that hold no ``quote``,
    and whether the cutting stops after them (a quote, or no newline in a whole chunk).
    ``at_end``: the chunk ends the file, so its last record needs no newline."""
    quoted = chunk.find(quote)
    if quoted >= 0:
        return chunk.rfind(b"\n", 0, quoted) + 1, True
    if at_end:
        return len(chunk), False
    return chunk.rfind(b"\n") + 1, chunk.rfind(b"\n") < 0


class SegmentCutter:
    """The segments of the file at ``path``, in order, read as they are iterated."""

    def __init__(self, path: Path, *, quote: str, size: int = SEGMENT_BYTES) -> None:
        if size < 1:
            raise ValueError("a segment holds at least one byte")
        self.path = path
        self.quote = quote.encode()
        self.size = size
        self.rest: int | None = None
        """Set when the cutting stopped early: the offset from which the rest of the file
        is left to the streaming reader."""

    def __iter__(self) -> Iterator[Segment]:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            offset = 0
            while True:
                chunk = os.pread(fd, self.size, offset)
                at_end = len(chunk) < self.size
                length, stop = whole_records(chunk, self.quote, at_end=at_end)
                if length:
                    yield Segment(offset, memoryview(chunk)[:length])
                offset += length
                if stop:
                    self.rest = offset
                    return
                if at_end:
                    return
        finally:
            os.close(fd)
