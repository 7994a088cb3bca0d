"""What every stateful runner does: plan the request, run one transaction, hand back the
output rows and the next checkpoint state.

A runner (``StatefulRunner``) is asked, in the registry's order (``registry.py``), to plan a
``StatefulQuery``: the transaction's request, the previous checkpoint, the streamed inputs
and the query as Spark analyzed it over the inputs' views. A runner that does not recognise
the query returns None and the next one is asked. The first plan is run: the runner reads the
inputs' new records (late ones dropped) and the records its state kept, runs the query and
returns a ``StatefulRun``: the output rows in their final order (appended rows, or a
changelog), their columns, the ``StreamState`` the next transaction carries on from and how
far the output watermark lags the input watermark.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import Protocol, TypeVar

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from common.odf import engine_protocol as ep
from common.odf.fragments import TemporalTable
from engine_spark import checkpoint as cp
from engine_spark.errors import InputDataError
from engine_spark.ordering import sort_by_values
from engine_spark.outputs import OutputColumns, plan_output_columns
from engine_spark.schema_mapping import result_arrow_schema
from engine_spark.stateful.retention import PreparedViews
from engine_spark.stateful.stream_inputs import (
    StreamInput,
    WorkArea,
    query_fingerprint,
    spark_version,
)
from engine_spark.watermark import input_watermark

PlanT = TypeVar("PlanT")


@dataclass(frozen=True)
class StatefulQuery:
    """One transaction of a query that may need state: what every runner plans from."""

    session: SparkSession
    area: WorkArea
    request: ep.TransformRequest
    previous: cp.EngineCheckpoint
    tables: Mapping[str, TemporalTable]
    """The request's temporal tables by query alias (already registered as their views)."""
    result: DataFrame
    """The query run over the inputs' views as the engine registered them."""
    prepared: PreparedViews | None = None
    """The views a recomputation registered before the query ran (``registry.prepare_views``):
    ``result`` is then the recomputation's (first) query."""

    @property
    def temporal(self) -> set[str]:
        return set(self.tables)

    @property
    def inputs(self) -> list[StreamInput]:
        """The streamed inputs (every input but the temporal tables)."""
        return stream_inputs(self.request, self.previous, self.temporal)

    @property
    def carried(self) -> cp.StreamState | None:
        """The previous state, if it belongs to this query."""
        return carried_stream(self.request, self.previous)

    @cached_property
    def columns(self) -> OutputColumns:
        """The output's columns as the query gives them (InvalidQuery for columns the dataset
        cannot take)."""
        fields = [(f.name, f.dataType.simpleString()) for f in self.result.schema.fields]
        return plan_output_columns(fields, self.request.vocab)

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        return result_arrow_schema(self.result)

    def check_output(self) -> None:
        """InvalidQuery now, before any runner plans, when the output cannot be written."""
        _ = self.columns, self.arrow_schema

    def next_state(
        self,
        files: dict[str, bytes],
        *,
        runner: cp.Runner,
        window: cp.WindowSpec | None = None,
        join: cp.JoinSpec | None = None,
        keys: Sequence[str] = (),
        emitted: bytes | None = None,
    ) -> cp.StreamState:
        """The state a recomputation hands to the next transaction: ``files`` are the records
        it keeps; a changelog (``keys``, ``emitted``) for a top-N, append mode otherwise."""
        carried = self.carried
        return cp.StreamState(
            query=query_fingerprint(self.request.transform),
            spark_version=spark_version(self.session),
            mode=cp.Mode.CHANGELOG if keys else cp.Mode.APPEND,
            transactions=(carried.transactions if carried is not None else 0) + 1,
            files=files,
            keys=tuple(keys),
            emitted=emitted,
            runner=runner,
            window=window,
            join=join,
        )


@dataclass(frozen=True, slots=True)
class StatefulRun:
    """A stateful transaction's output rows (final order), the state, the watermark lag."""

    table: pa.Table
    columns: OutputColumns
    state: cp.StreamState
    lag: timedelta
    absorbed: frozenset[str] = frozenset()
    """Temporal tables whose rows the state carries (their own state is then dropped)."""


class StatefulRunner(Protocol[PlanT]):
    """One way of running a stateful query across transactions."""

    @property
    def runner(self) -> cp.Runner:
        """The checkpoint's name for the state this runner carries."""
        ...

    def plan(self, query: StatefulQuery) -> PlanT | None:
        """The runner's plan for the query, or None when this runner does not run it.

        InputDataError when the carried state is this runner's but the query no longer
        runs this way (``runner_mismatch``)."""
        ...

    def run(self, query: StatefulQuery, plan: PlanT) -> StatefulRun | None:
        """Run one transaction; None when the plan turns out not to hold (the next runner
        is asked)."""
        ...


def stream_inputs(
    request: ep.TransformRequest, previous: cp.EngineCheckpoint, temporal: set[str]
) -> list[StreamInput]:
    """Every input but the temporal tables, with its watermark before and after."""
    return [
        stream_input(i, previous) for i in request.query_inputs if i.query_alias not in temporal
    ]


def stream_input(inp: ep.TransformRequestInput, previous: cp.EngineCheckpoint) -> StreamInput:
    """The input with its watermark before this transaction and after it."""
    before = previous.input_watermarks.get(inp.dataset_id)
    return StreamInput(
        inp, previous_watermark=before, watermark=input_watermark(inp.explicit_watermarks, before)
    )


def carried_stream(
    request: ep.TransformRequest, previous: cp.EngineCheckpoint
) -> cp.StreamState | None:
    """The previous streaming state, if it belongs to this query."""
    fingerprint = query_fingerprint(request.transform)
    return previous.stream if previous.stream and previous.stream.query == fingerprint else None


def in_value_order(table: pa.Table, columns: OutputColumns) -> pa.Table:
    trailing = [columns.op] if columns.op else []
    return sort_by_values(table, [columns.event_time], trailing)


def runner_mismatch(what: str) -> InputDataError:
    return InputDataError(
        f"the checkpoint holds {what}, but this engine does not run the query that way; "
        "replay the dataset with the engine that wrote it"
    )
