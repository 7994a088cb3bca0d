"""Push ingest: a file given by the caller goes through a push source (``AddPushSource``).

One file is one commit. The source is chosen as the reference does: the only push source, or
the one named by ``source_name``; a dataset with a polling source takes no pushed data. The
fallback event time is ``event_time`` (``--event-time``) or the time the ingest started.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from common.logs import get_logger
from common.odf.events import AddPushSource
from coordinator.dataset import Dataset, DatasetState
from coordinator.dataset.state import next_system_time
from coordinator.ingest.context import (
    IngestResult,
    chain_context,
    commit_staged,
    retrying_conflicts,
)
from coordinator.ingest.errors import SourceNotFoundError
from coordinator.ingest.progress import NO_PROGRESS, Progress, counted
from coordinator.ingest.readers import read_data, read_step_for_format
from coordinator.ingest.readers.stream import DataStream
from coordinator.ingest.writer import WriteOptions, stage_write

if TYPE_CHECKING:
    from coordinator.ingest.preprocess import RawQueryEngineProvider

log = get_logger(__name__)


def choose_push_source(state: DatasetState, name: str, source_name: str | None) -> AddPushSource:
    """The push source that takes the data (see the module docstring)."""
    if state.polling_source is not None:
        raise SourceNotFoundError(
            f"dataset {name!r} has a polling source, not a push source: use `odf pull {name}`"
        )
    sources = state.push_sources
    if source_name is None:
        if len(sources) == 1:
            return sources[0]
        if not sources:
            raise SourceNotFoundError(f"dataset {name!r} has no push source (AddPushSource)")
        names = ", ".join(s.source_name for s in sources)
        raise SourceNotFoundError(
            f"dataset {name!r} has several push sources ({names}): choose one with --source-name"
        )
    source = state.push_source(source_name)
    if source is None:
        names = ", ".join(s.source_name for s in sources) or "none"
        raise SourceNotFoundError(
            f"dataset {name!r} has no push source {source_name!r} (sources: {names})"
        )
    return source


def push_ingest(
    dataset: Dataset,
    path: Path,
    *,
    name: str | None = None,
    source_name: str | None = None,
    input_format: str | None = None,
    event_time: datetime | None = None,
    engines: RawQueryEngineProvider | None = None,
    progress: Progress = NO_PROGRESS,
    system_time: datetime | None = None,
    csv_columns_by_position: bool = False,
) -> IngestResult:
    """Ingest the file at ``path`` (``name`` is how errors and logs call it);
    ``csv_columns_by_position``: see ``read_data``.

    ``system_time`` (default: now) is the records' and blocks' system time; it must not be
    before the head block's. Prepared again if another writer commits first (see
    ``retrying_conflicts``).
    """
    shown = name or str(path)
    request = _PushRequest(
        shown, source_name, input_format, event_time, system_time, csv_columns_by_position
    )
    return retrying_conflicts(
        dataset, lambda: _push_once(dataset, path, request, engines, progress)
    )


@dataclass(frozen=True, slots=True)
class _PushRequest:
    name: str
    source_name: str | None
    input_format: str | None
    event_time: datetime | None
    system_time: datetime | None
    csv_columns_by_position: bool


def _push_once(
    dataset: Dataset,
    path: Path,
    request: _PushRequest,
    engines: RawQueryEngineProvider | None,
    progress: Progress,
) -> IngestResult:
    shown = request.name
    state, context = chain_context(dataset)
    source = choose_push_source(state, dataset.alias, request.source_name)
    step = read_step_for_format(source.read, request.input_format)
    system_time = request.system_time or next_system_time(state)
    with dataset.staging_dir() as staging:
        data: DataStream | None = None
        if path.stat().st_size > 0:
            by_position = request.csv_columns_by_position
            data = read_data(step, path, name=shown, csv_columns_by_position=by_position)
            if source.preprocess is not None:
                from coordinator.ingest.preprocess import preprocess  # the engine protocol

                data = preprocess(data, source.preprocess, engines, staging)
            data = counted(data, progress, f"ingest {shown}")
        options = WriteOptions(
            system_time=system_time,
            fallback_event_time=request.event_time or system_time,
            new_source_state=None,
            source=shown,
            declared_schema=getattr(step, "schema", None) is not None,
        )
        staged = stage_write(context, source.merge, data, options, staging)
        if staged is None:
            log.info("up to date", dataset=dataset.alias, file=shown)
            return IngestResult(dataset.alias, state.head, state.head, 0, up_to_date=True)
        new_head = commit_staged(dataset, state, staged, system_time)
    log.info("ingested", dataset=dataset.alias, file=shown, records=staged.num_records)
    return IngestResult(dataset.alias, state.head, new_head, staged.num_records, up_to_date=False)
