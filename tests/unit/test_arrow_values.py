"""Arrow values built from raw buffers equal pyarrow's conversions of the same Python values."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, date, datetime, timedelta

import pyarrow as pa
import pytest

from common.arrow_values import (
    binary_scalar,
    bool_scalar,
    date_scalar,
    int_scalar,
    null_scalar,
    sequence,
    time_of,
    timestamp_scalar,
)
from tests.support.cli import REPO

TIMES = [
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
    datetime(1970, 1, 1, tzinfo=UTC),
    datetime(2024, 2, 29, 12, 30, 1, 123_456, tzinfo=UTC),
    datetime(2024, 2, 29, 12, 30, 1, 123_456, tzinfo=UTC).astimezone(),  # local zone
    datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
]


@pytest.mark.parametrize("unit", ["s", "ms", "us"])
@pytest.mark.parametrize("value", TIMES, ids=str)
def test_timestamps_as_pyarrow_converts_them(value: datetime, unit: str) -> None:
    dtype = pa.timestamp(unit, tz="UTC")
    ours = timestamp_scalar(value, dtype)
    assert ours.equals(pa.scalar(value, dtype))
    assert time_of(ours) == ours.as_py()


@pytest.mark.parametrize("dtype", [pa.date32(), pa.date64()])
@pytest.mark.parametrize("day", [date(1, 1, 1), date(1969, 12, 31), date(2024, 2, 29)], ids=str)
def test_dates_as_pyarrow_converts_them(day: date, dtype: pa.DataType) -> None:
    ours = date_scalar(day, dtype)
    assert ours.equals(pa.scalar(day, dtype))
    assert time_of(ours) == datetime(day.year, day.month, day.day, tzinfo=UTC)


def test_numbers_bytes_and_sequences() -> None:
    for dtype in (pa.int8(), pa.int32(), pa.int64()):
        assert int_scalar(-5, dtype).equals(pa.scalar(-5, dtype))
    assert bool_scalar(True).equals(pa.scalar(True)) and bool_scalar(False).as_py() is False
    for dtype in (pa.binary(), pa.large_binary()):
        assert binary_scalar(b"\x00ab", dtype).equals(pa.scalar(b"\x00ab", dtype))
    assert sequence(7, 4).equals(pa.array([7, 8, 9, 10], pa.int64()))
    assert sequence(0, 0).equals(pa.array([], pa.int64()))
    assert time_of(pa.scalar(None, pa.timestamp("ms", tz="UTC"))) is None
    assert null_scalar(pa.string()).equals(pa.scalar(None, pa.string()))
    ns = pa.scalar(1_500, pa.timestamp("ns", tz="UTC"))
    assert time_of(ns) == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=1)


@pytest.mark.process  # starts a process: out of `make test-fast`
def test_none_of_it_imports_pandas() -> None:
    code = (
        "import sys, datetime as d, pyarrow as pa\n"
        "from common.arrow_values import *\n"
        "t = timestamp_scalar(d.datetime.now(d.UTC), pa.timestamp('ms', tz='UTC'))\n"
        "time_of(t); sequence(3, 10); date_scalar(d.date.today(), pa.date32())\n"
        "binary_scalar(b'x', pa.binary()); bool_scalar(True); null_scalar(pa.string())\n"
        "assert 'pandas' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
