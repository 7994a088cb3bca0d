"""``UseCases``: what a front end (the CLI) can ask of a workspace, wherever it is served.

``Application`` implements it in process; ``coordinator.daemon.client.DaemonClient``
implements it by calling the workspace's daemon, returning the same values, so each command
is written once and renders the same output either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from common.odf.block import MetadataBlock
    from common.odf.fragments import TransformSql
    from common.odf.multihash import Multihash
    from coordinator.app.application import AddedDataset, IngestFile, ReplayProgress, ResetDone
    from coordinator.app.listing import DatasetSummary
    from coordinator.app.pull_events import PullEvent
    from coordinator.app.snapshots import SnapshotSource
    from coordinator.evolution.query_change import QueryChange
    from coordinator.ingest.compaction import Compacted
    from coordinator.ingest.context import IngestResult
    from coordinator.ingest.progress import Progress
    from coordinator.query import QueryResult
    from coordinator.verify.report import DatasetReport


@dataclass(frozen=True, slots=True)
class IngestOptions:
    """How ``UseCases.ingest`` reads the files it pushes."""

    source_name: str | None = None
    """The push source (default: the dataset's only one)."""
    input_format: str | None = None
    """The files' media type or format name (default: the source's)."""
    event_time: datetime | None = None
    """For records without an event time (default: now)."""
    progress: Progress | None = None
    """Shows the reads and engine starts."""


@dataclass(frozen=True, slots=True)
class PullOptions:
    """Which datasets ``UseCases.pull`` brings up to date, and how."""

    all_datasets: bool = False
    """Every dataset of the workspace (then no names)."""
    recursive: bool = False
    """The named datasets' inputs too, upstream first."""
    system_time: datetime | None = None
    """The system time the commits record (default: the clock)."""
    fetch_uncacheable: bool = False
    """Fetch again the polling sources marked uncacheable."""
    fail_fast: bool = False
    """Raise the first error instead of reporting it and going on."""
    progress: Progress | None = None
    """Shows the fetches, reads and engine starts."""


@dataclass(frozen=True, slots=True)
class TransformOptions:
    """How ``UseCases.set_transform`` builds the new transform."""

    engine: str | None = None
    """The engine of a query given as SQL text (default: the current query's)."""
    version: str | None = None
    """The engine version to pin the new query to (default: the configured engine's)."""
    inputs: Sequence[str] | None = None
    """``[ALIAS=]NAME`` replacing the inputs (default: the current ones)."""


@dataclass(frozen=True, slots=True)
class VerifyOptions:
    """What ``UseCases.verify`` checks, and whom it tells as it goes."""

    recursive: bool = False
    """The datasets' inputs too, upstream first."""
    integrity_only: bool = False
    """Check hashes and links only; replay no transaction."""
    on_replay: ReplayProgress | None = None
    """Told of each replayed transaction (dataset, outcome)."""
    on_bytes: Callable[[int], None] | None = None
    """Told of the bytes hashed."""


@dataclass(frozen=True, slots=True)
class QueryOptions:
    """How ``UseCases.query`` names and reads the datasets, and how much it reads back."""

    aliases: Mapping[str, str] | None = None
    """View name -> dataset, for datasets under other names in the query."""
    limit: int | None = None
    """At most this many rows read back (default: all)."""
    as_of: Mapping[str, str] | None = None
    """Dataset -> block or time: the dataset as it was then."""


class Queries(Protocol):
    """What runs ad-hoc queries: the application, or a client of the daemon's."""

    def query(self, query: str, options: QueryOptions = QueryOptions()) -> QueryResult: ...


class UseCases(Protocol):
    def summary(self, name: str) -> DatasetSummary: ...

    def list_datasets(self) -> list[DatasetSummary]: ...

    def add(self, sources: Sequence[SnapshotSource]) -> Iterator[AddedDataset]: ...

    def delete(self, names: Sequence[str]) -> list[str]: ...

    def log(self, name: str, limit: int | None = None) -> list[tuple[Multihash, MetadataBlock]]: ...

    def reset(self, name: str, block: str, *, force: bool = False) -> ResetDone: ...

    def compact(self, name: str, *, max_records: int | None = None) -> Compacted: ...

    def rename(self, name: str, new_name: str) -> str: ...

    def set_watermark(self, name: str, watermark: datetime) -> Multihash: ...

    def tail(self, name: str, n: int, *, skip: int = 0) -> pa.Table: ...

    def read(self, name: str, *, as_of: str | None = None) -> pa.RecordBatchReader: ...

    def schema(self, name: str) -> pa.Schema: ...

    def ingest(
        self, name: str, files: Sequence[IngestFile], options: IngestOptions = IngestOptions()
    ) -> Iterator[IngestResult]: ...

    def pull(
        self, names: Sequence[str] = (), options: PullOptions = PullOptions()
    ) -> Iterator[PullEvent]: ...

    def set_transform(
        self, name: str, query: str | TransformSql, options: TransformOptions = TransformOptions()
    ) -> QueryChange: ...

    def verify(
        self, names: Sequence[str], options: VerifyOptions = VerifyOptions()
    ) -> list[DatasetReport]: ...

    def query(self, query: str, options: QueryOptions = QueryOptions()) -> QueryResult: ...
