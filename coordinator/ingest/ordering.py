"""A stable sort of a record stream by one time column, in bounded memory.

Offsets follow the merge strategy's order, so Append and Ledger records are stably sorted by
event time before they are numbered. Most inputs are already in order (or carry no event time
of their own, so every record has the same fallback time): those batches go straight to the
sink. At the first batch out of order the sink gives back what it wrote so far, which becomes
the first sorted run; the rest of the input is cut into chunks that are sorted and spilled to
Arrow IPC files, and all runs are merged. Ties keep input order: the merge compares
(key, input position).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from common.arrow_values import int_scalar, sequence

RUN_BYTES = 256 << 20
"""Arrow bytes per sorted chunk held in memory before it is spilled."""

_SEQ = "__odf_seq"
_KEY = "__odf_key"


class RestartableSink(Protocol):
    def write(self, batch: pa.RecordBatch) -> None: ...

    def take_back(self) -> Iterator[pa.RecordBatch]:
        """Everything written so far, in order; the sink starts over empty."""
        ...


def key_values(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The sort key as int64 (timestamps and dates by their ticks)."""
    if pa.types.is_date32(column.type):
        return column.cast(pa.int32()).cast(pa.int64())
    return column.cast(pa.int64())


def write_sorted(
    batches: Iterable[pa.RecordBatch],
    key: str,
    sink: RestartableSink,
    spill_dir: Path,
    *,
    run_bytes: int | None = None,
) -> None:
    """Write ``batches`` to ``sink`` stably sorted by ``key`` (ascending, no NULLs)."""
    run_bytes = RUN_BYTES if run_bytes is None else run_bytes
    it = iter(batches)
    last: int | None = None
    for batch in it:
        if batch.num_rows == 0:
            continue
        keys = key_values(batch.column(key))
        if _in_order(keys, last):
            sink.write(batch)
            last = keys[-1].as_py()
            continue
        written = _Run(_numbered(sink.take_back(), 0))
        rest = itertools.chain([batch], it)
        for out in _merge_runs([written, *_sorted_runs(rest, key, spill_dir, run_bytes)], key):
            sink.write(out)
        return


def _in_order(keys: pa.Array, last: int | None) -> bool:
    if last is not None and keys[0].as_py() < last:
        return False
    if len(keys) < 2:
        return True
    return bool(pc.all(pc.less_equal(keys[:-1], keys[1:])).as_py())


class _Run:
    """A sorted run: batches with a ``_SEQ`` column (input position), read lazily."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self.batches = batches


def _numbered(batches: Iterator[pa.RecordBatch], start: int) -> Iterator[pa.RecordBatch]:
    position = start
    for batch in batches:
        yield _append_seq(batch, position)
        position += batch.num_rows


def _append_seq(batch: pa.RecordBatch, start: int) -> pa.RecordBatch:
    seq = sequence(start, batch.num_rows)
    return pa.RecordBatch.from_arrays(
        [*batch.columns, seq], schema=batch.schema.append(pa.field(_SEQ, pa.int64()))
    )


def _sorted_runs(
    batches: Iterator[pa.RecordBatch], key: str, spill_dir: Path, run_bytes: int
) -> list[_Run]:
    """The remaining input as sorted runs: spilled chunks, the last one kept in memory.

    Positions start at 2**62 so that every row sorts after the first run's rows on ties.
    """
    runs: list[_Run] = []
    chunk: list[pa.RecordBatch] = []
    size = 0
    position = 1 << 62  # after every row of the first run, whatever its length
    for batch in batches:
        chunk.append(_append_seq(batch, position))
        position += batch.num_rows
        size += batch.nbytes
        if size >= run_bytes:
            runs.append(_spill(_sort_chunk(chunk, key), spill_dir / f"run-{len(runs)}.arrow"))
            chunk, size = [], 0
    if chunk:
        table = _sort_chunk(chunk, key)
        runs.append(_Run(iter(table.to_batches(max_chunksize=65536))))
    return runs


def _sort_chunk(chunk: list[pa.RecordBatch], key: str) -> pa.Table:
    table = pa.Table.from_batches(chunk)
    keyed = table.append_column(_KEY, key_values(table[key]))
    order = pc.sort_indices(keyed, sort_keys=[(_KEY, "ascending"), (_SEQ, "ascending")])
    return table.take(order)


def _spill(table: pa.Table, path: Path) -> _Run:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=65536):
            writer.write_batch(batch)
    del table

    def read() -> Iterator[pa.RecordBatch]:
        with pa.OSFile(str(path), "rb") as source:
            yield from pa.ipc.open_stream(source)
        path.unlink(missing_ok=True)

    return _Run(read())


def _merge_runs(runs: list[_Run], key: str) -> Iterator[pa.RecordBatch]:
    """K-way merge of sorted runs, a slice of every run per round (vectorised)."""
    buffers: list[pa.Table] = [pa.table({}) for _ in runs]
    done = [False] * len(runs)
    while True:
        for i, run in enumerate(runs):
            while not done[i] and buffers[i].num_rows == 0:
                batch = next(run.batches, None)
                if batch is None:
                    done[i] = True
                else:
                    buffers[i] = pa.Table.from_batches([batch])
        active = [i for i, b in enumerate(buffers) if b.num_rows]
        if not active:
            return
        frontier = min(_last(buffers[i], key) for i in active)
        taken = []
        for i in active:
            count = _count_up_to(buffers[i], key, frontier)
            taken.append(buffers[i].slice(0, count))
            buffers[i] = buffers[i].slice(count)
        out = _sort_chunk([b for t in taken for b in t.to_batches()], key)
        for batch in out.drop_columns([_SEQ]).to_batches():
            yield batch


def _last(table: pa.Table, key: str) -> tuple[int, int]:
    k = key_values(table[key].slice(table.num_rows - 1))
    return int(k[0].as_py()), int(table[_SEQ][table.num_rows - 1].as_py())


def _count_up_to(table: pa.Table, key: str, frontier: tuple[int, int]) -> int:
    k = key_values(table[key])
    s = table[_SEQ]
    fk = int_scalar(frontier[0], pa.int64())
    fs = int_scalar(frontier[1], pa.int64())
    mask = pc.or_(pc.less(k, fk), pc.and_(pc.equal(k, fk), pc.less_equal(s, fs)))
    return int(pc.sum(mask.cast(pa.int64())).as_py() or 0)
