"""MigrateQuery at the switch from one query to the next (the spec's "Migrate Query").

When a derivative dataset that has already run transactions gets a new query, the engine is
asked to hand its state (the checkpoint: per-input watermarks, buffered input) over to the new
query. What it returns is recorded as an ``ExecuteTransform`` that reads no new input blocks,
committed together with the new ``SetTransform``; when the migration changes nothing (same
checkpoint, same watermark, no output) only the ``SetTransform`` is committed. Verification
recognizes such a block and replays it through MigrateQuery again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from common.odf import engine_protocol as ep
from common.odf.events import ExecuteTransform
from common.odf.fragments import TransformSql
from coordinator.config import ExchangeFormat
from coordinator.dataset import CommitItem, Dataset
from coordinator.engine.client import EngineClient
from coordinator.transform.output import collect_output, commit_items
from coordinator.verify.requests import MigrationPlan, migrate_request, prepare_exchange


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationResult:
    items: tuple[CommitItem, ...]
    """The events to commit after the new SetTransform (a SetDataSchema when the engine
    flushed records with new columns, then the ExecuteTransform)."""
    event: ExecuteTransform

    def changes_state(self, prev_watermark: datetime | None) -> bool:
        """Whether the migration records anything (else only the SetTransform is committed):
        output records, a different checkpoint or a different watermark."""
        e = self.event
        new_checkpoint = e.new_checkpoint.physical_hash if e.new_checkpoint else None
        return (
            e.new_data is not None
            or new_checkpoint != e.prev_checkpoint
            or e.new_watermark != prev_watermark
        )


def is_migration(event: ExecuteTransform, replaced: TransformSql | None) -> bool:
    """Whether ``event`` records a MigrateQuery: it reads no new input blocks.

    A regular transaction always reads new blocks of some input (else there is nothing to
    run), so an event that reads none can only be a switch of queries; ``replaced`` is the
    transform the latest ``SetTransform`` before ``event`` replaced (``None``: it was the
    first one, there is nothing to migrate from).
    """
    reads_nothing = all(i.new_block_hash is None for i in event.query_inputs)
    return reads_nothing and replaced is not None


def run_migration(
    plan: MigrationPlan,
    dataset: Dataset,
    inputs: Sequence[Dataset],
    engine: EngineClient,
    staging: Path,
    fmt: ExchangeFormat,
) -> MigrationResult:
    """Call MigrateQuery and turn its answer into events (nothing is committed here).

    ``staging`` must be a staging directory of ``dataset``: the items name the engine's
    output files in it, ready to be moved in by a commit.
    """
    exchange = prepare_exchange(plan.inputs, inputs, staging, fmt)
    response = engine.migrate_query(migrate_request(plan, dataset, exchange))
    success = ep.TransformResponseSuccess(
        new_offset_interval=response.new_offset_interval, new_watermark=response.new_watermark
    )
    transform_plan = plan.transform_plan()
    output = collect_output(success, transform_plan, exchange.data_path, exchange.checkpoint_path)
    items = commit_items(transform_plan, output, success)
    event = items[-1].event
    assert isinstance(event, ExecuteTransform)
    return MigrationResult(items=tuple(items), event=event)
