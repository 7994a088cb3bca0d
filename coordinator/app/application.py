"""The application layer: one workspace, its configuration and its engines, and every use case.

``Application`` is the composition root of the coordinator: it opens a workspace, reads
``.odf/config.yaml`` once, owns engine provisioning (``engines``), and exposes each use case
as a method that returns plain results or yields progress events. The CLI parses arguments,
calls one method and renders what it gets; the daemon calls the same methods. Nothing here
prints or knows about terminals; nothing below this layer reads the configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from common.odf.block import MetadataBlock
from common.odf.errors import OdfError, ValidationError
from common.odf.fragments import DatasetKind, TransformInput, TransformSql
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from coordinator.app import pull_events
from coordinator.app.listing import DatasetSummary, list_datasets, log, summarize
from coordinator.app.snapshots import SnapshotSource, creation_order
from coordinator.app.use_cases import (
    IngestOptions,
    PullOptions,
    QueryOptions,
    TransformOptions,
    VerifyOptions,
)
from coordinator.config import WorkspaceConfig, load_config
from coordinator.dataset import Dataset
from coordinator.dataset.provenance import check_may_run, provenance
from coordinator.dataset.writer_locks import LOCKS_DIR, WriterLocks
from coordinator.workspace import Workspace

if TYPE_CHECKING:  # imported where used: a command loads only what it runs
    import pyarrow as pa

    from coordinator.engine import EngineMounts, EnginePool, EngineProvider, EngineSession
    from coordinator.evolution.query_change import QueryChange
    from coordinator.ingest.compaction import Compacted
    from coordinator.ingest.context import IngestResult
    from coordinator.ingest.preprocess import RawQueryEngine, RawQueryEngineProvider
    from coordinator.ingest.progress import Progress
    from coordinator.query import QueryResult
    from coordinator.query.export import Exported, ExportFormat, ExportTarget
    from coordinator.transform.lineage import Lineage
    from coordinator.transform.runner import Transformer
    from coordinator.verify.replay import ReplayResult
    from coordinator.verify.report import DatasetReport

Clock = Callable[[], datetime]
ReplayProgress = Callable[[str, "ReplayResult"], None]
"""Told of each replayed block: the dataset's name and the outcome."""


# --- results and events --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AddedDataset:
    """A dataset ``add`` created."""

    alias: str
    id: DatasetID


@dataclass(frozen=True, slots=True)
class ResetDone:
    """A dataset moved back to ``head``, ``removed`` blocks fewer; ``invalidated``: the
    dependents (with ``force``) whose recorded inputs are gone."""

    dataset: str
    head: Multihash
    removed: int
    invalidated: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IngestFile:
    """A file to push into a root dataset, and how to name it in results."""

    path: Path
    name: str


@contextmanager
def _located(source: SnapshotSource) -> Iterator[None]:
    """A ``ValidationError`` inside names the snapshot's file (and keeps its field path)."""
    try:
        yield
    except ValidationError as e:
        where = f"{source.origin}: {e.path}" if e.path else source.origin
        raise ValidationError(e.reason, path=where) from None


# --- the application -----------------------------------------------------------------------------


class Application:
    """The use cases of one workspace (see the module doc)."""

    def __init__(
        self,
        ws: Workspace,
        config: WorkspaceConfig | None = None,
        *,
        provider: EngineProvider | None = None,
    ) -> None:
        self.ws = ws
        self.config = config if config is not None else load_config(ws.odf_dir)
        self._provider = provider
        self.pool: EnginePool | None = None
        """Set by a long-running service: engines then stay warm across calls."""
        self.progress: Progress | None = None
        """Where a command shows its work: an engine starting shows there as
        ``starting engine ...`` for as long as it starts (set by the CLI)."""
        self.writers = WriterLocks(ws.odf_dir / LOCKS_DIR, timeout=self.config.writers.wait_timeout)
        """The datasets' writer locks: every use case changing a dataset holds its lock (a
        daemon marks them as its own; a command tells the user what it waits for)."""

    @property
    def provider(self) -> EngineProvider:
        """The configured engine provider, made on first use (the engine code loads only
        for the commands that run engines)."""
        if self._provider is None:
            from coordinator.engine import provider_from_config

            self._provider = provider_from_config(self.config.engine)
        return self._provider

    @classmethod
    def open(cls, start: Path | None = None) -> Application:
        """The application of the workspace containing ``start`` (default: the working dir)."""
        return cls(Workspace.find(start))

    @staticmethod
    def init(path: Path, *, exist_ok: bool = False) -> Workspace:
        return Workspace.init(path, exist_ok=exist_ok)

    def engines(self, mounts: EngineMounts | None = None) -> EngineSession:
        """A session of the configured engines: started on first use, stopped on exit; from
        the warm pool when there is one (``keep_engines_warm``).

        ``mounts``: what a container engine must see (other providers see the host)."""
        from coordinator.engine import EngineSession

        if self.pool is not None:
            return self.pool.session()
        return self._showing_starts(EngineSession(self.provider, mounts))

    def _showing_starts(
        self, session: EngineSession, progress: Progress | None = None
    ) -> EngineSession:
        """``session``, its engines' starts shown on ``progress`` (default: the command's,
        ``self.progress``) as ``starting engine ...``."""
        shown = progress if progress is not None else self.progress
        if shown is not None:
            session.starting = partial(_engine_starting, shown)
        return session

    def keep_engines_warm(self, *, idle_timeout: float) -> EnginePool:
        """Keep engines running across calls (a daemon); ``close`` the pool to stop them.
        Pooled engines serve the workspace's datasets and scratch directory."""
        from coordinator.engine import EngineMounts, EnginePool
        from coordinator.engine.embedded import EmbeddedEngineProvider

        mounts = EngineMounts.of([], [self.ws.datasets_dir, self.ws.scratch_dir])
        provider = self.provider
        if isinstance(provider, EmbeddedEngineProvider):  # warm engines serve many calls
            provider = replace(provider, warm_up=True)
        self.pool = EnginePool(provider, mounts, idle_timeout=idle_timeout)
        return self.pool

    def dataset(self, name: str) -> Dataset:
        return self.ws.open_dataset(name)

    # --- datasets --------------------------------------------------------------------------------

    def add(self, sources: Sequence[SnapshotSource]) -> Iterator[AddedDataset]:
        """Create datasets from snapshots, inputs first, all or none: every snapshot is
        checked (``Workspace.check_snapshot``, its sources by ``check_sources``) and every
        derivative transform pinned to the engine and validated by it (started only if some
        query can be validated) before the first is created; if one cannot be created after
        all, those created before it are deleted again. Errors name the file and the field."""
        from coordinator.ingest.source_check import check_sources
        from coordinator.transform.creation import TransformCreation

        ordered = creation_order(sources)
        with self.engines() as engines:
            creation = TransformCreation(self.ws, engines)
            prepared = []
            for i, source in enumerate(ordered):
                earlier = [s.snapshot.name for s in ordered[:i]]
                with _located(source):
                    check_sources(self.ws.check_snapshot(source.snapshot, planned=earlier))
                    prepared.append((source, creation.prepare(source.snapshot)))
        created: list[Dataset] = []
        try:
            for source, snapshot in prepared:
                with _located(source):
                    created.append(self.ws.create_dataset(snapshot))
        except BaseException:
            for ds in reversed(created):  # dependents first
                self.ws.delete_dataset(ds.alias)
            raise
        for ds in created:
            yield AddedDataset(ds.alias, ds.id)

    def list_datasets(self) -> list[DatasetSummary]:
        """Every dataset; a broken one (unreadable head or blocks) with a one-line error."""
        return list_datasets(self.ws)

    def summary(self, name: str) -> DatasetSummary:
        """One dataset's summary (an error when it does not exist)."""
        ds = self.dataset(name)
        return summarize(ds.layout.root, ds.alias)

    def delete(self, names: Sequence[str]) -> list[str]:
        """Delete datasets (all must exist before any is deleted); their names."""
        datasets = [self.ws.open_dataset(name) for name in names]
        with self.writers.hold(datasets, "delete"):
            for ds in datasets:
                self.ws.delete_dataset(ds.alias)
        return [ds.alias for ds in datasets]

    def with_dependents(self, names: Sequence[str]) -> list[str]:
        """``names`` and every dataset downstream of them, dependents first (the order in
        which they can be deleted)."""
        from coordinator.transform.graph import inputs_first
        from coordinator.transform.lineage import Lineage, closure

        lineage = Lineage.of(self.ws.list_datasets())
        chosen = [self.dataset(n).alias for n in names]
        found = set(chosen)
        for name in chosen:
            found |= closure(name, lineage.downstream)
        order = [n.name for n in lineage.nodes if n.name in found]
        ranked = inputs_first(
            order,
            key=lambda n: n,
            upstream=lambda n: [u for u in lineage.upstream(n) if u in found],
        )
        return list(reversed(ranked))

    def reset(self, name: str, block: str, *, force: bool = False) -> ResetDone:
        """Move a dataset's head back to an earlier ``block`` (its hash, or a unique prefix of
        it); the later blocks and their files are deleted. Refused while a dependent has
        consumed a later block, unless ``force`` (the dependent's next pull then fails
        until it is reset too: the inputs it recorded are gone)."""
        dataset = self.dataset(name)
        dependents = self._dependents(dataset)
        with self._holding_dependents(dataset, dependents, "reset"):
            return self._reset(dataset, dependents, block, force=force)

    def _dependents(self, dataset: Dataset) -> list[Dataset]:
        """The datasets reading ``dataset`` directly."""
        return [self.dataset(d) for d in self.lineage(dataset.alias).downstream(dataset.alias)]

    def _holding_dependents(
        self, dataset: Dataset, dependents: list[Dataset], operation: str
    ) -> AbstractContextManager[None]:
        """The writer locks of ``dataset`` and of its ``dependents`` (so that none of them
        consumes its blocks meanwhile), all held as ``operation`` of ``dataset``."""
        keys = self.writers.keys([dataset, *dependents])
        return self.writers.hold_keys(dict.fromkeys(keys, dataset.alias), operation)

    def _reset(
        self, dataset: Dataset, dependents: list[Dataset], block: str, *, force: bool
    ) -> ResetDone:
        state = dataset.state()
        chain = [h for h, _ in dataset.iter_blocks()]
        target = dataset.find_block(block, path="BLOCK")
        if target == state.head:
            raise ValidationError(
                f"{target} is already the head of {dataset.alias!r}", path="BLOCK"
            )
        kept = set(chain[chain.index(target) :])
        stale = []
        for dependent_dataset in dependents:
            dependent = dependent_dataset.alias
            consumed = _consumed_block(dependent_dataset, dataset.id)
            if consumed is not None and consumed not in kept:
                stale.append(f"{dependent} (it has consumed {dataset.alias}'s block {consumed})")
        if stale and not force:
            raise OdfError(
                f"cannot reset {dataset.alias!r}: {'; '.join(stale)} would no longer find its"
                " inputs; reset those first, or --force"
            )
        removed = dataset.reset(target, expected_head=state.head)
        return ResetDone(dataset.alias, target, len(removed), tuple(stale))

    def compact(self, name: str, *, max_records: int | None = None) -> Compacted:
        """Rewrite a root dataset's chain with merged data slices (new block hashes);
        refused while a dependent has consumed any of its blocks."""
        from coordinator.ingest import DEFAULT_MAX_RECORDS
        from coordinator.ingest.compaction import compact

        dataset = self.dataset(name)
        check_may_run(dataset.layout, dataset.alias, "compacting it")
        dependents = self._dependents(dataset)
        limit = DEFAULT_MAX_RECORDS if max_records is None else max_records
        with self._holding_dependents(dataset, dependents, "compaction"):
            consumers = [d.alias for d in dependents if _consumed_block(d, dataset.id) is not None]
            if consumers:
                raise OdfError(
                    f"cannot compact {dataset.alias!r}: {', '.join(consumers)} consumed its"
                    " blocks, whose hashes compaction changes; reset or delete those first"
                )
            return compact(dataset, self.ws.datasets_dir, max_records=limit)

    def rename(self, name: str, new_name: str) -> str:
        """Rename a dataset; its new name."""
        with self.writers.hold([self.dataset(name)], "rename"):
            return self.ws.rename_dataset(name, new_name).alias

    def log(self, name: str, limit: int | None = None) -> list[tuple[Multihash, MetadataBlock]]:
        """The dataset's blocks, newest first (at most ``limit``)."""
        return log(self.ws, name, limit)

    def lineage(self, name: str | None = None) -> Lineage:
        """The dataset graph: all of it, or what lies upstream and downstream of ``name``."""
        from coordinator.transform.lineage import Lineage

        lineage = Lineage.of(self.ws.list_datasets())
        return lineage if name is None else lineage.around(self.dataset(name).alias)

    def blocks_of(
        self, name: str, event: type | tuple[type, ...]
    ) -> list[tuple[Multihash, MetadataBlock]]:
        """The dataset's blocks recording an ``event`` (a type or types), oldest first."""
        found = [(h, b) for h, b in self.dataset(name).iter_blocks() if isinstance(b.event, event)]
        found.reverse()
        return found

    def export(self, name: str, target: ExportTarget) -> Exported:
        """Write a dataset's records to a file (or a directory of parts) for other tools."""
        from coordinator.query.export import export_dataset

        return export_dataset(self.dataset(name), target)

    def export_to_stream(self, name: str, fmt: ExportFormat, stream: BinaryIO) -> Exported:
        """Write a dataset's records to an open binary stream (standard output)."""
        from coordinator.query.export import export_to_stream

        return export_to_stream(self.dataset(name), fmt, stream)

    def tail(self, name: str, n: int, *, skip: int = 0, as_of: Multihash | None = None) -> pa.Table:
        """The latest ``n`` records after the latest ``skip``; ``as_of``: at that block."""
        from coordinator.query.tail import tail_records

        return tail_records(self.dataset(name), n, skip=skip, as_of=as_of)

    def read(self, name: str, *, as_of: str | None = None) -> pa.RecordBatchReader:
        """A dataset's records, oldest first, as of a block or time (default: its head),
        streamed from its data files."""
        from coordinator.query.read import read_records

        return read_records(self.dataset(name), as_of)

    def schema(self, name: str) -> pa.Schema:
        ds = self.dataset(name)
        schema = ds.state().arrow_schema()
        if schema is None:
            raise no_schema_error(ds.alias)
        return schema

    # --- data ------------------------------------------------------------------------------------

    def ingest(
        self, name: str, files: Sequence[IngestFile], options: IngestOptions = IngestOptions()
    ) -> Iterator[IngestResult]:
        """Push ``files`` into a root dataset's push source, one commit each, in order."""
        from coordinator.ingest.progress import NO_PROGRESS
        from coordinator.ingest.push import push_ingest

        dataset = self.dataset(name)
        with ExitStack() as started:
            session: list[RawQueryEngineProvider] = []

            def engines(engine: str) -> RawQueryEngine:
                """A preprocess query's engine: the engine code loads (and the session
                starts) only when a source has such a query."""
                if not session:
                    from coordinator.engine import EngineMounts
                    from coordinator.engine.raw_query import RawQueryEngines

                    mounts = EngineMounts.of([], [dataset.layout.staging_root])
                    session.append(RawQueryEngines(started.enter_context(self.engines(mounts))))
                return session[0](engine)

            started.enter_context(self.writers.hold([dataset], "ingest"))
            for file in files:
                yield push_ingest(
                    dataset,
                    file.path,
                    name=file.name,
                    source_name=options.source_name,
                    input_format=options.input_format,
                    event_time=options.event_time,
                    engines=engines,
                    progress=options.progress or NO_PROGRESS,
                    csv_columns_by_position=self.config.ingest.csv_by_position(dataset.alias),
                )

    def set_watermark(self, name: str, watermark: datetime) -> Multihash:
        """Move a root dataset's watermark forward by hand; the new head."""
        from coordinator.ingest.watermark import set_watermark

        dataset = self.dataset(name)
        with self.writers.hold([dataset], "watermark change"):
            return set_watermark(dataset, watermark)

    def pull(
        self, names: Sequence[str] = (), options: PullOptions = PullOptions()
    ) -> Iterator[pull_events.PullEvent]:
        """Bring datasets up to date, inputs first: root datasets run their polling source,
        derivatives their transactions. One engine session serves the whole pull.

        A dataset that fails is reported (``PullFailed``) and the pull goes on, skipping the
        datasets that depend on it; ``options.fail_fast`` raises the first error instead."""
        from coordinator.transform.runner import (
            Transformer,
            engine_mounts,
            utc_now,
            workspace_resolver,
        )

        resolve = workspace_resolver(self.ws)
        named = {self.dataset(n).id for n in names}
        datasets = []
        for dataset in self.pull_order(names, options):
            remote = provenance(dataset.layout).clone_of
            if remote is None or dataset.id in named:  # a named clone: refused by its pull
                datasets.append(dataset)
            else:  # reached through -r or --all: a replica, synced only by its own pull
                yield pull_events.DerivativeDone(
                    dataset.alias, f"a clone of {remote}: not run here"
                )
        system_time = options.system_time
        clock: Clock = utc_now if system_time is None else (lambda: system_time)
        failed: dict[DatasetID, str] = {}
        with self.engines(engine_mounts(datasets, resolve)) as engines:
            self._showing_starts(engines, options.progress)
            transformer = Transformer(
                resolve,
                engines,
                self.config.transform,
                clock=clock,
                shared_staging=self.config.engine.staging_dir,
            )
            for dataset in datasets:
                broken = next((failed[i] for i in _input_ids(dataset) if i in failed), None)
                if broken is not None:
                    failed[dataset.id] = dataset.alias
                    yield pull_events.PullFailed(
                        dataset.alias, f"skipped: its input {broken!r} failed", broken
                    )
                    continue
                yield pull_events.PullStarted(dataset.alias)
                try:
                    with self.writers.hold([dataset], "pull"):
                        yield from self._pull_one(
                            dataset,
                            transformer,
                            engines,
                            options.fetch_uncacheable,
                            options.progress,
                            system_time,
                        )
                except OdfError as e:
                    if options.fail_fast:
                        raise
                    failed[dataset.id] = dataset.alias
                    yield pull_events.PullFailed(dataset.alias, str(e))

    def _pull_one(
        self,
        dataset: Dataset,
        transformer: Transformer,
        engines: EngineSession,
        fetch_uncacheable: bool,
        progress: Progress | None,
        system_time: datetime | None,
    ) -> Iterator[pull_events.PullEvent]:
        kind = dataset.state().kind
        if kind is DatasetKind.ROOT:
            from coordinator.engine.raw_query import RawQueryEngines
            from coordinator.ingest.polling import PollOptions, pull_root  # only for roots
            from coordinator.ingest.progress import NO_PROGRESS

            options = PollOptions(
                fetch_uncacheable=fetch_uncacheable,
                engines=RawQueryEngines(engines),
                progress=progress or NO_PROGRESS,
                system_time=system_time,
                csv_columns_by_position=self.config.ingest.csv_by_position(dataset.alias),
            )
            for result in pull_root(dataset, options):
                yield pull_events.RootPulled(dataset.alias, result)
        elif kind is DatasetKind.DERIVATIVE:
            from coordinator.transform.plan import UpToDate

            for step in transformer.steps(dataset):
                if isinstance(step, UpToDate):
                    yield pull_events.DerivativeDone(dataset.alias, step.reason)
                else:
                    yield pull_events.TransactionCommitted.of(dataset.alias, step)
        else:
            raise OdfError(f"dataset {dataset.alias!r} has no Seed block: nothing to pull")

    def pull_order(
        self, names: Sequence[str] = (), options: PullOptions = PullOptions()
    ) -> list[Dataset]:
        """The datasets ``pull`` brings up to date, in the order it does (inputs first)."""
        from coordinator.transform.graph import dependency_order
        from coordinator.transform.runner import workspace_resolver

        if options.all_datasets == bool(names):
            raise ValidationError("give dataset names or --all (not both)", path="NAME")
        every = options.all_datasets
        selected = self.ws.list_datasets() if every else [self.dataset(n) for n in names]
        return dependency_order(selected, workspace_resolver(self.ws), recursive=options.recursive)

    def set_transform(
        self, name: str, query: str | TransformSql, options: TransformOptions = TransformOptions()
    ) -> QueryChange:
        """Change a derivative dataset's query: SQL text (the engine defaults to the current
        query's) or a whole ``Transform``; ``options.inputs`` (``[ALIAS=]NAME``) replace the
        inputs."""
        from coordinator.evolution.query_change import change_query
        from coordinator.transform.runner import engine_mounts, workspace_resolver

        dataset = self.dataset(name)
        check_may_run(dataset.layout, dataset.alias, "changing its transform")
        current = dataset.state().transform
        transform = new_transform(
            query,
            engine=options.engine,
            version=options.version,
            current_engine=current.transform.engine if current else None,
        )
        resolve = workspace_resolver(self.ws)
        # A container engine migrating the dataset reads its checkpoint and writes to its staging.
        with (
            self.writers.hold([dataset], "transform change"),
            self.engines(engine_mounts([dataset], resolve)) as engines,
        ):
            return change_query(
                dataset,
                transform,
                resolve,
                engines,
                inputs=self.resolve_inputs(options.inputs) if options.inputs else None,
                exchange=self.config.transform.exchange,
                shared_staging=self.config.engine.staging_dir,
            )

    def resolve_inputs(self, specs: Sequence[str]) -> tuple[TransformInput, ...]:
        """``[ALIAS=]NAME`` as resolved transform inputs (the alias defaults to the name)."""
        inputs = []
        for spec in specs:
            alias, _, name = spec.rpartition("=")
            ds = self.dataset(name)
            inputs.append(TransformInput(dataset_ref=ds.id.to_did(), alias=alias or ds.alias))
        aliases = [i.alias for i in inputs]
        if len(set(aliases)) != len(aliases):
            raise ValidationError("two inputs have the same alias", path="--input")
        return tuple(inputs)

    def verify(
        self, names: Sequence[str], options: VerifyOptions = VerifyOptions()
    ) -> list[DatasetReport]:
        """One report per dataset (inputs first); engines start only when a replay needs one."""
        from coordinator.verify.engine_hashes import EngineHashes, hashes_on_executors
        from coordinator.verify.verifier import (
            Verifier,
            hash_mounts,
            replay_mounts,
            tolerant_resolver,
            verification_order,
        )

        selected = [self.dataset(n) for n in names]
        resolve = tolerant_resolver(self.ws)
        datasets = verification_order(selected, resolve, recursive=options.recursive)
        exchange = self.config.transform.exchange
        on_replay, on_bytes = options.on_replay, options.on_bytes

        def replayed(dataset: Dataset, result: ReplayResult) -> None:
            if on_replay is not None:
                on_replay(dataset.alias, result)

        if options.integrity_only:
            verifier = Verifier(resolve, None, exchange, on_replay=replayed, on_bytes=on_bytes)
            return [verifier.verify(ds) for ds in datasets]
        mounts = replay_mounts(datasets, resolve)
        on_executors = hashes_on_executors(self.config.engine.master, self.provider.kind)
        if on_executors:
            mounts = hash_mounts(datasets, mounts)
        with self.engines(mounts) as engines:
            verifier = Verifier(
                resolve,
                engines,
                exchange,
                on_replay=replayed,
                on_bytes=on_bytes,
                shared_staging=self.config.engine.staging_dir,
                engine_hashes=(
                    EngineHashes(
                        lambda: engines.get(None),
                        min_bytes=self.config.verify.executor_min_bytes,
                    )
                    if on_executors
                    else None
                ),
            )
            return [verifier.verify(ds) for ds in datasets]

    def query(self, query: str, options: QueryOptions = QueryOptions()) -> QueryResult:
        """Ad-hoc SQL over the workspace's datasets; at most ``options.limit`` rows read back;
        ``options.as_of`` (dataset -> block or time) reads datasets as they were then."""
        from coordinator.query import run_query

        return run_query(
            self.ws,
            query,
            self._query_engines,
            aliases=options.aliases,
            limit=options.limit,
            as_of=options.as_of,
        )

    @contextmanager
    def query_file(self, query: str, as_of: str | None = None) -> Iterator[tuple[Path, int]]:
        """Ad-hoc SQL over the workspace's datasets (``name@when`` for a dataset as of a
        block or a time; the others as of ``as_of`` if given), the whole result in an Arrow
        IPC file: its path and number of rows, until the context exits (then removed)."""
        from coordinator.query.runner import query_output, views_as_named

        views = views_as_named(self.ws, query, as_of)
        with query_output(self.ws, query, views, self._query_engines) as output:
            yield output

    def _query_engines(self, mounts: EngineMounts | None = None) -> EngineSession:
        """Engines for one ad-hoc query: a one-shot embedded engine compiles with C1 only
        (its start-up is most of the command's time; ``bench/bench_start.py``)."""
        from coordinator.engine import EngineSession
        from coordinator.engine.embedded import EmbeddedEngineProvider

        provider = self.provider
        if self.pool is not None or not isinstance(provider, EmbeddedEngineProvider):
            return self.engines(mounts)
        return self._showing_starts(EngineSession(replace(provider, quick_jit=True), mounts))


def _consumed_block(dependent: Dataset, input_id: DatasetID) -> Multihash | None:
    """The newest block of ``input_id`` that ``dependent``'s transactions have consumed."""
    last = dependent.state().last_execute_transform
    if last is None:
        return None
    entry = next((i for i in last.query_inputs if i.dataset_id == input_id), None)
    if entry is None:
        return None
    return entry.new_block_hash or entry.prev_block_hash


def _input_ids(dataset: Dataset) -> list[DatasetID]:
    from coordinator.transform.graph import input_ids

    try:
        return input_ids(dataset)
    except (OdfError, OSError):
        return []


def no_schema_error(dataset: str) -> ValidationError:
    return ValidationError(
        f"dataset {dataset!r} has no schema yet (it is set by the first ingest or transform)"
    )


def new_transform(
    query: str | TransformSql,
    *,
    engine: str | None = None,
    version: str | None = None,
    current_engine: str | None = None,
) -> TransformSql:
    """The transform of a query change: SQL text runs on ``engine``, else on the current
    query's engine (``spark`` by default); a whole ``Transform`` keeps its own engine unless
    ``engine`` is given; ``version`` pins it."""
    if isinstance(query, TransformSql):
        transform = query if engine is None else replace(query, engine=engine)
    else:
        transform = TransformSql(engine=engine or current_engine or "spark", query=query)
    return transform if version is None else replace(transform, version=version)


@contextmanager
def _engine_starting(progress: Progress, version: str | None) -> Iterator[None]:
    """A progress task for as long as an engine starts (10 s and more for a JVM)."""
    task = progress.task(f"starting engine {version or ''}".rstrip() + " ...", unit="")
    try:
        yield
    finally:
        task.close()
