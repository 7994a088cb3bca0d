"""MigrateQuery at the switch from one query to the next (the spec's "Migrate Query").

When a derivative dataset that has already run transactions gets a new query, the engine is
asked to hand its state (the checkpoint: per-input watermarks, buffered input) over to the new
query: a ``MigrationPlan`` run by ``transaction.run_transaction``. What it returns is recorded
as an ``ExecuteTransform`` that reads no new input blocks, committed together with the new
``SetTransform``; when the migration changes nothing (same checkpoint, same watermark, no
output) only the ``SetTransform`` is committed. Verification recognizes such a block
(``is_migration``) and replays it through MigrateQuery again.
"""

from __future__ import annotations

from datetime import datetime

from common.odf.events import ExecuteTransform
from common.odf.fragments import TransformSql


def is_migration(event: ExecuteTransform, replaced: TransformSql | None) -> bool:
    """Whether ``event`` records a MigrateQuery: it reads no new input blocks.

    A regular transaction always reads new blocks of some input (else there is nothing to
    run), so an event that reads none can only be a switch of queries; ``replaced`` is the
    transform the latest ``SetTransform`` before ``event`` replaced (``None``: it was the
    first one, there is nothing to migrate from).
    """
    reads_nothing = all(i.new_block_hash is None for i in event.query_inputs)
    return reads_nothing and replaced is not None


def migration_changes_state(event: ExecuteTransform, prev_watermark: datetime | None) -> bool:
    """Whether a migration's event records anything (else only the SetTransform is committed):
    output records, a different checkpoint or a different watermark."""
    new_checkpoint = event.new_checkpoint.physical_hash if event.new_checkpoint else None
    return (
        event.new_data is not None
        or new_checkpoint != event.prev_checkpoint
        or event.new_watermark != prev_watermark
    )
