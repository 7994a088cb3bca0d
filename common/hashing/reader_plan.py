"""How the reference's Parquet reader cuts a file's rows into record batches and reads.

kamu computes a data file's stored logical hash with arrow-rs's ``ParquetRecordBatchReader``
in batches of ``REFERENCE_BATCH_ROWS`` rows. Two cuts of the row stream matter to the hash:

- **batches**: the reader hands out exactly ``batch_rows`` rows per batch (the last one
  shorter); a batch spans row groups (``read_records`` moves on to the next column chunk when
  one is exhausted). arrow-digest's per-batch OR rule for struct nulls (``validity``) is
  decided over these batches. DataFusion's scan, our test oracle, cuts batches at row groups
  instead (``batches_cut_at_row_groups``).
- **reads**: one batch is read, per leaf column, by one ``GenericColumnReader::read_records``
  call per row group it touches (a read spans pages). arrow-rs decodes a read's non-null
  values densely and then spreads them to their rows (``pad_nulls``): the slot of a null row
  at position ``j`` of its read keeps the ``j``-th non-null value of that read when ``j`` is
  below the number of values read, and zero otherwise (``reader_leftovers``).

A plan without row groups (records hashed in memory, not read from a file) has batches only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

REFERENCE_BATCH_ROWS = 10_000

Positions = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ReaderPlan:
    """The batches and reads of the reference reader over one row stream."""

    row_groups: tuple[int, ...] | None = None
    """Rows of each row group of the file, or ``None`` for records not read from a file."""
    batch_rows: int = REFERENCE_BATCH_ROWS
    batches_cut_at_row_groups: bool = False

    def __post_init__(self) -> None:
        if self.batch_rows < 1:
            raise ValueError("a reader plan needs batches of at least one row")

    @property
    def reads_known(self) -> bool:
        return self.row_groups is not None

    def batch_end(self, position: int) -> int:
        """The end (exclusive) of the batch that holds the row at ``position``."""
        bounds = self._batch_bounds()
        if bounds is None or position >= int(bounds[-1]):
            return (position // self.batch_rows + 1) * self.batch_rows
        return int(bounds[np.searchsorted(bounds, position, side="right")])

    def last_batch_end(self, start: int, stop: int) -> int:
        """The last batch boundary in ``[start, stop]`` (``start`` when there is none)."""
        end = start
        while (following := self.batch_end(end)) <= stop:
            end = following
        return end

    def batch_starts(self, first_row: int, length: int) -> Positions:
        """Where batches begin within rows ``[first_row, first_row + length)``: indexes
        relative to ``first_row``, the first one 0."""
        bounds = self._batch_bounds()
        if bounds is None:
            first = -(-first_row // self.batch_rows) * self.batch_rows
            bounds = np.arange(first, first_row + length, self.batch_rows, dtype=np.int64)
        return _starts_within(bounds, first_row, length)

    def read_starts(self, first_row: int, length: int) -> Positions:
        """Where reads begin within the rows (as ``batch_starts``): batch or row-group
        boundaries."""
        starts = self.batch_starts(first_row, length)
        if self.row_groups is None:
            return starts
        groups = _starts_within(_cumulative(self.row_groups), first_row, length)
        return np.union1d(starts, groups)

    def _batch_bounds(self) -> Positions | None:
        """Every batch boundary of a file, 0 and the end included (``None``: no file)."""
        if self.row_groups is None:
            return None
        if not self.batches_cut_at_row_groups:
            total = sum(self.row_groups)
            inner = np.arange(0, total, self.batch_rows, dtype=np.int64)
            return np.append(inner, total)
        groups = _cumulative(self.row_groups)
        pieces = [
            np.arange(start, stop, self.batch_rows, dtype=np.int64)
            for start, stop in zip(groups[:-1].tolist(), groups[1:].tolist(), strict=True)
        ]
        return np.unique(np.concatenate([*pieces, groups[-1:]]))


def _cumulative(rows: tuple[int, ...]) -> Positions:
    bounds = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(rows, out=bounds[1:])
    return bounds


def _starts_within(bounds: Positions, first_row: int, length: int) -> Positions:
    inside = bounds[(bounds > first_row) & (bounds < first_row + length)] - first_row
    return np.concatenate([np.zeros(1, dtype=np.int64), inside])


def reader_leftovers(
    own: npt.NDArray[np.bool_], blank: npt.NDArray[np.bool_], read_starts: Positions
) -> Positions:
    """For each ``blank`` row, the row whose value arrow-rs leaves in its slot, or -1 when it
    leaves zero (module doc); other rows get their own index.

    ``own`` is the column's own validity (its non-null values), ``read_starts`` where its
    reads begin (``ReaderPlan.read_starts`` over the same rows).
    """
    source = np.arange(len(own), dtype=np.int64)
    blank_rows = np.flatnonzero(blank).astype(np.int64)
    valid_rows = np.flatnonzero(own).astype(np.int64)
    if len(blank_rows) == 0:
        return source
    if len(valid_rows) == 0:
        source[blank_rows] = -1
        return source
    read_of = np.searchsorted(read_starts, blank_rows, side="right") - 1
    read_stops = np.append(read_starts[1:], len(own))
    # Non-null values before each read's start and within each read.
    first_rank = np.searchsorted(valid_rows, read_starts)
    values_read = np.searchsorted(valid_rows, read_stops) - first_rank
    j = blank_rows - read_starts[read_of]
    kept = j < values_read[read_of]
    rank = np.where(kept, first_rank[read_of] + j, 0)
    source[blank_rows] = np.where(kept, valid_rows[rank], -1)
    return source
