"""Merge strategies: how newly read data is combined with the dataset's history.

Every strategy takes the new records (normalised, with an event-time column that may hold
NULLs) and returns them with an ``op`` column first (RFC-015 codes), in any order: the writer
sorts them by the strategy's ``sort_keys``. Append and Ledger stream; Snapshot needs the whole
new snapshot and the projected previous state in memory.
"""

from __future__ import annotations

from common.odf.fragments import (
    DatasetVocabulary,
    MergeStrategy,
    MergeStrategyAppend,
    MergeStrategyLedger,
    MergeStrategySnapshot,
)
from coordinator.ingest.merge.append import AppendMerge
from coordinator.ingest.merge.base import Merge
from coordinator.ingest.merge.ledger import LedgerMerge
from coordinator.ingest.merge.snapshot import SnapshotMerge

__all__ = ["AppendMerge", "LedgerMerge", "Merge", "SnapshotMerge", "merge_for"]


def merge_for(strategy: MergeStrategy, vocab: DatasetVocabulary) -> Merge:
    """The implementation of a ``MergeStrategy`` event fragment."""
    op_column = vocab.operation_type_column
    event_time_column = vocab.event_time_column
    match strategy:
        case MergeStrategyAppend():
            return AppendMerge(op_column=op_column, event_time_column=event_time_column)
        case MergeStrategyLedger():
            return LedgerMerge(
                primary_key=strategy.primary_key,
                op_column=op_column,
                event_time_column=event_time_column,
            )
        case MergeStrategySnapshot():
            return SnapshotMerge(
                primary_key=strategy.primary_key,
                compare_columns=strategy.compare_columns,
                op_column=op_column,
                event_time_column=event_time_column,
                offset_column=vocab.offset_column,
            )
