"""A miniature coordinator for engine tests: input datasets that grow slice by slice, and an
output dataset that turns engine responses into the next request (offsets, checkpoints).

Files are written the way kamu hands them to an engine: one file per slice, extension-less
names, offsets contiguous, system columns ``offset, op, system_time, event_time`` first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from common.odf import engine_protocol as ep
from common.odf.fragments import (
    DatasetVocabulary,
    OffsetInterval,
    SqlQueryStep,
    TransformSql,
    Watermark,
)
from common.odf.identity import DatasetID
from common.serde.arrow_schema import encode_arrow_schema

T0 = datetime(2024, 1, 1, tzinfo=UTC)
TS = pa.timestamp("ms", tz="UTC")


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def sql(*steps: str | tuple[str, str]) -> TransformSql:
    """A transform from steps: ``"select ..."`` (output) or ``("alias", "select ...")``."""
    return TransformSql(
        engine="spark",
        queries=tuple(
            SqlQueryStep(alias=s[0], query=s[1]) if isinstance(s, tuple) else SqlQueryStep(query=s)
            for s in steps
        ),
    )


def input_schema(data_schema: pa.Schema, event_time: str = "event_time") -> pa.Schema:
    """A root dataset's schema: the system columns, then ``data_schema``."""
    return pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("op", pa.int32(), nullable=False),
            pa.field("system_time", TS, nullable=False),
            pa.field(event_time, TS),
            *data_schema,
        ]
    )


@dataclass
class InputDataset:
    """A root dataset: ``append`` writes a slice, ``take`` hands the unseen slices to a request."""

    root: Path
    name: str
    data_schema: pa.Schema
    event_time_column: str = "event_time"
    """The event-time column (``SetVocab``); rows given to ``append`` name it ``event_time``."""
    id: DatasetID = field(init=False)
    next_offset: int = 0
    files: list[str] = field(default_factory=list)
    _pending: list[str] = field(default_factory=list)
    _pending_start: int | None = None
    _pending_watermarks: list[Watermark] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.id = DatasetID.new_seeded(self.name.encode())
        self.root.mkdir(parents=True, exist_ok=True)

    @property
    def schema(self) -> pa.Schema:
        return input_schema(self.data_schema, self.event_time_column)

    def append(
        self,
        rows: Sequence[dict[str, Any]],
        *,
        watermark: datetime | None = None,
        system_time: datetime = T0,
        arrow: bool = False,
    ) -> str | None:
        """Write ``rows`` (dicts with ``event_time``, data columns and optional ``op``)."""
        if watermark is not None:
            self._pending_watermarks.append(
                Watermark(system_time=system_time, event_time=watermark)
            )
        if not rows:
            return None
        n = len(rows)
        columns = {
            "offset": list(range(self.next_offset, self.next_offset + n)),
            "op": [r.get("op", 0) for r in rows],
            "system_time": [system_time] * n,
            self.event_time_column: [r["event_time"] for r in rows],
            **{f.name: [r.get(f.name) for r in rows] for f in self.data_schema},
        }
        table = pa.table(columns, schema=self.schema)
        path = str(self.root / f"{self.name}-{len(self.files):04d}")
        if arrow:
            with pa.OSFile(path, "wb") as sink, ipc.new_file(sink, table.schema) as w:
                w.write_table(table)
        else:
            pq.write_table(table, path)
        if self._pending_start is None:
            self._pending_start = self.next_offset
        self.next_offset += n
        self.files.append(path)
        self._pending.append(path)
        return path

    def take(self, query_alias: str | None = None) -> ep.TransformRequestInput:
        """The input entry of the next transaction: every slice and watermark not yet taken."""
        interval = (
            OffsetInterval(start=self._pending_start, end=self.next_offset - 1)
            if self._pending_start is not None
            else None
        )
        entry = ep.TransformRequestInput(
            dataset_id=self.id,
            dataset_alias=self.name,
            query_alias=query_alias or self.name,
            vocab=DatasetVocabulary(event_time_column=self.event_time_column),
            offset_interval=interval,
            data_paths=tuple(self._pending),
            schema_file=self.files[-1],
            explicit_watermarks=tuple(self._pending_watermarks),
        )
        self._pending, self._pending_start, self._pending_watermarks = [], None, []
        return entry


@dataclass
class OutputDataset:
    """A derivative dataset: builds requests and commits responses like a coordinator."""

    root: Path
    name: str
    transform: TransformSql
    next_offset: int = 0
    prev_checkpoint: str | None = None
    transactions: int = 0
    data_files: list[str] = field(default_factory=list)

    @property
    def id(self) -> DatasetID:
        return DatasetID.new_seeded(self.name.encode())

    def request(
        self,
        inputs: Sequence[ep.TransformRequestInput],
        *,
        system_time: datetime = T0,
        data_suffix: str = "",
    ) -> ep.TransformRequest:
        out = self.root / f"{self.name}-tx{self.transactions}"
        out.mkdir(parents=True, exist_ok=True)
        self.transactions += 1
        return ep.TransformRequest(
            dataset_id=self.id,
            dataset_alias=self.name,
            system_time=system_time,
            vocab=DatasetVocabulary(),
            transform=self.transform,
            query_inputs=tuple(inputs),
            next_offset=self.next_offset,
            prev_checkpoint_path=self.prev_checkpoint,
            new_checkpoint_path=str(out / "checkpoint"),
            new_data_path=str(out / f"data{data_suffix}"),
        )

    def commit(self, request: ep.TransformRequest, response: ep.TransformResponse) -> None:
        assert isinstance(response, ep.TransformResponseSuccess), response
        if response.new_offset_interval is not None:
            assert response.new_offset_interval.start == self.next_offset
            self.next_offset = response.new_offset_interval.end + 1
            self.data_files.append(request.new_data_path)
        else:
            assert not Path(request.new_data_path).exists()
        checkpoint = Path(request.new_checkpoint_path)
        self.prev_checkpoint = str(checkpoint) if checkpoint.exists() else None


CITIES = pa.schema([("city", pa.string()), ("population", pa.int64())])
"""The data columns of the ``cities`` input of validation requests."""


def validate_request(
    transform: TransformSql,
    prev: TransformSql | None = None,
    inputs: Mapping[str, pa.Schema] = MappingProxyType({"cities": CITIES}),
) -> ep.ValidateQueryRequest:
    """ValidateQuery of ``transform`` over ``inputs`` (query alias -> data columns, the system
    columns added): by default one input ``cities`` (CITIES)."""
    return ep.ValidateQueryRequest(
        dataset_alias="out",
        vocab=DatasetVocabulary(),
        transform=transform,
        query_inputs=tuple(
            ep.ValidateQueryInput(query_alias=a, schema=encode_arrow_schema(input_schema(s)))
            for a, s in inputs.items()
        ),
        prev_transform=prev,
    )
