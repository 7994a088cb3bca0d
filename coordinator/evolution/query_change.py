"""Changing a derivative dataset's query: the spec's "Query Evolution" procedure.

1. The engine's ValidateQuery checks the new query against the inputs' current schemas and
   against the previous query (engine-specific transition rules; for Spark, existing columns
   must keep their names, types and order).
2. The output schema it returns is checked against the dataset's schema with the Schema
   Evolution rules: only new columns may appear (``rules.schema_change_problem``, the rule
   every ``SetDataSchema`` is committed under).
3. The new ``SetTransform`` (same inputs, the new query pinned to the engine that validated
   it) is committed. If the dataset has run transactions, MigrateQuery hands the engine's
   state over to the new query first (a ``MigrationPlan`` run by ``run_transaction``), and
   what it records is committed in the same commit, right after the ``SetTransform``.

From that block on, the planner and the transactions run the new query: they always use the
transform of the dataset's latest ``SetTransform``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import pyarrow as pa

from common.odf import engine_protocol as ep
from common.odf.errors import OdfError, ValidationError
from common.odf.events import ExecuteTransform, SetTransform
from common.odf.fragments import DatasetKind, ExecuteTransformInput, TransformInput, TransformSql
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from common.serde.arrow_schema import decode_arrow_schema
from coordinator.config import ExchangeFormat
from coordinator.dataset import CommitItem, Dataset, DatasetNotFoundError, DatasetState
from coordinator.dataset.rules import schema_change_problem
from coordinator.dataset.snapshot_events import normalize_transform
from coordinator.dataset.state import last_input_block, last_input_offset, next_system_time
from coordinator.engine import EngineInvalidQueryError, EngineSession
from coordinator.engine.names import check_engine_name
from coordinator.transform.graph import Resolver
from coordinator.transform.migration import migration_changes_state
from coordinator.transform.plan import InputPlan, MigrationPlan, TransformPlan
from coordinator.transform.recorded import InputHistory, read_input_history, recorded_input_plan
from coordinator.transform.transaction import COLLECT, run_transaction


class QueryChangeError(ValidationError):
    """The new query is refused: invalid, or its output breaks the schema evolution rules."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryChange:
    """What ``change_query`` committed."""

    dataset: str
    set_transform: Multihash
    """The block of the new SetTransform."""
    head: Multihash
    transform: TransformSql
    """The new transform, normalized and pinned."""
    output_schema: pa.Schema
    added_columns: tuple[str, ...]
    """Columns the new query adds to the dataset's schema (written with its next data)."""
    migration: ExecuteTransform | None
    """The MigrateQuery result committed after the SetTransform, if it changed anything."""
    migrated: bool
    """Whether MigrateQuery ran (the dataset had run transactions)."""


def change_query(
    dataset: Dataset,
    transform: TransformSql,
    resolve: Resolver,
    engines: EngineSession,
    *,
    inputs: tuple[TransformInput, ...] | None = None,
    exchange: ExchangeFormat = ExchangeFormat.PARQUET,
    shared_staging: Path | None = None,
    now: datetime | None = None,
) -> QueryChange:
    """Validate ``transform`` as ``dataset``'s new query and commit it (see the module doc).

    ``inputs`` (resolved: ``did:odf`` refs with aliases) replace the current inputs; by
    default they are kept.
    """
    state = dataset.state()
    current = _current_transform(dataset, state)
    check_engine_name(transform.engine, path="engine")
    new = normalize_transform(transform)
    if new.version is None:
        new = replace(new, version=engines.default_version())
    event = SetTransform(inputs=current.inputs if inputs is None else inputs, transform=new)
    if same_transform(event, current):
        raise QueryChangeError(
            "is the dataset's current transform: nothing to change", path="query"
        )
    histories = _input_histories(event, resolve)
    schema = _validate(dataset, state, current, event, histories, engines)
    added = _check_schema_evolution(state, schema)
    when = next_system_time(state, now)
    if state.last_execute_transform is None:
        head = dataset.commit(event, expected_head=state.head, system_time=when)
        return QueryChange(
            dataset=dataset.alias,
            set_transform=head,
            head=head,
            transform=new,
            output_schema=schema,
            added_columns=added,
            migration=None,
            migrated=False,
        )
    plan = _migration_plan(state, event, current.transform, histories, when)
    engine = engines.get(new.version)
    with dataset.staging_dir() as staging:
        datasets = [histories[p.dataset_id].dataset for p in plan.inputs]
        result = run_transaction(
            plan,
            dataset,
            datasets,
            engine,
            policy=COLLECT,
            exchange=exchange,
            staging=staging,
            shared_staging=shared_staging,
        )
        recorded = migration_changes_state(result.event, state.last_watermark)
        items = [CommitItem(event), *(result.items if recorded else ())]
        hashes = dataset.commit_events(items, expected_head=state.head, system_time=when)
    return QueryChange(
        dataset=dataset.alias,
        set_transform=hashes[0],
        head=hashes[-1],
        transform=new,
        output_schema=schema,
        added_columns=added,
        migration=result.event if recorded else None,
        migrated=True,
    )


def same_transform(a: SetTransform, b: SetTransform) -> bool:
    """Equal but for whitespace in the queries' text: such a change is not worth a block."""

    def canonical(t: SetTransform) -> SetTransform:
        steps = tuple(replace(q, query=" ".join(q.query.split())) for q in t.transform.steps())
        return replace(t, transform=replace(t.transform, query=None, queries=steps))

    return canonical(a) == canonical(b)


def _current_transform(dataset: Dataset, state: DatasetState) -> SetTransform:
    if state.kind is not DatasetKind.DERIVATIVE or state.transform is None or state.head is None:
        raise QueryChangeError(
            f"dataset {dataset.alias!r} is not a derivative dataset: it has no query"
        )
    return state.transform


def _input_histories(current: SetTransform, resolve: Resolver) -> dict[DatasetID, InputHistory]:
    histories = {}
    for i, entry in enumerate(current.inputs):
        dataset_id = DatasetID.from_did(entry.dataset_ref)
        try:
            histories[dataset_id] = read_input_history(resolve(dataset_id))
        except DatasetNotFoundError:
            raise OdfError(
                f"input {entry.alias or entry.dataset_ref!r} (inputs[{i}]) is not in the workspace"
            ) from None
    return histories


def _validate(
    dataset: Dataset,
    state: DatasetState,
    current: SetTransform,
    new: SetTransform,
    histories: dict[DatasetID, InputHistory],
    engines: EngineSession,
) -> pa.Schema:
    """ValidateQuery against the inputs' current schemas; returns the new output schema.

    The engine also checks the transition from the current query, which it can only run
    against the same inputs: with other inputs the schema rules are checked here alone.
    """
    inputs = []
    for entry in new.inputs:
        history = histories[DatasetID.from_did(entry.dataset_ref)]
        schema = history.states[-1].schema_bytes if history.states else None
        if schema is None:
            raise QueryChangeError(
                f"cannot be checked: input {history.alias!r} has no data yet, so its schema is"
                " unknown (pull it first)",
                path="query",
            )
        alias = entry.alias or history.alias
        vocab = history.states[-1].vocab
        inputs.append(ep.ValidateQueryInput(query_alias=alias, schema=schema, vocab=vocab))
    request = ep.ValidateQueryRequest(
        dataset_alias=dataset.alias,
        vocab=state.vocab,
        transform=new.transform,
        query_inputs=tuple(inputs),
        prev_transform=current.transform if new.inputs == current.inputs else None,
    )
    try:
        response = engines.get(new.transform.version).validate_query(request)
    except EngineInvalidQueryError as e:
        raise QueryChangeError(f"invalid query: {e.detail}", path="query") from None
    return decode_arrow_schema(response.output_schema)


def _check_schema_evolution(state: DatasetState, new: pa.Schema) -> tuple[str, ...]:
    """The columns ``new`` adds to the dataset's schema; refused unless it only adds some."""
    old = state.arrow_schema()
    if old is None:
        return ()
    problem = schema_change_problem(old, new)
    if problem is not None:
        raise QueryChangeError(
            f"the new query's output breaks the dataset's schema: {problem}", path="query"
        )
    return tuple(name for name in new.names if name not in old.names)


def _migration_plan(
    state: DatasetState,
    new: SetTransform,
    prev: TransformSql,
    histories: dict[DatasetID, InputHistory],
    when: datetime,
) -> MigrationPlan:
    """MigrateQuery with every input of the new transform where the last transaction left
    it (no new blocks; an input not read yet is at its start)."""
    assert state.head is not None
    inputs: list[InputPlan] = []
    for entry in new.inputs:
        dataset_id = DatasetID.from_did(entry.dataset_ref)
        history = histories[dataset_id]
        progress = state.input_progress(dataset_id)
        at_rest = ExecuteTransformInput(
            dataset_id=dataset_id,
            prev_block_hash=last_input_block(progress) if progress else None,
            prev_offset=last_input_offset(progress) if progress else None,
        )
        inputs.append(recorded_input_plan(at_rest, entry.alias or history.alias, history))
    plan = TransformPlan.following(
        state, transform=new.transform, system_time=when, inputs=tuple(inputs)
    )
    return MigrationPlan(prev_transform=prev, transform_plan=plan)
