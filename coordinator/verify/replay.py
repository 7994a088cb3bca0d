"""Replay verification: run every recorded transaction again and compare its result.

As the reference coordinator verifies (and the spec's "Dataset Validation" asks), each
``ExecuteTransform`` is rebuilt from what it recorded: the block's own system time, the
transform in effect (with its pinned engine version), the input block intervals and offsets
of its ``queryInputs``, and the stored previous checkpoint. The engine of that version runs it
into a private staging directory; nothing is committed. The resulting event is compared with
the stored one except for what Parquet and the engine may encode differently: the data file's
physical hash and size and the new checkpoint are not compared, the **logical hash**, the
output offsets, the watermark and the output schema are.

An ``ExecuteTransform`` recorded by a query change (``transform.migration``) is replayed
through MigrateQuery from the previous transform to the new one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import KW_ONLY, dataclass, field, replace
from pathlib import Path

from common.odf.errors import OdfError
from common.odf.events import ExecuteTransform, SetTransform
from common.odf.fragments import TransformSql
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from coordinator.config import ExchangeFormat
from coordinator.dataset import Dataset
from coordinator.dataset.state import DatasetState
from coordinator.engine import EngineClient, EngineSession
from coordinator.transform.errors import OutputSchemaError
from coordinator.transform.migration import is_migration
from coordinator.transform.plan import InputPlan, MigrationPlan, TransformPlan
from coordinator.transform.recorded import InputHistory, recorded_input_plan
from coordinator.transform.transaction import CompareWithRecorded, run_transaction
from coordinator.verify.errors import ReplayError
from coordinator.verify.integrity import StoredBlock
from coordinator.verify.report import BlockRef

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
    engine: str | None = None
    """The engine it was replayed with: the provider and the pinned version."""

    @property
    def ok(self) -> bool:
        return not self.differences and self.error is None


@dataclass(eq=False)
class Replayer:
    """Replays the transactions of one derivative dataset with the engines of ``engines``."""

    dataset: Dataset
    inputs: Mapping[DatasetID, InputHistory | str]
    engines: EngineSession
    exchange: ExchangeFormat = ExchangeFormat.PARQUET
    _: KW_ONLY
    shared_staging: Path | None = None
    parallel: int = 2
    """Independent transactions replayed at once (module doc of ``replay``)."""
    _engine_errors: dict[str | None, str] = field(default_factory=dict, init=False, repr=False)

    def replay(self, blocks: Sequence[StoredBlock]) -> Iterator[ReplayResult]:
        """One result per ``ExecuteTransform`` of ``blocks`` (the chain, oldest first).

        Consecutive independent transactions (no checkpoint read or written: a row-local
        query, such as the K blocks of a split transaction) are replayed ``parallel`` at a
        time; the results come in chain order all the same.
        """
        replaced: TransformSql | None = None
        batch: list[tuple[StoredBlock, ExecuteTransform, TransformSql | None]] = []
        for stored in blocks:
            event = stored.block.event
            if isinstance(event, SetTransform):
                prior = stored.state_before.transform
                replaced = prior.transform if prior else None
            elif isinstance(event, ExecuteTransform):
                if _independent(event) and not is_migration(event, replaced):
                    batch.append((stored, event, replaced))
                    continue
                yield from self._replay_batch(batch)
                batch = []
                yield self._replay_one(stored, event, replaced)
        yield from self._replay_batch(batch)

    def _replay_batch(
        self, batch: Sequence[tuple[StoredBlock, ExecuteTransform, TransformSql | None]]
    ) -> Iterator[ReplayResult]:
        if self.parallel < 2 or len(batch) < 2:
            for args in batch:
                yield self._replay_one(*args)
            return
        for stored, _, _ in batch:  # engines start here, in this thread (failures remembered)
            with suppress(OdfError, OSError):
                self._engine(_transform_of(stored.state_before).version)
        with ThreadPoolExecutor(self.parallel, thread_name_prefix="replay") as pool:
            yield from pool.map(lambda args: self._replay_one(*args), batch)

    def _replay_one(
        self, stored: StoredBlock, event: ExecuteTransform, replaced: TransformSql | None
    ) -> ReplayResult:
        started = time.perf_counter()
        migration = is_migration(event, replaced)
        kind = MIGRATION if migration else TRANSACTION
        version = _transform_of(stored.state_before).version
        label = f"{self.engines.provider.kind} {version or '(unpinned)'}"
        try:
            plan = self._plan(stored, event, replaced if migration else None)
            inputs = self._datasets(plan.inputs)
            engine = self._engine(version)
            result = run_transaction(
                plan,
                self.dataset,
                inputs,
                engine,
                policy=CompareWithRecorded(event),
                exchange=self.exchange,
                shared_staging=self.shared_staging,
            )
            differences = list(result.settled.differences)
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
            engine=label,
        )

    def _plan(
        self, stored: StoredBlock, event: ExecuteTransform, previous: TransformSql | None
    ) -> TransformPlan | MigrationPlan:
        """The transaction as it ran: a transform, or the migration from ``previous``."""
        state = stored.state_before
        transform = _transform_of(state)
        inputs = self._input_plans(state, event)
        expected_head = _prev(stored)  # the chain's start cannot be a transaction
        plan = replace(
            TransformPlan.following(
                state, transform=transform, system_time=stored.block.system_time, inputs=inputs
            ),
            expected_head=expected_head,  # as recorded, even where the state disagrees
            prev_offset=event.prev_offset,
            prev_checkpoint=event.prev_checkpoint,
        )
        if previous is None:
            return plan
        return MigrationPlan(prev_transform=previous, transform_plan=plan)

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


def _independent(event: ExecuteTransform) -> bool:
    """A transaction that neither reads nor writes engine state: it replays on its own."""
    return event.prev_checkpoint is None and event.new_checkpoint is None


def _transform_of(state: DatasetState) -> TransformSql:
    if state.transform is None:
        raise ReplayError("no SetTransform precedes this ExecuteTransform")
    return state.transform.transform


def _prev(stored: StoredBlock) -> Multihash:
    prev = stored.block.prev_block_hash
    if prev is None:
        raise ReplayError("an ExecuteTransform cannot be the first block")
    return prev
