"""An ingest's dealings with the dataset: the state it reads at one head, and its commit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from common.logs import get_logger
from common.odf.events import AddData, ExecuteTransform
from common.odf.fragments import DatasetKind
from common.odf.multihash import Multihash
from coordinator.dataset import CommitItem, ConflictError, Dataset, DatasetState
from coordinator.ingest.errors import SourceNotFoundError
from coordinator.ingest.history import History
from coordinator.ingest.writer import ChainContext, StagedWrite

log = get_logger(__name__)

CONFLICT_ATTEMPTS = 3
"""How often an ingest is prepared again when another writer committed first."""


@dataclass(frozen=True, slots=True)
class IngestResult:
    """The outcome of one ingest iteration (one file pushed, or one poll)."""

    dataset: str
    old_head: Multihash | None
    new_head: Multihash | None
    num_records: int
    up_to_date: bool
    has_more: bool = False
    """A polling source with more to fetch (FilesGlob, Container)."""
    message: str | None = None
    """Why nothing was committed, when that is worth saying."""


def chain_context(dataset: Dataset) -> tuple[DatasetState, ChainContext]:
    """The dataset's state and the writer's view of it, at the current head."""
    state = dataset.state()
    if state.kind is not DatasetKind.ROOT:
        raise SourceNotFoundError(
            f"dataset {dataset.alias!r} is not a root dataset: only root datasets ingest data"
        )
    last = state.last_data_event
    schema = state.arrow_schema()
    head = state.head
    context = ChainContext(
        vocab=state.vocab,
        schema=schema,
        prev_offset=state.last_offset,
        prev_watermark=state.last_watermark,
        prev_checkpoint=state.last_checkpoint,
        prev_source_state=last.new_source_state if isinstance(last, AddData) else None,
        history=History(lambda: data_files(dataset, head), schema),
    )
    return state, context


def data_files(dataset: Dataset, head: Multihash | None) -> list[Path]:
    """The dataset's data slices as of ``head``, oldest first."""
    if head is None:
        return []
    files = []
    for _, block in dataset.iter_blocks(head):
        event = block.event
        if isinstance(event, AddData | ExecuteTransform) and event.new_data is not None:
            files.append(dataset.data_path(event.new_data.physical_hash))
    files.reverse()
    return files


def commit_staged(
    dataset: Dataset, state: DatasetState, staged: StagedWrite, system_time: datetime
) -> Multihash:
    """Commit ``SetDataSchema`` (if any) and ``AddData`` atomically on top of ``state.head``.

    Raises ``ConflictError`` when another writer committed since ``state`` was read.
    """
    items = []
    if staged.set_data_schema is not None:
        items.append(CommitItem(staged.set_data_schema))
    if staged.add_data is not None:
        # The slice writer hashed the file it wrote (``SliceFile.close``): no second pass.
        items.append(CommitItem(staged.add_data, staged.data_file, hashed=True))
    hashes = dataset.commit_events(items, expected_head=state.head, system_time=system_time)
    return hashes[-1]


def retrying_conflicts(dataset: Dataset, attempt: Callable[[], IngestResult]) -> IngestResult:
    """Run ``attempt``; when another writer committed first (nothing of ours was committed),
    prepare and run it again from the new head, up to ``CONFLICT_ATTEMPTS`` times."""
    for remaining in range(CONFLICT_ATTEMPTS - 1, -1, -1):
        try:
            return attempt()
        except ConflictError:
            if remaining == 0:
                raise
            log.info("another writer committed first; retrying", dataset=dataset.alias)
    raise AssertionError("unreachable")
