"""The comparison rules: each failure names its rule and shows a readable diff."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pyarrow as pa

from coordinator.conformance.case import Case, ErrorClass, Expect, Kind, Order
from coordinator.conformance.compare import Answer, Failure, check_error_class, check_transform
from coordinator.conformance.report import junit_xml
from coordinator.conformance.runner import CaseResult, Status
from coordinator.conformance.values import canonical, parse_time

DAY = "2024-01-01"
SYSTEM_TIME = datetime(2030, 1, 1, tzinfo=UTC)
TS = pa.timestamp("ms", tz="UTC")


def output(offsets: list[int], ops: list[int], names: list[str]) -> pa.Table:
    n = len(offsets)
    return pa.table(
        {
            "offset": pa.array(offsets, pa.int64()),
            "op": pa.array(ops, pa.int32()),
            "system_time": pa.array([SYSTEM_TIME] * n, TS),
            "event_time": pa.array([parse_time(f"00:0{i}", DAY) for i in range(n)], TS),
            "name": names,
        }
    )


def check(
    expect: Expect, table: pa.Table | None, next_offset: int = 0, **answer: object
) -> list[Failure]:
    interval = (table["offset"][0].as_py(), table["offset"][-1].as_py()) if table else None
    a = Answer(table=table, interval=interval, **answer)  # type: ignore[arg-type]
    return check_transform(expect, a, next_offset=next_offset, system_time=SYSTEM_TIME, day=DAY)


RECORDS = (
    {"event_time": "00:00", "name": "a"},
    {"op": "-R", "event_time": "00:01", "name": "b"},
)


def test_matching_output_passes() -> None:
    assert (
        check(Expect(records=RECORDS, order=Order.ORDERED), output([0, 1], [0, 1], ["a", "b"]))
        == []
    )


def test_shifted_offsets_break_the_offsets_rule() -> None:
    [failure, *_] = check(Expect(records=RECORDS), output([1, 2], [0, 1], ["a", "b"]))
    assert failure.rule == "offsets"
    assert "from next offset 0" in failure.message


def test_appends_for_retractions_break_the_op_rule() -> None:
    [failure] = check(Expect(records=RECORDS), output([0, 1], [0, 0], ["a", "b"]))
    assert failure.rule == "op"
    assert "missing    {op: -R, event_time: 2024-01-01T00:01:00Z, name: b}" in failure.message
    assert "unexpected {op: +A, event_time: 2024-01-01T00:01:00Z, name: b}" in failure.message


def test_ordered_records_show_a_row_diff() -> None:
    [failure] = check(
        Expect(records=RECORDS, order=Order.ORDERED), output([0, 1], [0, 1], ["a", "c"])
    )
    assert failure.rule == "records"
    assert "row 1: expected {op: -R, event_time: 2024-01-01T00:01:00Z, name: b}" in failure.message
    assert "got      {op: -R, event_time: 2024-01-01T00:01:00Z, name: c}" in failure.message


def test_watermark_checkpoint_and_missing_slice() -> None:
    expect = Expect(records=(), watermark="00:05", check_watermark=True, checkpoint=True)
    failures = check(expect, None, watermark=None, checkpoint=False)
    assert [f.rule for f in failures] == ["watermark", "checkpoint"]
    assert "expected 2024-01-01T00:05:00Z, got none" in failures[0].message
    [empty] = check(Expect(records=()), output([], [], []))
    assert empty.rule == "data-slice"


def test_wrong_system_time_and_columns() -> None:
    table = output([0], [0], ["a"]).set_column(
        2, "system_time", pa.array([datetime(2000, 1, 1, tzinfo=UTC)], TS)
    )
    [failure] = check(Expect(records=RECORDS[:1]), table)
    assert failure.rule == "system-time"
    reordered = output([0], [0], ["a"]).select(
        ["op", "offset", "system_time", "event_time", "name"]
    )
    assert check(Expect(records=RECORDS[:1]), reordered)[0].rule == "system-columns"


def test_error_classes() -> None:
    expect = Expect(error=ErrorClass.INVALID_QUERY)
    [failure] = check_error_class(
        expect, Answer(error=ErrorClass.INTERNAL_ERROR, error_message="boom")
    )
    assert (failure.rule, failure.message) == (
        "error-class",
        "expected invalid-query, got internal-error: boom",
    )
    assert check_error_class(expect, Answer(error=ErrorClass.INVALID_QUERY)) == []
    assert check_error_class(Expect(), Answer())[0:] == []


def test_canonical_values() -> None:
    assert canonical("00:05", TS, DAY) == "2024-01-01T00:05:00Z"
    assert canonical(datetime(2024, 1, 1, 0, 5, tzinfo=UTC), None, DAY) == "2024-01-01T00:05:00Z"
    assert canonical("2024-01-01T01:05:00+01:00", TS, DAY) == "2024-01-01T00:05:00Z"
    assert canonical(4, pa.float64(), DAY) == canonical(4.0, None, DAY)
    assert canonical("12.30", pa.decimal128(10, 2), DAY) == 12.3


def test_junit_report() -> None:
    def case(name: str) -> Case:
        return Case(name=name, spec="Watermark", kind=Kind.TRANSFORM, capabilities=frozenset())

    results = [
        CaseResult(case("a"), Status.PASSED, seconds=1.5),
        CaseResult(case("b"), Status.FAILED, (Failure("watermark", "expected x, got none"),), 2),
        CaseResult(case("c"), Status.SKIPPED, reason="needs capability top-n"),
    ]
    suite = ET.fromstring(junit_xml(results, "engine X"))
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    failure = suite.find("testcase[@name='b']/failure")
    assert failure is not None and failure.get("message") == "watermark"
    assert "transaction 2: [watermark] expected x, got none" in (failure.text or "")
    skipped = suite.find("testcase[@name='c']/skipped")
    assert skipped is not None and skipped.get("message") == "needs capability top-n"
