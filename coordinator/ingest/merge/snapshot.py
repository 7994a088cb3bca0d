"""MergeStrategy::Snapshot: change data capture between the dataset's state and a new snapshot.

1. The previous state is projected from the changelog: per primary key the record with the
   highest offset, kept when its op is ``+A`` or ``+C``.
2. State and snapshot are full-outer-joined on the primary key. A key only in the state is
   retracted (``-R``, old values); a key only in the snapshot is appended (``+A``); a key in
   both whose compare columns differ becomes ``-C`` (old values) followed by ``+C`` (new).
3. Compare columns: ``compareColumns``, or every column of the snapshot but the key. For the
   event-time column a NULL new value never counts as a change (snapshots without their own
   event time would otherwise change on every ingest).

Departures from the reference, which lose records there (see docs/ingest.md): a key's side is
decided by the presence of the joined record, not by a NULL test on the first key column, and
keys match NULL-safely, as the projection groups them. So a new key whose compare columns are
all NULL is still appended, a vanished one still retracted, and NULL keys are stable.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from common.arrow_values import bool_scalar, int_scalar, sequence
from coordinator.ingest.errors import MergeError
from coordinator.ingest.history import History
from coordinator.ingest.merge.base import append_all, require_columns, with_op_schema
from coordinator.ingest.readers.stream import DataStream
from coordinator.ingest.system_columns import OP_TYPE, Op

_OLD = "__odf_old"
_NEW = "__odf_new"


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotMerge:
    primary_key: tuple[str, ...]
    compare_columns: tuple[str, ...] | None
    op_column: str
    event_time_column: str
    offset_column: str

    @property
    def sort_keys(self) -> tuple[str, ...]:
        return (*self.primary_key, self.op_column)

    @property
    def streaming(self) -> bool:
        return False

    def merge(self, new: DataStream, history: History) -> DataStream:
        self._validate(new.schema)
        if history.is_empty:
            return append_all(new, self.op_column)
        snapshot = pa.Table.from_batches(list(new), schema=new.schema)
        stored = history.schema.names if history.schema is not None else []
        names = [n for n in snapshot.schema.names if n in stored]
        state = self.project(history.read([self.offset_column, self.op_column, *names]))
        state = _aligned(state, snapshot.schema)
        changes = self.diff(state, snapshot)
        return DataStream.of_table(changes)

    def _validate(self, schema: pa.Schema) -> None:
        if not self.primary_key:
            raise MergeError("Snapshot needs a non-empty primaryKey", path="merge.primaryKey")
        require_columns(schema, self.primary_key, "primary key")
        if self.compare_columns is not None:
            if not self.compare_columns:
                raise MergeError(
                    "compareColumns, when given, must not be empty", path="merge.compareColumns"
                )
            require_columns(schema, self.compare_columns, "compare")

    def project(self, ledger: pa.Table) -> pa.Table:
        """The current state: per key the latest record, if it is ``+A`` or ``+C``."""
        if ledger.num_rows == 0:
            return ledger.drop_columns([self.offset_column, self.op_column])
        keys = list(self.primary_key)
        latest = ledger.group_by(keys).aggregate([(self.offset_column, "max")])
        is_latest = pc.is_in(
            ledger[self.offset_column], value_set=latest[f"{self.offset_column}_max"]
        )
        live = pc.is_in(
            ledger[self.op_column], value_set=pa.array([Op.APPEND, Op.CORRECT_TO], OP_TYPE)
        )
        state = ledger.filter(pc.and_(is_latest, live))
        return state.drop_columns([self.offset_column, self.op_column])

    def diff(self, old: pa.Table, new: pa.Table) -> pa.Table:
        """The changelog that turns state ``old`` into snapshot ``new`` (``op`` first)."""
        pairs = _join(old, new, self.primary_key)
        o, n = pairs[_OLD], pairs[_NEW]
        only_old = pc.and_(o.is_valid(), n.is_null())
        only_new = pc.and_(o.is_null(), n.is_valid())
        both = pc.and_(o.is_valid(), n.is_valid())
        matched = pairs.filter(both)
        old_m = old.take(matched[_OLD])
        new_m = new.take(matched[_NEW])
        changed = self._changed(old_m, new_m)
        corrected = matched.filter(changed)
        parts = [
            (Op.RETRACT, old, pairs.filter(only_old)[_OLD].combine_chunks().sort()),
            (Op.APPEND, new, pairs.filter(only_new)[_NEW].combine_chunks().sort()),
            (Op.CORRECT_FROM, old, corrected[_OLD].combine_chunks()),
            (Op.CORRECT_TO, new, corrected[_NEW].combine_chunks()),
        ]
        schema = with_op_schema(new.schema, self.op_column)
        tables = [_rows(op, source, rows, schema) for op, source, rows in parts]
        return pa.concat_tables(tables)

    def _changed(self, old: pa.Table, new: pa.Table) -> pa.Array:
        columns = self.compare_columns or tuple(
            c for c in new.schema.names if c not in self.primary_key
        )
        changed = pa.repeat(bool_scalar(False), new.num_rows)
        for c in columns:
            differs = _distinct(old[c].combine_chunks(), new[c].combine_chunks())
            if c == self.event_time_column:
                differs = pc.and_(differs, new[c].combine_chunks().is_valid())
            changed = pc.or_(changed, differs)
        return changed


def _aligned(state: pa.Table, schema: pa.Schema) -> pa.Table:
    """State columns in the snapshot's order and types; columns the state lacks are NULL."""
    columns = []
    for field in schema:
        if field.name not in state.schema.names:
            columns.append(pa.nulls(state.num_rows, field.type))
            continue
        column = state[field.name]
        if not column.type.equals(field.type):
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise MergeError(
                    f"column {field.name!r} is {field.type} in the new data but {column.type}"
                    " in the dataset",
                    path="merge",
                ) from None
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=pa.schema([f.with_nullable(True) for f in schema]))


def _join(old: pa.Table, new: pa.Table, primary_key: tuple[str, ...]) -> pa.Table:
    """Row-number pairs (old, new) of a NULL-safe full outer join on the key."""
    left = _keyed(old, primary_key, _OLD)
    right = _keyed(new, primary_key, _NEW)
    keys = [c for c in left.schema.names if c != _OLD]
    return left.join(right, keys=keys, join_type="full outer").select([_OLD, _NEW])


def _keyed(table: pa.Table, primary_key: tuple[str, ...], row_column: str) -> pa.Table:
    """The key as (is-null, value-or-default) pairs, so that NULL keys compare equal."""
    columns: list[pa.Array | pa.ChunkedArray] = []
    names: list[str] = []
    for i, name in enumerate(primary_key):
        column = table[name]
        columns += [column.is_null(), pc.fill_null(column, _default(column.type, name))]
        names += [f"__odf_k{i}_null", f"__odf_k{i}"]
    columns.append(sequence(0, table.num_rows))
    names.append(row_column)
    return pa.Table.from_arrays(columns, names=names)


def _default(dtype: pa.DataType, column: str) -> pa.Scalar:
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return pa.scalar("", dtype)
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return pa.scalar(b"", dtype)
    if pa.types.is_boolean(dtype):
        return pa.scalar(False)
    try:
        return pa.scalar(0, pa.int64()).cast(dtype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise MergeError(
            f"primary key column {column!r} has type {dtype}, which cannot be a key",
            path="merge.primaryKey",
        ) from None


def _distinct(a: pa.Array, b: pa.Array) -> pa.Array:
    """``a IS DISTINCT FROM b`` (no NULLs in the result; NaN is not distinct from NaN)."""
    a_null, b_null = a.is_null(), b.is_null()
    if _is_nested(a.type):
        same = pa.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)])
        return pc.invert(same)
    equal = pc.equal(a, b)
    if pa.types.is_floating(a.type):
        equal = pc.or_(equal, pc.and_(pc.is_nan(a), pc.is_nan(b)))
    same = pc.if_else(pc.or_(a_null, b_null), pc.and_(a_null, b_null), equal)
    return pc.invert(same)


def _is_nested(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_nested(dtype))


def _rows(op: int, source: pa.Table, rows: pa.Array, schema: pa.Schema) -> pa.Table:
    taken = source.take(rows)
    ops = pa.repeat(int_scalar(op, OP_TYPE), taken.num_rows)
    return pa.Table.from_arrays([ops, *taken.columns], schema=schema.with_metadata(None))
