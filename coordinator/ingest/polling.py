"""Polling ingest: one iteration of a dataset's ``SetPollingSource``, and the pull loop.

An iteration: fetch (skipped when the source is uncacheable, see below) → prepare → read →
preprocess → merge and write → commit one ``AddData`` (preceded by ``SetDataSchema`` when
needed) with the new source state. Nothing is committed when the source is unchanged. The
loop repeats while the fetch says more data waits (FilesGlob, Container), one commit each.

Uncacheable sources, as in the reference: once data was ingested from a source that recorded
no state (e.g. a server without ETag or Last-Modified), it is not fetched again unless
``fetch_uncacheable`` is set.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from common.logs import get_logger
from common.odf.events import SetPollingSource
from common.odf.fragments import FetchStepMqtt
from coordinator.dataset import Dataset, DatasetState
from coordinator.dataset.provenance import check_may_run, check_source_trusted
from coordinator.dataset.state import next_system_time
from coordinator.ingest.context import (
    IngestResult,
    chain_context,
    commit_staged,
    retrying_conflicts,
)
from coordinator.ingest.fetch import ClientFactory, UpToDate, default_client, fetch
from coordinator.ingest.fetch.result import Fetched
from coordinator.ingest.prepare import prepare
from coordinator.ingest.preprocess import RawQueryEngineProvider, preprocess
from coordinator.ingest.progress import NO_PROGRESS, Progress, counted
from coordinator.ingest.readers import read_data
from coordinator.ingest.readers.stream import DataStream
from coordinator.ingest.source_state import decode_source_state, encode_source_state
from coordinator.ingest.writer import ChainContext, WriteOptions, stage_write

log = get_logger(__name__)

MAX_ITERATIONS = 100_000
"""A guard against a source that always says it has more."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PollOptions:
    """How ``poll_once`` polls (``pull_root`` passes them on to each iteration).

    ``system_time`` (default: now) must not be before the head block's.
    ``csv_columns_by_position``: see ``read_data``.
    """

    fetch_uncacheable: bool = False
    engines: RawQueryEngineProvider | None = None
    progress: Progress = NO_PROGRESS
    container_client: ClientFactory = default_client
    system_time: datetime | None = None
    csv_columns_by_position: bool = False


DEFAULT_OPTIONS = PollOptions()


def poll_once(dataset: Dataset, options: PollOptions = DEFAULT_OPTIONS) -> IngestResult:
    """One polling iteration: at most one commit (prepared again after a conflict)."""
    return retrying_conflicts(dataset, lambda: _poll(dataset, options))


def _poll(dataset: Dataset, poll: PollOptions) -> IngestResult:
    check_may_run(dataset.layout, dataset.alias, "running its polling source")
    state, context = chain_context(dataset)
    source = state.polling_source
    if source is None:
        return _unchanged(dataset, state, "no polling source defined")
    check_source_trusted(dataset.layout, dataset.alias, source)
    prev = decode_source_state(context.prev_source_state)
    keeps_no_state = prev is None and not isinstance(source.fetch, FetchStepMqtt)
    if context.prev_offset is not None and keeps_no_state and not poll.fetch_uncacheable:
        return _unchanged(
            dataset,
            state,
            "the source keeps no state, so it is not fetched again"
            " (use --fetch-uncacheable to force)",
        )
    system_time = poll.system_time or next_system_time(state)
    with dataset.staging_dir() as staging:
        fetched = fetch(
            source.fetch,
            prev,
            staging,
            progress=poll.progress,
            container_client=poll.container_client,
            mqtt_client_id=mqtt_client_id(dataset),
        )
        if isinstance(fetched, UpToDate):
            return _unchanged(dataset, state, None)
        data = _read(source, fetched, staging, poll)
        options = WriteOptions(
            system_time=system_time,
            fallback_event_time=fetched.source_event_time or system_time,
            new_source_state=(
                encode_source_state(fetched.source_state) if fetched.source_state else None
            ),
            source=fetched.name,
        )
        return _write_and_commit(dataset, state, context, source, data, options, staging, fetched)


def mqtt_client_id(dataset: Dataset) -> str:
    """The dataset's MQTT client id: stable (the broker keeps its session between polls) and
    within MQTT 3.1.1's 23 characters."""
    return f"odf-{dataset.id.to_multibase()[-19:]}"


def _read(
    source: SetPollingSource, fetched: Fetched, staging: Path, poll: PollOptions
) -> DataStream | None:
    prepared = prepare(source.prepare or (), fetched.path, staging, name=fetched.name)
    if not prepared.exists() or prepared.stat().st_size == 0:
        return None
    data = read_data(
        source.read,
        prepared,
        name=fetched.name,
        csv_columns_by_position=poll.csv_columns_by_position,
    )
    if source.preprocess is not None:
        data = preprocess(data, source.preprocess, poll.engines, staging)
    return counted(data, poll.progress, f"ingest {fetched.name}")


def _write_and_commit(
    dataset: Dataset,
    state: DatasetState,
    context: ChainContext,
    source: SetPollingSource,
    data: DataStream | None,
    options: WriteOptions,
    staging: Path,
    fetched: Fetched,
) -> IngestResult:
    staged = stage_write(context, source.merge, data, options, staging)
    if staged is None:
        return _unchanged(dataset, state, None)
    new_head = commit_staged(dataset, state, staged, options.system_time)
    log.info("pulled", dataset=dataset.alias, source=fetched.name, records=staged.num_records)
    return IngestResult(
        dataset.alias,
        state.head,
        new_head,
        staged.num_records,
        up_to_date=False,
        has_more=fetched.has_more,
    )


def _unchanged(dataset: Dataset, state: DatasetState, message: str | None) -> IngestResult:
    return IngestResult(dataset.alias, state.head, state.head, 0, up_to_date=True, message=message)


def pull_root(dataset: Dataset, options: PollOptions = DEFAULT_OPTIONS) -> Iterator[IngestResult]:
    """Poll until the source is exhausted; yields the result of every iteration."""
    for _ in range(MAX_ITERATIONS):
        result = poll_once(dataset, options)
        yield result
        if result.up_to_date or not result.has_more:
            return
