"""Text to DATE and TIMESTAMP columns, as the reference's CSV and JSON readers accept them.

TIMESTAMP: ``2020-01-01`` (midnight), ``2020-01-01T12:00:00`` or with a space (UTC), a
``Z`` or ``±hh[:mm]`` suffix (converted to UTC), fractions up to nanoseconds.
DATE: ``2020-01-01`` and the unpadded ``2020-1-2``; a date-time is truncated to its date.
Timestamps must fall in years 1 to 9999 (UTC), the range ODF blocks and readers handle.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime

import pyarrow as pa
import pyarrow.compute as pc

from common.arrow_values import date_scalar, null_scalar, timestamp_scalar
from coordinator.ingest.errors import ReadError

_HAS_ZONE = r"\d{2}:\d{2}(?::\d{2}(?:\.\d*)?)?\s*(?:[Zz]|[+-]\d{2}(?::?\d{2})?)$"
_LOOSE_DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$")


@dataclass(frozen=True, slots=True)
class BadValue(Exception):
    """Value ``value`` at ``index`` of the array cannot be parsed as ``type_name``."""

    index: int
    value: str
    type_name: str
    reason: str = ""

    @property
    def problem(self) -> str:
        """``invalid TIMESTAMP '...'``, or the value followed by the reason."""
        if self.reason:
            return f"{self.type_name} {self.value!r} {self.reason}"
        return f"invalid {self.type_name} {self.value!r}"


MIN_TIME = datetime(1, 1, 1, tzinfo=UTC)
MAX_TIME = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
OUT_OF_RANGE = "is outside years 1 to 9999 (UTC)"
_MICROS = pa.timestamp("us", "UTC")


def first_out_of_range(values: pa.Array) -> int | None:
    """The index of the first timestamp or date of ``values`` outside years 1-9999 (UTC)."""
    dtype = values.type
    if values.null_count == len(values):
        return None
    if pa.types.is_timestamp(dtype):
        if dtype.unit == "ns":
            return None  # nanoseconds since 1970 only reach 1677-2262
        low = timestamp_scalar(MIN_TIME, _MICROS).cast(dtype)
        high = timestamp_scalar(MAX_TIME, _MICROS).cast(dtype, safe=False)
    elif pa.types.is_date(dtype):
        low = date_scalar(MIN_TIME.date(), dtype)
        high = date_scalar(MAX_TIME.date(), dtype)
    else:
        return None
    bad = pc.or_(pc.less(values, low), pc.greater(values, high))
    if not pc.any(bad).as_py():
        return None
    return int(pc.index(bad, True).as_py())


def check_time_range(batch: pa.RecordBatch, *, name: str) -> None:
    """Raise ``ReadError`` when a top-level timestamp or date of ``batch`` is outside years
    1-9999 (possible in Parquet files): ODF blocks, Python and most readers cannot hold it."""
    for field, column in zip(batch.schema, batch.columns, strict=True):
        index = first_out_of_range(column)
        if index is not None:
            value = pc.cast(column.slice(index, 1), pa.string())[0].as_py()
            raise ReadError(f"column {field.name!r}: {value!r} {OUT_OF_RANGE}", path=name)


def conform_batch(
    batch: pa.RecordBatch,
    schema: pa.Schema,
    *,
    first: int,
    bad_record: Callable[[int, str, str], Exception],
    null_problem: str,
) -> pa.RecordBatch:
    """``batch`` (text read for ``schema``'s columns, in order) as ``schema``: temporal columns
    parsed (unless already of their type, and checked to be in years 1-9999 by the reader),
    NOT NULL columns checked. A bad value raises ``bad_record(record, column,
    problem)``, ``record`` counted from ``first`` (the batch's first record in the file)."""
    columns = []
    for i, field in enumerate(schema):
        column = batch.column(i)
        if is_temporal(field.type) and not column.type.equals(field.type):
            try:
                column = parse_temporal(column, field.type)
            except BadValue as e:
                raise bad_record(first + e.index, field.name, e.problem) from None
        if not field.nullable and column.null_count:
            index = int(column.is_null().to_pylist().index(True))
            raise bad_record(first + index, field.name, null_problem)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def is_temporal(dtype: pa.DataType) -> bool:
    """A date or a timestamp type (what an event time column may be)."""
    return bool(pa.types.is_timestamp(dtype) or pa.types.is_date(dtype))


def parse_temporal(strings: pa.Array, target: pa.DataType) -> pa.Array:
    """``strings`` (utf8, nulls kept) parsed as ``target`` (a timestamp or date type)."""
    if pa.types.is_timestamp(target):
        return parse_timestamps(strings, target)
    return parse_dates(strings, target)


def parse_timestamps(strings: pa.Array, target: pa.DataType) -> pa.Array:
    try:
        parsed = _parse_timestamps_any(strings, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise _first_bad(strings, target, "TIMESTAMP") from None
    index = first_out_of_range(parsed)
    if index is not None:
        raise BadValue(index, str(strings[index]), "TIMESTAMP", OUT_OF_RANGE)
    return parsed


def _parse_timestamps_any(strings: pa.Array, target: pa.DataType) -> pa.Array:
    """Parsed in ``target``'s unit; fractions finer than the unit are truncated: through
    nanoseconds when the values fit them (1677-2262, the reference's exact cast), else by
    dropping the extra digits of the text."""
    tz = target.tz or "UTC"
    try:
        return _parse_timestamps_fast(strings, target.unit, tz).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if target.unit == "ns":
            raise
    try:
        return _parse_timestamps_fast(strings, "ns", tz).cast(target, safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        digits = {"s": 0, "ms": 3, "us": 6}[target.unit]
        pattern = rf"\.(\d{{{digits}}})\d*" if digits else r"\.\d*"
        cut = pc.replace_substring_regex(strings, pattern, r".\1" if digits else "")
        return _parse_timestamps_fast(cut, target.unit, tz).cast(target)


def _parse_timestamps_fast(strings: pa.Array, unit: str, tz: str) -> pa.Array:
    """All with a zone, all without one (one cast each), else split by a regex."""
    aware_type = pa.timestamp(unit, tz)
    for direct in (aware_type, pa.timestamp(unit)):
        try:
            return pc.cast(pc.cast(strings, direct), aware_type)
        except pa.ArrowInvalid:
            pass
    has_zone = pc.match_substring_regex(strings, _HAS_ZONE)
    null = null_scalar(strings.type)
    zoned = pc.cast(pc.if_else(has_zone, strings, null), aware_type)
    naive = pc.cast(pc.if_else(has_zone, null, strings), pa.timestamp(unit))
    return pc.if_else(has_zone, zoned, pc.cast(naive, aware_type))


def parse_dates(strings: pa.Array, target: pa.DataType) -> pa.Array:
    try:
        return pc.cast(strings, target)
    except pa.ArrowInvalid:
        pass
    values: list[date | None] = []
    for i, text in enumerate(strings.to_pylist()):
        if text is None:
            values.append(None)
            continue
        parsed = _parse_one_date(text)
        if parsed is None:
            raise BadValue(i, text, "DATE")
        values.append(parsed)
    return pa.array(values, pa.date32()).cast(target)


def _parse_one_date(text: str) -> date | None:
    m = _LOOSE_DATE.match(text)
    try:
        if m:
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        ts = _parse_timestamps_fast(pa.array([text]), "us", "UTC")
        return ts.cast(pa.date32())[0].as_py()  # type: ignore[no-any-return]
    except (ValueError, pa.ArrowInvalid):
        return None


def _first_bad(strings: pa.Array, target: pa.DataType, type_name: str) -> BadValue:
    """The first value that fails to parse (the slow path, only taken on error)."""
    for i, text in enumerate(strings.to_pylist()):
        if text is None:
            continue
        try:
            _parse_timestamps_any(pa.array([text]), target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return BadValue(i, text, type_name)
    return BadValue(0, str(strings[0]), type_name)
