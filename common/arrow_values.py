"""Arrow values made from Python numbers without pyarrow's Python-object conversion.

``pa.array(list)``, ``pa.scalar(x)`` and ``Scalar.as_py()`` on times make pyarrow import
pandas (to recognise its types) the first time they run: 0.7-1.5 s in a fresh process, more
than the rest of a small ingest. Ingest builds its few constant values from raw buffers and
reads its few results as integers instead, so that a command never imports pandas (ingest,
hashing).
"""

from __future__ import annotations

import array
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pyarrow as pa

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def int64_array(values: list[int]) -> pa.Array:
    """An Int64 array of ``values`` (no nulls)."""
    data = pa.py_buffer(array.array("q", values))
    return pa.Array.from_buffers(pa.int64(), len(values), [None, data])


def sequence(start: int, n: int) -> pa.Array:
    """Int64 ``start, start + 1, ..., start + n - 1``."""
    values = np.arange(start, start + n, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(values)])


def null_scalar(dtype: pa.DataType) -> pa.Scalar:
    """A null of ``dtype`` (``None`` given to a compute function is converted from Python)."""
    return pa.nulls(1, dtype)[0]


def bool_scalar(value: bool) -> pa.Scalar:
    return int_scalar(int(value), pa.int8()).cast(pa.bool_())


def binary_scalar(value: bytes, dtype: pa.DataType) -> pa.Scalar:
    """``value`` as a scalar of the binary type ``dtype`` (binary or large binary)."""
    wide = pa.types.is_large_binary(dtype)
    offsets = array.array("q" if wide else "i", [0, len(value)])
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(value)]
    return pa.Array.from_buffers(dtype, 1, buffers)[0]


def date_scalar(value: date, dtype: pa.DataType) -> pa.Scalar:
    """``value`` as a scalar of the date type ``dtype`` (date32 or date64)."""
    days = (value - date(1970, 1, 1)).days
    if pa.types.is_date64(dtype):
        return int64_array([days * 86_400_000]).cast(dtype)[0]
    return int_scalar(days, pa.int32()).cast(dtype)


def int_scalar(value: int, dtype: pa.DataType) -> pa.Scalar:
    """``value`` as a scalar of the integer type ``dtype``."""
    return int64_array([value]).cast(dtype)[0]


def timestamp_scalar(value: datetime, dtype: pa.TimestampType) -> pa.Scalar:
    """The aware ``value`` as a scalar of the timestamp type ``dtype``, rounded down to its
    unit as ``pa.scalar`` does."""
    delta = value.astimezone(UTC) - EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    ticks = micros * _PER_SECOND[dtype.unit] // 1_000_000
    return int64_array([ticks]).cast(dtype)[0]


def time_of(value: pa.Scalar) -> datetime | None:
    """A timestamp or date scalar as an aware UTC datetime (a date: midnight of that day);
    sub-microsecond digits are truncated, as ``as_py`` does."""
    if not value.is_valid:
        return None
    if pa.types.is_date32(value.type):
        return _midnight(value.value)
    if pa.types.is_date64(value.type):
        return _midnight(value.value // 86_400_000)
    ticks: int = value.value
    per_second = _PER_SECOND[value.type.unit]
    seconds, rest = divmod(ticks, per_second)
    return EPOCH + timedelta(seconds=seconds, microseconds=rest * 1_000_000 // per_second)


def time_bounds(values: pa.Array | pa.ChunkedArray) -> tuple[datetime | None, datetime | None]:
    """The least and greatest of timestamp or date ``values`` as aware UTC datetimes
    (``time_of``); ``(None, None)`` without a valid value or for another type."""
    if not (pa.types.is_timestamp(values.type) or pa.types.is_date(values.type)):
        return None, None
    import pyarrow.compute as pc  # not at import: commands that never need it skip its cost

    bounds = pc.min_max(values)
    return time_of(bounds["min"]), time_of(bounds["max"])


def _midnight(days: int) -> datetime:
    day = date(1970, 1, 1) + timedelta(days=days)
    return datetime(day.year, day.month, day.day, tzinfo=UTC)
