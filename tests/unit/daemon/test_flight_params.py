"""Parameters of Flight SQL prepared statements: finding the ``?`` markers, and rendering
bound values as Spark SQL literals that no value can escape from."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from coordinator.daemon.flight_params import ParameterError, bind, literal, markers


def test_markers_skip_strings_identifiers_and_comments() -> None:
    query = (
        "SELECT '?', \"?\", `a?``b`, 'it\\'s ?' -- a ? here\n"
        "/* ? /* nested ? */ ? */ FROM t WHERE x = ? AND y IN (?, ?)"
    )
    assert [query[i - 4 : i + 1] for i in markers(query)] == ["x = ?", "IN (?", "(?, ?"]
    assert markers("SELECT 1") == [] and markers("SELECT '?") == []
    raw = "SELECT r'\\', '?', R\"\\\", ?, bar'x', ?"  # raw strings: a backslash escapes nothing
    assert [raw[i - 3 : i + 1] for i in markers(raw)] == ['", ?', "', ?"]


def one(value: object, kind: pa.DataType | None = None) -> str:
    return literal(pa.scalar(value, kind), pa.scalar(value, kind).type)


def test_literals_are_typed() -> None:
    assert one(None, pa.int64()) == "NULL" and one(True) == "TRUE"
    assert one(-5) == "CAST(-5 AS BIGINT)" and one(7, pa.int8()) == "CAST(7 AS TINYINT)"
    assert one(2**64 - 1, pa.uint64()) == f"CAST({2**64 - 1} AS DECIMAL(20,0))"
    assert one(1.5) == "CAST('1.5' AS DOUBLE)" and one(1e300) == "CAST('1e+300' AS DOUBLE)"
    assert one(float("nan")) == "CAST('NaN' AS DOUBLE)"
    assert one(float("-inf")) == "CAST('-Infinity' AS DOUBLE)"
    assert one(decimal.Decimal("-12.50")) == "CAST('-12.50' AS DECIMAL(4,2))"
    assert one(dt.date(2024, 5, 1)) == "DATE '2024-05-01'"
    stamp = dt.datetime(2024, 5, 1, 12, 0, 0, 250)
    assert one(stamp, pa.timestamp("us", "UTC")) == "TIMESTAMP '2024-05-01 12:00:00.000250+00:00'"
    assert one(stamp, pa.timestamp("ms")) == "TIMESTAMP_NTZ '2024-05-01 12:00:00'"
    assert one(b"\x00'") == "X'0027'"
    with pytest.raises(ParameterError, match="microsecond"):
        literal(pa.scalar(1, pa.timestamp("ns")), pa.timestamp("ns"))
    with pytest.raises(ParameterError, match="cannot be bound"):
        one([1, 2])


@pytest.mark.parametrize(
    "hostile",
    ["' OR 1=1 --", "\\' OR 1=1 --", "`; DROP TABLE t", "*/ SELECT 1 /*", "?", "é\n\x00'\""],
)
def test_hostile_strings_stay_one_literal(hostile: str) -> None:
    query = bind("SELECT * FROM t WHERE name = ?", pa.table({"p": [hostile]}))
    assert query == (f"SELECT * FROM t WHERE name = CAST(X'{hostile.encode().hex()}' AS STRING)")
    assert markers(query) == []


def test_bind_checks_rows_and_count() -> None:
    assert bind("SELECT ? + ?", pa.table({"a": [1], "b": [2]})) == (
        "SELECT CAST(1 AS BIGINT) + CAST(2 AS BIGINT)"
    )
    with pytest.raises(ParameterError, match="2 '\\?' markers, 1 values"):
        bind("SELECT ?, ?", pa.table({"a": [1]}))
    with pytest.raises(ParameterError, match="one row of values, got 2"):
        bind("SELECT ?", pa.table({"a": [1, 2]}))
