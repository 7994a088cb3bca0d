"""The optional preprocess step: the source's SQL run by an engine's raw query.

The read records are written to a Parquet file, the engine runs the transform over it (the
input is the table ``input``; each aliased query is a view, the last one is the output) and
writes its result to another Parquet file, which is then read in batches. Engines are found
by name through a ``RawQueryEngineProvider`` that whoever runs the ingest supplies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from common.odf.engine_protocol import (
    RawQueryRequest,
    RawQueryResponse,
    RawQueryResponseInternalError,
    RawQueryResponseInvalidQuery,
    RawQueryResponseSuccess,
)
from common.odf.fragments import TransformSql
from coordinator.ingest.errors import PreprocessError
from coordinator.ingest.readers.stream import BATCH_ROWS, DataStream


class RawQueryEngine(Protocol):
    def execute_raw_query(self, request: RawQueryRequest) -> RawQueryResponse:
        """Run ``request.transform`` over the input files; the final response."""
        ...


RawQueryEngineProvider = Callable[[str], RawQueryEngine]
"""The engine for an engine name (``spark``, ``datafusion``, ...)."""


def preprocess(
    data: DataStream,
    transform: TransformSql,
    engines: RawQueryEngineProvider | None,
    work_dir: Path,
) -> DataStream:
    """``data`` transformed by the preprocess query."""
    if engines is None:
        raise PreprocessError(
            f"the source has a preprocess query for engine {transform.engine!r},"
            " but no engine is configured for ingestion"
        )
    engine = engines(transform.engine)
    input_path = work_dir / "preprocess-input.parquet"
    output_path = work_dir / "preprocess-output.parquet"
    _write_parquet(data, input_path)
    response = engine.execute_raw_query(
        RawQueryRequest(
            input_data_paths=(str(input_path),),
            transform=transform,
            output_data_path=str(output_path),
        )
    )
    match response:
        case RawQueryResponseSuccess():
            input_path.unlink(missing_ok=True)
            file = pq.ParquetFile(output_path)
            return DataStream(file.schema_arrow, _batches(file))
        case RawQueryResponseInvalidQuery():
            raise PreprocessError(f"the preprocess query is invalid: {_line(response.message)}")
        case RawQueryResponseInternalError():
            raise PreprocessError(
                f"the engine failed to run the preprocess query: {_line(response.message)}"
            )
        case _:
            raise PreprocessError(f"the engine gave no final response ({type(response).__name__})")


def _line(message: str) -> str:
    """The first line of an engine's message (errors are shown on one line)."""
    lines = message.strip().splitlines()
    return lines[0] if lines else "(no message)"


def _write_parquet(data: DataStream, path: Path) -> None:
    with pq.ParquetWriter(path, data.schema) as writer:
        for batch in data:
            writer.write_batch(batch)


def _batches(file: pq.ParquetFile) -> Iterator[pa.RecordBatch]:
    try:
        yield from file.iter_batches(batch_size=BATCH_ROWS)
    finally:
        file.close()
