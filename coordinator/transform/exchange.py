"""Handing input slices to the engine: memory-mapped Arrow IPC files, or Parquet paths.

- Arrow (the default, the spec's mmap exchange): the records of each input's offset interval
  are cut from its Parquet data files into one uncompressed Arrow IPC file, which the engine
  memory-maps without copying or decoding.
- Parquet: the engine gets the input's data files as they are, plus the interval to keep.

Either way every input also gets a schema file: its own slice when it has one, else an empty
Arrow IPC file with the input's schema, so an input without new records is an empty, typed
table (never an engine that has to guess a schema).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common.odf import engine_protocol as ep
from common.odf.fragments import OffsetInterval
from common.serde.arrow_ipc_file import empty_ipc_file
from coordinator.config import ExchangeFormat
from coordinator.dataset import Dataset
from coordinator.transform.errors import InputDataMissingError
from coordinator.transform.plan import DataFileRef, InputPlan
from coordinator.transform.shared_staging import stage_file

if TYPE_CHECKING:  # pyarrow loads only for the Arrow exchange (write_arrow_slice)
    import pyarrow as pa
    import pyarrow.parquet as pq

ARROW_SUFFIX = ".arrow"
_BATCH_ROWS = 64 * 1024


@dataclass(frozen=True, slots=True)
class PreparedInput:
    request: ep.TransformRequestInput
    records: int
    """Records written to the exchange file (Arrow) or selected in the data files (Parquet)."""


def prepare_input(
    plan: InputPlan,
    dataset: Dataset,
    directory: Path,
    index: int,
    fmt: ExchangeFormat,
    *,
    link: bool = False,
) -> PreparedInput:
    """The request entry for one input; writes its exchange files into ``directory``.
    ``link``: Parquet data files are linked (or copied) into ``directory`` (shared staging)
    rather than named where the dataset stores them."""
    interval = plan.offset_interval
    files = [(_data_file(dataset, f), f) for f in plan.files] if interval else []
    schema_file = directory / f"input-{index}.schema{ARROW_SUFFIX}"
    if fmt is ExchangeFormat.ARROW and interval is not None:
        slice_path = directory / f"input-{index}{ARROW_SUFFIX}"
        records = write_arrow_slice(files, interval, slice_path)
        data_paths: tuple[str, ...] = (str(slice_path),)
        schema_file = slice_path
    else:
        records = plan.num_records
        paths = [path for path, _ in files]
        if link:
            paths = [
                stage_file(path, directory / f"input-{index}-{k}.parquet")
                for k, path in enumerate(paths)
            ]
        data_paths = tuple(str(path) for path in paths)
        write_schema_file(plan.schema, schema_file)
    return PreparedInput(
        request=ep.TransformRequestInput(
            dataset_id=plan.dataset_id,
            dataset_alias=plan.dataset_alias,
            query_alias=plan.query_alias,
            vocab=plan.vocab,
            offset_interval=interval,
            data_paths=data_paths,
            schema_file=str(schema_file),
            explicit_watermarks=plan.explicit_watermarks,
        ),
        records=records,
    )


def _data_file(dataset: Dataset, ref: DataFileRef) -> Path:
    path = dataset.data_path(ref.physical_hash)
    if not path.is_file():
        raise InputDataMissingError(
            f"input {dataset.alias!r}: data file {ref.physical_hash} (offsets"
            f" {ref.file_interval.start}..{ref.file_interval.end}) is not stored at {path}"
        )
    return path


def write_arrow_slice(
    files: list[tuple[Path, DataFileRef]], interval: OffsetInterval, out: Path
) -> int:
    """Write the records of ``interval`` from ``files`` (oldest first) as one Arrow IPC file.

    A data file holds consecutive offsets, so the records of the interval are a row range of
    each file. The first file's schema is the slice's; later files are cast to it.
    """
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    schema: pa.Schema | None = None
    writer: ipc.RecordBatchFileWriter | None = None
    written = 0
    with pa.OSFile(str(out), "wb") as sink:
        try:
            for path, ref in files:
                parquet = pq.ParquetFile(path)
                if writer is None:
                    schema = parquet.schema_arrow.remove_metadata()
                    writer = ipc.new_file(sink, schema)
                assert schema is not None
                for batch in _rows_in(parquet, ref.file_interval, interval):
                    written += batch.num_rows
                    writer.write_batch(_conform(batch, schema))
        finally:
            if writer is not None:
                writer.close()
    return written


def _rows_in(
    parquet: pq.ParquetFile, file_interval: OffsetInterval, wanted: OffsetInterval
) -> Iterator[pa.RecordBatch]:
    """The batches of ``parquet`` whose rows are in ``wanted``, streamed."""
    first = max(file_interval.start, wanted.start) - file_interval.start
    last = min(file_interval.end, wanted.end) - file_interval.start
    if last < first:
        return
    row = 0
    for batch in parquet.iter_batches(batch_size=_BATCH_ROWS):
        lo, hi = max(first, row), min(last, row + batch.num_rows - 1)
        if lo <= hi:
            whole = lo == row and hi == row + batch.num_rows - 1
            yield batch if whole else batch.slice(lo - row, hi - lo + 1)
        row += batch.num_rows
        if row > last:
            return


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema, check_metadata=False):
        return batch.replace_schema_metadata(None) if batch.schema.metadata else batch
    return batch.cast(schema)


def write_schema_file(schema: bytes, out: Path) -> None:
    """An input's schema (its stored Schema flatbuffer) as an Arrow IPC file with no records,
    written around the stored bytes without pyarrow (``empty_ipc_file``): the Parquet exchange
    then reaches its engine call without importing pyarrow. A schema with custom metadata is
    decoded and written by pyarrow, without the metadata."""
    try:
        data = empty_ipc_file(schema)
    except ValueError:
        import pyarrow as pa
        import pyarrow.ipc as ipc

        from common.serde.arrow_schema import decode_arrow_schema

        bare = decode_arrow_schema(schema).remove_metadata()
        with pa.OSFile(str(out), "wb") as sink, ipc.new_file(sink, bare):
            return
    out.write_bytes(data)
