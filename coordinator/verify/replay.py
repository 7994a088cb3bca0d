"""Replay verification: run every recorded transaction again and compare its result.

As the reference coordinator verifies (and the spec's "Dataset Validation" asks), each
``ExecuteTransform`` is rebuilt from what it recorded: the block's own system time, the
transform in effect (with its pinned engine version), the input block intervals and offsets
of its ``queryInputs``, and the stored previous checkpoint. The engine of that version runs it
into a private staging directory; nothing is committed. The resulting event is compared with
the stored one except for what Parquet and the engine may encode differently: the data file's
physical hash and size and the new checkpoint are not compared, the **logical hash**, the
output offsets, the watermark and the output schema are.

An ``ExecuteTransform`` recorded by a query change (``evolution.migration``) is replayed
through MigrateQuery from the previous transform to the new one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from common.odf.errors import OdfError
from common.odf.events import ExecuteTransform, SetDataSchema, SetTransform
from common.odf.fragments import TransformSql
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from coordinator.config import ExchangeFormat
from coordinator.dataset import CommitItem, Dataset
from coordinator.dataset.state import DatasetState
from coordinator.engine import EngineClient, EngineSession
from coordinator.evolution.migration import is_migration, run_migration
from coordinator.transform.errors import OutputSchemaError
from coordinator.transform.output import collect_output, commit_items
from coordinator.transform.plan import InputPlan, TransformPlan
from coordinator.verify.errors import ReplayError
from coordinator.verify.input_history import InputHistory, recorded_input_plan
from coordinator.verify.integrity import StoredBlock
from coordinator.verify.report import BlockRef
from coordinator.verify.requests import MigrationPlan, prepare_exchange, transform_request

TRANSACTION = "transaction"
MIGRATION = "migration"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    block: BlockRef
    kind: str
    """``transaction`` (ExecuteTransform) or ``migration`` (MigrateQuery)."""
    differences: tuple[str, ...] = ()
    """What the replay gave differently from the block; empty when it reproduced it."""
    error: str | None = None
    """Why the transaction could not be replayed."""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.differences and self.error is None


class Replayer:
    """Replays the transactions of one derivative dataset with the engines of ``engines``."""

    def __init__(
        self,
        dataset: Dataset,
        inputs: Mapping[DatasetID, InputHistory | str],
        engines: EngineSession,
        exchange: ExchangeFormat = ExchangeFormat.ARROW,
    ) -> None:
        self.dataset = dataset
        self.inputs = inputs
        self.engines = engines
        self.exchange = exchange
        self._engine_errors: dict[str | None, str] = {}

    def replay(self, blocks: Sequence[StoredBlock]) -> Iterator[ReplayResult]:
        """One result per ``ExecuteTransform`` of ``blocks`` (the chain, oldest first)."""
        replaced: TransformSql | None = None
        for stored in blocks:
            event = stored.block.event
            if isinstance(event, SetTransform):
                prior = stored.state_before.transform
                replaced = prior.transform if prior else None
            elif isinstance(event, ExecuteTransform):
                yield self._replay_one(stored, event, replaced)

    def _replay_one(
        self, stored: StoredBlock, event: ExecuteTransform, replaced: TransformSql | None
    ) -> ReplayResult:
        started = time.perf_counter()
        migration = is_migration(event, replaced)
        kind = MIGRATION if migration else TRANSACTION
        try:
            if migration:
                assert replaced is not None
                items = self._migrate(stored, event, replaced)
            else:
                items = self._transform(stored, event)
            differences = event_differences(event, items)
        except OutputSchemaError as e:
            differences = [f"output schema: {e}"]
        except (OdfError, OSError) as e:
            return ReplayResult(
                block=stored.ref, kind=kind, error=str(e), seconds=time.perf_counter() - started
            )
        return ReplayResult(
            block=stored.ref,
            kind=kind,
            differences=tuple(differences),
            seconds=time.perf_counter() - started,
        )

    # --- the two kinds of transactions ---------------------------------------------------------

    def _transform(self, stored: StoredBlock, event: ExecuteTransform) -> list[CommitItem]:
        state = stored.state_before
        transform = _transform_of(state)
        inputs = self._input_plans(state, event)
        plan = TransformPlan(
            expected_head=_prev(stored),
            system_time=stored.block.system_time,
            transform=transform,
            vocab=state.vocab,
            prev_offset=event.prev_offset,
            prev_checkpoint=event.prev_checkpoint,
            prev_watermark=state.last_watermark,
            output_schema=state.schema_bytes,
            inputs=inputs,
        )
        engine = self._engine(transform.version)
        with self.dataset.staging_dir() as staging:
            exchange = prepare_exchange(inputs, self._datasets(inputs), staging, self.exchange)
            response = engine.execute_transform(transform_request(plan, self.dataset, exchange))
            output = collect_output(response, plan, exchange.data_path, exchange.checkpoint_path)
            return commit_items(plan, output, response)

    def _migrate(
        self, stored: StoredBlock, event: ExecuteTransform, previous: TransformSql
    ) -> list[CommitItem]:
        state = stored.state_before
        transform = _transform_of(state)
        inputs = self._input_plans(state, event)
        plan = MigrationPlan(
            expected_head=_prev(stored),
            system_time=stored.block.system_time,
            prev_transform=previous,
            new_transform=transform,
            vocab=state.vocab,
            prev_offset=event.prev_offset,
            prev_checkpoint=event.prev_checkpoint,
            prev_watermark=state.last_watermark,
            output_schema=state.schema_bytes,
            inputs=inputs,
        )
        engine = self._engine(transform.version)
        with self.dataset.staging_dir() as staging:
            result = run_migration(
                plan, self.dataset, self._datasets(inputs), engine, staging, self.exchange
            )
            return list(result.items)

    # --- pieces ----------------------------------------------------------------------------------

    def _input_plans(self, state: DatasetState, event: ExecuteTransform) -> tuple[InputPlan, ...]:
        declared = state.transform.inputs if state.transform else ()
        aliases = {DatasetID.from_did(i.dataset_ref): i.alias for i in declared}
        plans = []
        for entry in event.query_inputs:
            history = self.inputs.get(entry.dataset_id)
            if history is None:
                raise ReplayError(f"input {entry.dataset_id} is not in the workspace")
            if isinstance(history, str):
                raise ReplayError(history)
            alias = aliases.get(entry.dataset_id) or history.alias
            plans.append(recorded_input_plan(entry, alias, history))
        return tuple(plans)

    def _datasets(self, inputs: Sequence[InputPlan]) -> list[Dataset]:
        found = []
        for plan in inputs:
            history = self.inputs[plan.dataset_id]
            assert isinstance(history, InputHistory)
            found.append(history.dataset)
        return found

    def _engine(self, version: str | None) -> EngineClient:
        """The engine pinned by the transform; a failure to start is remembered, not retried."""
        failed = self._engine_errors.get(version)
        if failed is not None:
            raise ReplayError(failed)
        try:
            return self.engines.get(version)
        except OdfError as e:
            self._engine_errors[version] = f"cannot start the pinned engine: {e}"
            raise ReplayError(self._engine_errors[version]) from None


def _transform_of(state: DatasetState) -> TransformSql:
    if state.transform is None:
        raise ReplayError("no SetTransform precedes this ExecuteTransform")
    return state.transform.transform


def _prev(stored: StoredBlock) -> Multihash:
    prev = stored.block.prev_block_hash
    if prev is None:
        raise ReplayError("an ExecuteTransform cannot be the first block")
    return prev


def event_differences(stored: ExecuteTransform, items: Sequence[CommitItem]) -> list[str]:
    """How the replayed events differ from the stored event (physical hash, size and the new
    checkpoint aside); a replayed ``SetDataSchema`` means the output schema differs."""
    replayed = items[-1].event
    assert isinstance(replayed, ExecuteTransform)
    found = []
    if any(isinstance(i.event, SetDataSchema) for i in items[:-1]):
        found.append("output schema: the replay's columns differ from the dataset's schema")
    a, b = stored.new_data, replayed.new_data
    if a is not None and b is None:
        o = a.offset_interval
        found.append(f"newData: the block has offsets {o.start}..{o.end}, the replay no records")
    elif a is None and b is not None:
        o = b.offset_interval
        found.append(f"newData: the block has no records, the replay offsets {o.start}..{o.end}")
    elif a is not None and b is not None:
        if a.offset_interval != b.offset_interval:
            x, y = a.offset_interval, b.offset_interval
            found.append(
                f"newData.offsetInterval: the block has {x.start}..{x.end},"
                f" the replay {y.start}..{y.end}"
            )
        if a.logical_hash != b.logical_hash:
            found.append(
                f"newData.logicalHash: the block has {a.logical_hash},"
                f" the replay {b.logical_hash}: the records differ"
            )
    if stored.new_watermark != replayed.new_watermark:
        found.append(
            f"newWatermark: the block has {_time(stored.new_watermark)},"
            f" the replay {_time(replayed.new_watermark)}"
        )
    return found


def _time(value: datetime | None) -> str:
    return "none" if value is None else value.isoformat()
