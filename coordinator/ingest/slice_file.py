"""The Parquet part file of one data slice, written batch by batch.

Each merged, sorted batch gets its offsets (contiguous from the slice's start offset) and the
``system_time`` column, its columns are put in the output order, and it is buffered until a
row group is full (1,048,576 rows as the reference, or 128 MiB of Arrow data), so that memory
stays bounded and small inputs make one row group. Settings follow the reference writer:
snappy, dictionary encoding, data page version 1.0 (the encoder's buffers come from
``memory_pool``). The file's bytes are hashed as they are written (``HashingFile``), so its
physical hash needs no second read of it, and written back to the disk as the file grows, so
the commit's fsync of it has little left to wait for.

The logical hash of each batch and the encoding of each row group run in two lanes
(``lane``), overlapped with the reading of the next batches: the caller only numbers the
rows and hands them on.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from common.arrow_values import sequence, time_of, timestamp_scalar
from common.hashing import LogicalHasher, logical_hash_parquet
from common.odf.fragments import DatasetVocabulary
from common.odf.multihash import Multihash
from coordinator.dataset.durable import HashedFile
from coordinator.ingest.lane import Lane
from coordinator.ingest.memory_pool import pipeline_pool
from coordinator.ingest.system_columns import TIME_TYPE

ROW_GROUP_ROWS = 1 << 20
ROW_GROUP_BYTES = 128 << 20
READ_BACK_ROWS = 65536
SINK_BUFFER_BYTES = 4 << 20
_OFFSET = -1
_SYSTEM_TIME = -2


class HashingFile(io.RawIOBase):
    """The slice's new file as a Python file for Arrow's output stream: hashed as written and
    written back to the disk as it grows (``durable.HashedFile``)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = HashedFile(path)

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        return self._file.write(data)

    def tell(self) -> int:
        return self._file.size

    def close(self) -> None:
        self._file.close()
        super().close()

    def physical_hash(self) -> Multihash:
        """The multihash of everything written so far."""
        return self._file.physical_hash()


@dataclass(frozen=True, slots=True)
class SliceStats:
    logical_hash: Multihash
    physical_hash: Multihash
    size: int
    num_records: int
    offset_start: int
    offset_end: int
    max_event_time: datetime | None


class SliceFile:
    """Writes the slice to ``path``; ``close`` returns its stats (None when it has no rows)."""

    def __init__(
        self,
        path: Path,
        *,
        merged: pa.Schema,
        output: pa.Schema,
        vocab: DatasetVocabulary,
        start_offset: int,
        system_time: datetime,
    ) -> None:
        self.path = path
        self.merged = merged
        self.output = output
        self.vocab = vocab
        self.start_offset = start_offset
        self.system_time = timestamp_scalar(system_time, TIME_TYPE)
        """The ``system_time`` column value, the same on every record of the slice."""
        self._positions = [
            _OFFSET
            if f.name == vocab.offset_column
            else _SYSTEM_TIME
            if f.name == vocab.system_time_column
            else merged.get_field_index(f.name)
            for f in output
        ]
        """Where each output column comes from: a merged column, or one of the two made here."""
        self._writer: pq.ParquetWriter | None = None
        self._sink: HashingFile | None = None
        self._stream: pa.NativeFile | None = None
        self._buffer: list[pa.RecordBatch] = []
        self._buffered_rows = 0
        self._buffered_bytes = 0
        self._rows = 0
        self._max_event_time: pa.Scalar | None = None
        self._hasher = LogicalHasher(output, parallel=False)
        self._hashing = Lane("slice-hash")
        self._encoding = Lane("slice-write", depth=1)

    def write(self, batch: pa.RecordBatch) -> None:
        """Append a merged batch (op + data columns), already in slice order."""
        n = batch.num_rows
        if n == 0:
            return
        offsets = sequence(self.start_offset + self._rows, n)
        system_times = pa.repeat(self.system_time, n)
        columns = [
            offsets if i == _OFFSET else system_times if i == _SYSTEM_TIME else batch.column(i)
            for i in self._positions
        ]
        out = pa.RecordBatch.from_arrays(columns, schema=self.output)
        self._track_event_time(out.column(3))
        self._hashing.submit(self._hasher.update, out)
        self._rows += n
        self._buffer.append(out)
        self._buffered_rows += n
        self._buffered_bytes += out.nbytes
        if self._buffered_rows >= ROW_GROUP_ROWS or self._buffered_bytes >= ROW_GROUP_BYTES:
            self._flush()

    def _track_event_time(self, column: pa.Array) -> None:
        value = pc.max(column)
        if value.is_valid and (
            self._max_event_time is None or value.value > self._max_event_time.value
        ):
            self._max_event_time = value

    def _flush(self) -> None:
        if not self._buffer:
            return
        if self._writer is None:
            self._sink = HashingFile(self.path)
            # Buffered on the Arrow side: a few large writes reach the Python sink (and its
            # hasher, which releases the GIL), not one call per page.
            self._stream = pa.output_stream(self._sink, buffer_size=SINK_BUFFER_BYTES)
            self._writer = pq.ParquetWriter(
                self._stream,
                self.output,
                compression="snappy",
                use_dictionary=True,
                data_page_version="1.0",
                write_statistics=True,
                memory_pool=pipeline_pool(),
            )
        table = pa.Table.from_batches(self._buffer, schema=self.output)
        self._encoding.submit(self._writer.write_table, table, row_group_size=table.num_rows)
        self._buffer, self._buffered_rows, self._buffered_bytes = [], 0, 0

    def close(self) -> SliceStats | None:
        self._flush()
        self._hashing.close()
        sink = self._close_writer()
        if self._rows == 0 or sink is None:
            self.path.unlink(missing_ok=True)
            return None
        logical_hash = self._hasher.multihash()
        if self._hasher.depends_on_reads:  # struct nulls: the reference reads the file
            logical_hash = logical_hash_parquet(self.path)
        return SliceStats(
            logical_hash=logical_hash,
            physical_hash=sink.physical_hash(),
            size=self.path.stat().st_size,
            num_records=self._rows,
            offset_start=self.start_offset,
            offset_end=self.start_offset + self._rows - 1,
            max_event_time=_as_datetime(self._max_event_time),
        )

    def take_back(self) -> Iterator[pa.RecordBatch]:
        """What was written so far, as merged batches; the file starts over empty."""
        self._flush()
        self._hashing.drain()
        self._close_writer()
        run = self.path.with_name(self.path.name + ".run")
        had_rows = self._rows > 0
        if had_rows:
            self.path.rename(run)
        self._rows = 0
        self._max_event_time = None
        self._hasher = LogicalHasher(self.output, parallel=False)
        return self._read_run(run) if had_rows else iter(())

    def discard(self) -> None:
        """Give up the slice (the input failed): the lanes stopped, no file left behind. Their
        own errors are dropped: the caller raises the one that made it give up."""
        with contextlib.suppress(Exception):
            self._hashing.close()
        with contextlib.suppress(Exception):
            self._close_writer()
        self.path.unlink(missing_ok=True)

    def _close_writer(self) -> HashingFile | None:
        """Finish the Parquet file (footer written, file closed); its hashing sink, if any."""
        sink = self._sink
        try:
            self._encoding.close()  # the row groups given to it are written
        finally:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            if self._stream is not None:
                self._stream.close()  # its last bytes reach the sink
                self._stream = None
            if sink is not None:
                sink.close()
                self._sink = None
        return sink

    def _read_run(self, run: Path) -> Iterator[pa.RecordBatch]:
        file = pq.ParquetFile(run)
        try:
            for batch in file.iter_batches(batch_size=READ_BACK_ROWS, columns=self.merged.names):
                yield pa.RecordBatch.from_arrays(batch.columns, schema=self.merged)
        finally:
            file.close()
            run.unlink(missing_ok=True)


def _as_datetime(value: pa.Scalar | None) -> datetime | None:
    """A max event time as an aware datetime; a date becomes midnight UTC of that day."""
    return None if value is None else time_of(value)
