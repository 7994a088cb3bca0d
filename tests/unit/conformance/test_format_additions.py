"""The case format's additions for harvested cases: wildcards, event-time column names, several
watermarks, records outside the interval, per-row system times, nullability, the output schema
without data, acceptable outcomes and known differences; each read by the loader and, where
it compares, checked by the comparison rules."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from coordinator.conformance.case import Case, ErrorClass, Expect, Kind, Order
from coordinator.conformance.compare import Answer, Failure, check_outcome, check_transform
from coordinator.conformance.loader import CaseFormatError, load_case, load_cases
from coordinator.conformance.report import junit_xml, summary_line
from coordinator.conformance.runner import CaseResult, Status
from coordinator.conformance.values import (
    CaseValueError,
    Wildcard,
    expected_value,
    parse_time,
)

DAY = "2024-01-01"
SYSTEM_TIME = datetime(2030, 1, 1, tzinfo=UTC)
TS = pa.timestamp("ms", tz="UTC")
INT64 = pa.int64()

CASE = """\
case: additions
spec: "Engine Contract"
capabilities: [validate-query]
event_time_column: ts_out
knownDifference: "the engine is known to differ here"
inputs:
  - alias: events
    event_time_column: ts
    first_offset: 10
    columns: {n: int64}
transform:
  spark:
    queries:
      - query: SELECT ts AS ts_out, n FROM events
transactions:
  - inputs:
      events:
        before:
          - {ts: "00:00", n: 0}
        rows:
          - {ts: "00:01", n: 1, system_time: "2029-12-31T00:00:00Z"}
        after:
          - {ts: "00:09", n: 9}
        watermarks:
          - "00:01"
          - {event_time: "00:02", system_time: "2030-01-01T00:00:00Z"}
    expect:
      oneOf:
        - error: invalid-query
        - records:
            - {ts_out: "<any>", n: "<any int64>"}
            - {ts_out: "<not-null>", n: "<<1>"}
  - inputs: {}
    expect:
      records: []
      columns: [offset, op, system_time, ts_out, n]
      nullable: {n: true}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "case.yaml"
    path.write_text(text)
    return path


def test_the_additions_load(tmp_path: Path) -> None:
    case = load_case(write(tmp_path, CASE))
    assert case.event_time_column == "ts_out"
    assert case.known_difference == "the engine is known to differ here"
    [events] = case.inputs
    assert (events.event_time_column, events.first_offset) == ("ts", 10)
    part = case.transactions[0].inputs["events"]
    assert [(m.event_time, m.system_time) for m in part.watermarks] == [
        ("00:01", None),
        ("00:02", "2030-01-01T00:00:00Z"),
    ]
    assert part.before == ({"ts": "00:00", "n": 0},)
    assert part.after == ({"ts": "00:09", "n": 9},)
    assert part.slices[0][0]["system_time"] == "2029-12-31T00:00:00Z"
    alternatives = case.transactions[0].expect.one_of
    assert alternatives[0].error is ErrorClass.INVALID_QUERY
    records = alternatives[1].records
    assert records is not None
    assert records[0] == {
        "ts_out": Wildcard(),
        "n": Wildcard(nullable=False, type="int64"),
    }
    assert records[1]["n"] == "<1>"  # the escaped literal
    last = case.transactions[1].expect
    assert last.nullable == {"n": True}
    assert last.schema_checks()


MALFORMED = {
    # what the message says: (the text in CASE, what replaces it)
    "expect.oneOf.1.records.1.n: not a wildcard: '<some>'": ('n: "<<1>"', 'n: "<some>"'),
    "unknown type 'int99'": ('n: "<any int64>"', 'n: "<any int99>"'),
    "1 records before offset 0: give the input a first": ("    first_offset: 10\n", ""),
    "before.0: a record needs ts": ('{ts: "00:00", n: 0}', "{n: 0}"),
    "unknown column(s)": ('{ts: "00:09", n: 9}', '{ts: "00:09", event_time: x}'),
    "not a quoted time": ('system_time: "2029-12-31T00:00:00Z"', "system_time: 1:30"),
    "watermarks.1: not a": ('system_time: "2030-01-01T00:00:00Z"', "system_time: sometime"),
    "add the validate-query": ("capabilities: [validate-query]", "capabilities: []"),
    "'n' names another column": ("event_time_column: ts\n", "event_time_column: n\n"),
    "transactions.0.expect": ("      oneOf:\n", "      records: []\n      oneOf:\n"),
    "inputs": ("        watermarks:", '        watermark: "00:01"\n        watermarks:'),
}


@pytest.mark.parametrize("words", MALFORMED)
def test_malformed_additions_are_refused(tmp_path: Path, words: str) -> None:
    old, new = MALFORMED[words]
    assert old in CASE
    path = write(tmp_path, CASE.replace(old, new, 1))
    with pytest.raises(CaseFormatError) as e:
        load_case(path)
    assert str(e.value).startswith(f"{path}: ")
    assert words in str(e.value)


def test_before_and_after_need_records_in_the_interval(tmp_path: Path) -> None:
    text = CASE.replace(
        '          - {ts: "00:01", n: 1, system_time: "2029-12-31T00:00:00Z"}\n', ""
    )
    with pytest.raises(CaseFormatError, match="need records in the interval"):
        load_case(write(tmp_path, text.replace("rows:\n", "rows: []\n")))


def test_wildcard_spelling() -> None:
    assert expected_value("<any>") == Wildcard()
    assert expected_value("<not-null>") == Wildcard(nullable=False)
    assert expected_value("<any decimal(10,2)>") == Wildcard(nullable=False, type="decimal(10,2)")
    assert expected_value("<<any>") == "<any>"
    assert expected_value("a<b>") == "a<b>"
    assert expected_value(5) == 5
    with pytest.raises(CaseValueError, match="not a wildcard"):
        expected_value("<anything>")
    assert str(Wildcard(nullable=False, type="int64")) == "<any int64>"


def output(values: list[object], n_type: pa.DataType = INT64, nullable: bool = True) -> pa.Table:
    count = len(values)
    schema = pa.schema(
        [
            pa.field("offset", pa.int64(), nullable=False),
            pa.field("op", pa.int32(), nullable=False),
            pa.field("system_time", TS),
            pa.field("ts_out", TS),
            pa.field("n", n_type, nullable=nullable),
        ]
    )
    return pa.table(
        {
            "offset": list(range(count)),
            "op": [0] * count,
            "system_time": [SYSTEM_TIME] * count,
            "ts_out": [parse_time(f"00:0{i}", DAY) for i in range(count)],
            "n": values,
        },
        schema=schema,
    )


def check(expect: Expect, table: pa.Table | None, **answer: object) -> list[Failure]:
    interval = (0, table.num_rows - 1) if table is not None else None
    a = Answer(table=table, interval=interval, **answer)  # type: ignore[arg-type]
    return check_outcome(
        expect,
        a,
        lambda e: check_transform(
            e, a, next_offset=0, system_time=SYSTEM_TIME, day=DAY, event_time="ts_out"
        ),
    )


def records(*rows: dict[str, object]) -> tuple[dict[str, object], ...]:
    return tuple({k: expected_value(v) for k, v in r.items()} for r in rows)


def test_wildcards_match_as_a_multiset_and_in_order() -> None:
    table = output([1, None, 3])
    loose = records(
        {"ts_out": "<any>", "n": "<any>"},
        {"ts_out": "<not-null>", "n": "<not-null>"},
        {"ts_out": "00:02", "n": 3},
    )
    assert check(Expect(records=loose), table) == []
    # A greedy pairing would spend the <any> row on n=1 and leave the null unmatched.
    greedy_trap = records({"ts_out": "<any>", "n": "<any>"}, {"ts_out": "<any>", "n": "<not-null>"})
    assert check(Expect(records=greedy_trap), output([1, None])) == []
    ordered = records({"ts_out": "<any>", "n": 1}, {"ts_out": "<any>", "n": "<any int64>"})
    [failure] = check(Expect(records=ordered, order=Order.ORDERED), output([1, None]))
    assert failure.rule == "records"
    assert "expected {op: +A, ts_out: <any>, n: <any int64>}" in failure.message


def test_a_typed_wildcard_checks_the_column_type() -> None:
    typed = records({"ts_out": "<any>", "n": "<any int64>"})
    assert check(Expect(records=typed), output([7])) == []
    [failure] = check(Expect(records=typed), output([7], pa.int32()))
    assert failure.rule == "records"
    assert "missing    {op: +A, ts_out: <any>, n: <any int64>}" in failure.message


def test_the_output_event_time_column_leads_the_data_columns() -> None:
    table = output([1]).rename_columns(["offset", "op", "system_time", "event_time", "n"])
    [failure, *_] = check(Expect(records=records({"ts_out": "00:00", "n": 1})), table)
    assert failure.rule == "system-columns"
    assert "expected offset, op, system_time, ts_out" in failure.message


def test_nullability_is_checked() -> None:
    assert check(Expect(nullable={"n": True, "offset": False}), output([1])) == []
    failures = check(Expect(nullable={"n": False, "missing": True}), output([1]))
    assert [f.message for f in failures] == [
        "column n: expected not nullable",
        "no column missing in the output schema",
    ]
    assert {f.rule for f in failures} == {"nullable"}


def test_one_of_passes_on_any_outcome_and_lists_each_when_none_holds() -> None:
    either = Expect(
        one_of=(
            Expect(error=ErrorClass.INVALID_QUERY),
            Expect(records=records({"ts_out": "00:00", "n": 1})),
        )
    )
    assert check(either, output([1])) == []
    assert check(either, None, error=ErrorClass.INVALID_QUERY) == []
    [failure] = check(either, output([2]))
    assert failure.rule == "one-of"
    assert "outcome 0: [error-class] expected invalid-query, got success" in failure.message
    assert "outcome 1: [records]" in failure.message
    [failure] = check(either, None, error=ErrorClass.INTERNAL_ERROR)
    assert "outcome 1: [error-class] expected success, got internal-error" in failure.message


def test_a_known_difference_is_reported_apart_from_failures() -> None:
    case = Case("k", "Watermark", Kind.TRANSFORM, frozenset(), known_difference="a margin")
    results = [
        CaseResult(case, Status.KNOWN_DIFFERENCE, (Failure("watermark", "x"),), 0),
        CaseResult(case, Status.PASSED),
    ]
    assert results[0].summary() == "known difference: a margin"
    assert (
        summary_line(results, "e")
        == "e: 2 cases: 1 passed, 0 failed, 0 skipped, 1 known differences"
    )
    assert 'failures="0"' in junit_xml(results, "e")
    assert 'type="known-difference"' in junit_xml(results, "e")


def test_harvested_cases_name_their_origin_and_licence() -> None:
    harvested = [c for c in load_cases() if Path(c.source).parent.name == "harvested"]
    assert len(harvested) >= 10
    licences = ("Apache-2.0", "Business Source License")
    for case in harvested:
        text = " ".join(case.description.split())
        assert text.startswith("Harvested from "), case.name
        assert any(licence in text for licence in licences), case.name
        assert case.name.split("-")[0] in {"flink", "datafusion", "kamu", "risingwave"}
    # the new format is what they need: each addition is used by at least one of them
    used = {
        "event-time column": any(c.event_time_column != "event_time" for c in harvested),
        "input event-time column": any(
            i.event_time_column != "event_time" for c in harvested for i in c.inputs
        ),
        "first offset": any(i.first_offset for c in harvested for i in c.inputs),
        "several watermarks": any(
            len(p.watermarks) > 1
            for c in harvested
            for t in c.transactions
            for p in t.inputs.values()
        ),
        "records outside the interval": any(
            p.before or p.after
            for c in harvested
            for t in c.transactions
            for p in t.inputs.values()
        ),
        "row system times": any(
            "system_time" in r
            for c in harvested
            for t in c.transactions
            for p in t.inputs.values()
            for s in p.slices
            for r in s
        ),
        "one of": any(t.expect.one_of for c in harvested for t in c.transactions),
        "nullable": any(t.expect.nullable for c in harvested for t in c.transactions),
        "schema without data": any(
            t.expect.records == () and t.expect.schema_checks()
            for c in harvested
            for t in c.transactions
        ),
        "wildcards": any(
            isinstance(v, Wildcard)
            for c in harvested
            for t in c.transactions
            for e in (t.expect, *t.expect.one_of)
            for r in e.records or ()
            for v in r.values()
        ),
        "known difference": any(c.known_difference for c in harvested),
    }
    assert [k for k, v in used.items() if not v] == []
