"""MergeStrategy::Append: every new record is appended as ``+A``; history is not read."""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.ingest.history import History
from coordinator.ingest.merge.base import StreamingMerge, append_all
from coordinator.ingest.readers.stream import DataStream


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendMerge(StreamingMerge):
    def merge(self, new: DataStream, history: History) -> DataStream:
        del history
        return append_all(new, self.op_column)
