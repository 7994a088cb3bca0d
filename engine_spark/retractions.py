"""Retractions and corrections in inputs (RFC-015 ``op`` other than append) are never dropped.

A row-wise query that carries ``op`` through passes them on. A row-wise query that does not
select ``op`` would turn every retraction into an append: refused. A stateful query
(aggregation, window, join) cannot take back what its state absorbed: refused too, naming
the input and the offset. The check reads only the ``offset`` and ``op`` columns of the
input files (pyarrow, no Spark job).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from common.odf.engine_protocol import TransformRequestInput
from engine_spark.errors import InputDataError, InvalidQueryError
from engine_spark.exchange import DataFormat, detect_format, read_arrow


def check_no_retractions(inputs: Sequence[TransformRequestInput], *, stateful: bool) -> None:
    for inp in inputs:
        found = first_change(inp)
        if found is None:
            continue
        op, offset = found
        where = (
            f"input {inp.query_alias!r} has a retraction or correction (op {op}) at offset {offset}"
        )
        if stateful:
            raise InvalidQueryError(
                f"{where}; this stateful query (aggregation, window or join) cannot apply "
                "retractions to its state, and ignoring them would give wrong results: "
                "keep stateful queries to append-only inputs"
            )
        raise InvalidQueryError(
            f"{where}, and the query does not select {inp.vocab.operation_type_column!r}: "
            f"it would turn the retraction into an append; select "
            f"{inp.vocab.operation_type_column!r} so changes pass through"
        )


def first_change(inp: TransformRequestInput) -> tuple[int, int] | None:
    """``(op, offset)`` of the input slice's first row that is not an append, if any."""
    if inp.offset_interval is None:
        return None
    op_name, offset_name = inp.vocab.operation_type_column, inp.vocab.offset_column
    for path in inp.data_paths:
        table = _columns(path, [offset_name, op_name])
        if table is None:
            continue
        offsets, ops = table.column(offset_name), table.column(op_name)
        in_slice = pc.and_(
            pc.greater_equal(offsets, inp.offset_interval.start),
            pc.less_equal(offsets, inp.offset_interval.end),
        )
        changed = pc.and_(in_slice, pc.not_equal(ops, 0))
        if pc.any(changed).as_py():
            rows = table.filter(changed)
            first = pc.index(rows.column(offset_name), pc.min(rows.column(offset_name))).as_py()
            return int(rows.column(op_name)[first].as_py()), int(
                rows.column(offset_name)[first].as_py()
            )
    return None


def _columns(path: str, names: list[str]) -> pa.Table | None:
    try:
        if detect_format(path) is DataFormat.PARQUET:
            present = set(pq.read_schema(path).names)
            return pq.read_table(path, columns=names) if present.issuperset(names) else None
    except (pa.ArrowException, OSError) as e:
        raise InputDataError(f"cannot read Parquet data: {e}", path=path) from e
    table = read_arrow(path)
    return table.select(names) if set(table.column_names).issuperset(names) else None
