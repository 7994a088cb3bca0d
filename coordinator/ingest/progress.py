"""Progress reporting for long fetches and ingests, independent of how it is shown.

The pipeline reports through a ``Progress``; the CLI passes one drawing rich progress bars
(``coordinator.cli.ingest_progress``), everything else gets ``NO_PROGRESS``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import pyarrow as pa

from coordinator.ingest.readers.stream import DataStream


class ProgressTask(Protocol):
    def advance(self, amount: int) -> None: ...

    def close(self) -> None: ...


class Progress(Protocol):
    def task(self, description: str, *, total: int | None = None, unit: str = "B") -> ProgressTask:
        """A new task; ``unit`` is ``"B"`` (bytes) or ``"records"``."""
        ...


class _NoTask:
    def advance(self, amount: int) -> None:
        del amount

    def close(self) -> None:
        pass


class _NoProgress:
    def task(self, description: str, *, total: int | None = None, unit: str = "B") -> ProgressTask:
        del description, total, unit
        return _NoTask()


NO_PROGRESS: Progress = _NoProgress()


def counted(data: DataStream, progress: Progress, description: str) -> DataStream:
    """``data`` reporting its records to ``progress`` as they are read."""

    def batches() -> Iterator[pa.RecordBatch]:
        task = progress.task(description, unit="records")
        try:
            for batch in data:
                task.advance(batch.num_rows)
                yield batch
        finally:
            task.close()

    return DataStream(data.schema, batches())
