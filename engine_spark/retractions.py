"""Retractions and corrections in inputs (RFC-015 ``op`` other than append) are never dropped.

A row-wise query that carries ``op`` through passes them on. A row-wise query that does not
select ``op`` would turn every retraction into an append: refused. A stateful query
(aggregation, window, join) cannot take back what its state absorbed: refused too, naming
the input and the offset. The check reads only the ``offset`` and ``op`` columns of the
input files (pyarrow, no Spark job), one Parquet row group at a time, and skips row groups
whose statistics say every ``op`` is 0: the driver's memory does not grow with the input (it
did: ~0.8 GB for a 20M-record input read whole), and an input of appends written with
statistics (as the coordinator and Spark write them) costs footers only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from common.odf.engine_protocol import TransformRequestInput
from common.odf.fragments import OffsetInterval
from engine_spark.errors import InputDataError, InvalidQueryError
from engine_spark.exchange import DataFormat, detect_format, read_arrow


def check_no_retractions(inputs: Sequence[TransformRequestInput], *, stateful: bool) -> None:
    """Refuse the first input whose slice (in its data files) has a retraction or correction."""
    for inp in inputs:
        found = first_change(inp)
        if found is not None:
            raise _refusal(inp, found, stateful=stateful)


def check_slice(inp: TransformRequestInput, rows: pa.Table, *, stateful: bool) -> None:
    """The same check on the input's slice already read (``rows``)."""
    found = _first_change_in(rows, inp.vocab.offset_column, inp.vocab.operation_type_column)
    if found is not None:
        raise _refusal(inp, found, stateful=stateful)


def in_interval(offsets: pa.ChunkedArray, interval: OffsetInterval) -> pa.ChunkedArray:
    """Which rows of ``offsets`` lie in ``interval`` (both ends included)."""
    return pc.and_(pc.greater_equal(offsets, interval.start), pc.less_equal(offsets, interval.end))


def first_change(inp: TransformRequestInput) -> tuple[int, int] | None:
    """``(op, offset)`` of the input slice's first row that is not an append, if any."""
    if inp.offset_interval is None:
        return None
    op_name, offset_name = inp.vocab.operation_type_column, inp.vocab.offset_column
    for path in inp.data_paths:
        for table in op_batches(path, offset_name, op_name):
            rows = table.filter(in_interval(table.column(offset_name), inp.offset_interval))
            found = _first_change_in(rows, offset_name, op_name)
            if found is not None:
                return found
    return None


def op_batches(path: str, offset_name: str, op_name: str) -> Iterator[pa.Table]:
    """The ``offset`` and ``op`` columns of a data file that may hold other operations than
    appends, in file order: a Parquet row group at a time (row groups of appends only, by
    their statistics, are skipped), an Arrow IPC file whole (memory-mapped); nothing when the
    file has no such columns."""
    names = [offset_name, op_name]
    if detect_format(path) is not DataFormat.PARQUET:
        table = read_arrow(path)
        if set(table.column_names).issuperset(names):
            yield table.select(names)
        return
    try:
        file = pq.ParquetFile(path)
        if not set(file.schema_arrow.names).issuperset(names):
            return
        meta = file.metadata
        leaves = [j for j in range(meta.num_columns) if meta.schema.column(j).path == op_name]
        groups = [
            i
            for i in range(meta.num_row_groups)
            if not leaves or not _appends_only(meta.row_group(i).column(leaves[0]).statistics)
        ]
    except (pa.ArrowException, OSError) as e:
        raise InputDataError(f"cannot read Parquet data: {e}", path=path) from e
    for group in groups:
        try:
            table = file.read_row_group(group, columns=names)
        except (pa.ArrowException, OSError) as e:
            raise InputDataError(f"cannot read Parquet data: {e}", path=path) from e
        yield table


def _appends_only(stats: pq.Statistics | None) -> bool:
    """Whether a column chunk's statistics prove every non-null value is 0 (an append)."""
    return stats is not None and stats.has_min_max and stats.min == 0 and stats.max == 0


def _first_change_in(rows: pa.Table, offset_name: str, op_name: str) -> tuple[int, int] | None:
    if op_name not in rows.column_names:
        return None
    changed = rows.filter(pc.not_equal(rows.column(op_name), 0))
    if changed.num_rows == 0:
        return None
    first = changed.sort_by([(offset_name, "ascending")]).slice(0, 1).to_pylist()[0]
    return int(first[op_name]), int(first[offset_name])


def _refusal(
    inp: TransformRequestInput, found: tuple[int, int], *, stateful: bool
) -> InvalidQueryError:
    op, offset = found
    where = f"input {inp.query_alias!r} has a retraction or correction (op {op}) at offset {offset}"
    if stateful:
        return InvalidQueryError(
            f"{where}; this stateful query (aggregation, window or join) cannot apply "
            "retractions to its state, and ignoring them would give wrong results: "
            "keep stateful queries to append-only inputs"
        )
    return InvalidQueryError(
        f"{where}, and the query does not select {inp.vocab.operation_type_column!r}: "
        f"it would turn the retraction into an append; select "
        f"{inp.vocab.operation_type_column!r} so changes pass through"
    )


def read_columns(path: str, names: list[str]) -> pa.Table | None:
    try:
        if detect_format(path) is DataFormat.PARQUET:
            present = set(pq.read_schema(path).names)
            return pq.read_table(path, columns=names) if present.issuperset(names) else None
    except (pa.ArrowException, OSError) as e:
        raise InputDataError(f"cannot read Parquet data: {e}", path=path) from e
    table = read_arrow(path)
    return table.select(names) if set(table.column_names).issuperset(names) else None
