"""Temporal tables: inputs read as their latest state per primary key, kept across transactions.

A transform may declare inputs as temporal tables (``TransformSql.temporal_tables``: the
input's query alias and a primary key). Such an input's view is not its new slice but the
dataset's current state: for every key, the row of its newest event (by offset) over all
transactions so far, including this one, unless that event retracts the key (``-R``, or a
``-C`` without its ``+C``). A stream joined with it is a lookup against the latest known
version of each key (processing-time semantics, not Flink's event-time ``FOR SYSTEM_TIME AS
OF``): rows already written are not revised when the table changes later. The state lives
in the checkpoint, so a replayed transaction sees exactly the state it saw first.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from common.odf.fragments import DatasetVocabulary, TemporalTable, TransformSql
from engine_spark.checkpoint import TemporalState
from engine_spark.errors import InvalidQueryError
from engine_spark.exchange import parquet_bytes
from engine_spark.inputs import quote_identifier
from engine_spark.outputs import Op
from engine_spark.schema_mapping import spark_input_table

_RANK = "__odf_temporal_rank"
_PRESENT = (Op.APPEND.value, Op.CORRECT_TO.value)


def temporal_tables(transform: TransformSql, aliases: Sequence[str]) -> dict[str, TemporalTable]:
    """The transform's temporal tables by name; each must name an input and have a key."""
    tables: dict[str, TemporalTable] = {}
    for table in transform.temporal_tables or ():
        if table.name not in aliases:
            raise InvalidQueryError(
                f"temporal table {table.name!r} is not one of the inputs "
                f"({', '.join(repr(a) for a in aliases)})"
            )
        if not table.primary_key:
            raise InvalidQueryError(f"temporal table {table.name!r} has no primary key")
        tables[table.name] = table
    return tables


def check_primary_key(table: TemporalTable, columns: Sequence[str]) -> None:
    missing = [k for k in table.primary_key if k not in columns]
    if missing:
        raise InvalidQueryError(
            f"temporal table {table.name!r}: primary key column {missing[0]!r} is not a column "
            "of the input"
        )


def carried_state(
    previous: Mapping[str, TemporalState], table: TemporalTable
) -> TemporalState | None:
    """The previous state of ``table``, unless its primary key changed since."""
    state = previous.get(table.name)
    return state if state is not None and state.primary_key == table.primary_key else None


def latest_state(
    session: SparkSession,
    new_slice: DataFrame,
    previous: TemporalState | None,
    table: TemporalTable,
    vocab: DatasetVocabulary,
) -> TemporalState:
    """The table's state after applying ``new_slice`` to ``previous`` (computed by Spark)."""
    check_primary_key(table, new_slice.columns)
    events = new_slice
    if previous is not None:
        before = session.createDataFrame(
            spark_input_table(pq.read_table(io.BytesIO(previous.parquet)))
        )
        events = before.unionByName(new_slice, allowMissingColumns=True)
    key = [F.col(quote_identifier(k)) for k in table.primary_key]
    newest_first = Window.partitionBy(*key).orderBy(
        F.col(quote_identifier(vocab.offset_column)).desc()
    )
    latest = (
        events.withColumn(_RANK, F.row_number().over(newest_first))
        .where(F.col(_RANK) == 1)
        .drop(_RANK)
        .where(F.col(quote_identifier(vocab.operation_type_column)).isin(*_PRESENT))
    )
    rows = latest.toArrow()
    rows = rows.sort_by([(k, "ascending") for k in table.primary_key])
    return TemporalState(primary_key=table.primary_key, parquet=parquet_bytes(rows))


def state_view(session: SparkSession, state: TemporalState) -> DataFrame:
    """The state as a DataFrame (what the query sees under the table's name)."""
    return session.createDataFrame(spark_input_table(pq.read_table(io.BytesIO(state.parquet))))
