"""A large CSV file is parsed in parallel segments of whole records: the records, their types
and the errors are those of the streaming reader, whatever the file holds."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from common.odf.fragments import ReadStepCsv
from coordinator.ingest.errors import ReadError
from coordinator.ingest.lane import ordered_map
from coordinator.ingest.readers.csv import read_csv
from coordinator.ingest.readers.csv_segments import SegmentCutter, whole_records

SEGMENT = 256
"""Bytes per segment in these tests: every file below is cut many times."""

STREAMED = 1 << 40
"""A segment size no file reaches: the file is streamed as a whole."""


# --- cutting -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunk", "at_end", "expected"),
    [
        (b"a,1\nb,2\nc,", False, (8, False)),  # up to the last newline
        (b"a,1\nb,2\nc,", True, (10, False)),  # the last record needs no newline
        (b'a,1\nb,"2\n', False, (4, True)),  # stops before the line of the first quote
        (b'"a",1\n', False, (0, True)),
        (b"abcdef", False, (0, True)),  # a record longer than a segment
        (b"a\r\nb\r\n", False, (6, False)),
        (b"", True, (0, False)),
    ],
)
def test_whole_records(chunk: bytes, at_end: bool, expected: tuple[int, bool]) -> None:
    assert whole_records(chunk, b'"', at_end=at_end) == expected


def test_segments_cover_the_file_up_to_its_first_quote(tmp_path: Path) -> None:
    lines = [f"{i},name{i}\n" for i in range(200)]
    lines[150] = '150,"quoted\nvalue"\n'
    path = tmp_path / "a.csv"
    path.write_text("".join(lines))
    cutter = SegmentCutter(path, quote='"', size=64)
    segments = list(cutter)
    text = path.read_bytes()
    assert b"".join(bytes(s.data) for s in segments) == text[: cutter.rest]
    assert cutter.rest == text.index(b"150,")
    assert all(bytes(s.data).endswith(b"\n") and len(s.data) <= 64 for s in segments)
    assert [s.offset for s in segments] == [
        sum(len(s.data) for s in segments[:i]) for i in range(len(segments))
    ]


def test_a_file_without_quotes_is_cut_to_its_end(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(b"x\n" * 100 + b"last")  # no newline at the end
    cutter = SegmentCutter(path, quote='"', size=16)
    assert b"".join(bytes(s.data) for s in cutter) == path.read_bytes()
    assert cutter.rest is None


# --- the same records as the streaming reader ----------------------------------------------------


def read_both(path: Path, step: ReadStepCsv) -> tuple[pa.Table, pa.Table]:
    """The file read in segments, and streamed (the reference behaviour)."""
    tables = []
    for size in (SEGMENT, STREAMED):
        data = read_csv(step, path, name=path.name, block_size=4096, segment_size=size)
        tables.append(pa.Table.from_batches(list(data), schema=data.schema))
    return tables[0], tables[1]


TIMES = [
    "2020-01-01T12:00:00Z",
    "2020-01-01T12:00:00.123456Z",
    "2020-01-01T12:00:00+05:30",
    "1960-06-01T00:00:00-01:00",
]
"""Times the CSV converter takes as they are."""


def rows(n: int, time: Iterator[str] | None = None) -> str:
    return "".join(
        f"{next(time) if time else TIMES[i % len(TIMES)]},{i},city {i % 7},{i / 4}\n"
        for i in range(n)
    )


DDL = ReadStepCsv(
    header=True, schema=("t TIMESTAMP", "id BIGINT", "city STRING NOT NULL", "x DOUBLE")
)


@pytest.mark.parametrize(
    ("name", "content", "step"),
    [
        ("typed", "t,id,city,x\n" + rows(500), DDL),
        ("no header", rows(500), ReadStepCsv(schema=DDL.schema)),
        ("inferred", "t,id,city,x\n" + rows(500), ReadStepCsv(header=True, infer_schema=True)),
        ("strings", "t,id,city,x\n" + rows(500), ReadStepCsv(header=True)),
        ("generated names", rows(500), ReadStepCsv(infer_schema=True)),
        (
            "crlf, bom, blank lines",
            "\ufefft,id,city,x\r\n" + rows(300).replace("\n", "\r\n\r\n"),
            DDL,
        ),
        ("no final newline", "t,id,city,x\n" + rows(300).rstrip("\n"), DDL),
        (
            "a quote half-way",
            "t,id,city,x\n" + rows(200) + 'x,1,"multi\nline, ""quoted""",2\n' + rows(200),
            ReadStepCsv(header=True, schema=("t STRING", "id BIGINT", "city STRING", "x DOUBLE")),
        ),
        (
            "quoted from the header on (as pyarrow writes CSV)",
            '"t","id","city","x"\n'
            + "".join(f'"{TIMES[i % 4]}",{i},"city {i % 7}",{i / 4}\n' for i in range(300)),
            DDL,
        ),
        (
            "nulls",
            "t,id,city,x\n" + rows(300).replace(",city 3,", ",city 3,,").replace(",,", ","),
            DDL,
        ),
        (
            "tabs",
            "t\tid\tcity\tx\n" + rows(300).replace(",", "\t"),
            ReadStepCsv(header=True, separator="\t", schema=DDL.schema),
        ),
    ],
)
def test_segments_read_what_the_stream_reads(
    tmp_path: Path, name: str, content: str, step: ReadStepCsv
) -> None:
    path = tmp_path / "a.csv"
    path.write_text(content, encoding="utf-8")
    assert path.stat().st_size > 4 * SEGMENT, name
    segmented, streamed = read_both(path, step)
    assert segmented.schema == streamed.schema
    assert segmented.equals(streamed), name
    assert segmented.num_rows >= 300


def test_times_the_converter_rejects_are_parsed_as_the_reference_does(tmp_path: Path) -> None:
    others = iter(
        ["2020-01-01", "2020-01-01 12:00:00", "2020-01-01T12:00:00.123456789Z"] * 100 + TIMES * 50
    )
    path = tmp_path / "a.csv"
    path.write_text("t,id,city,x\n" + rows(500, others))
    segmented, streamed = read_both(path, DDL)
    assert segmented.equals(streamed)
    assert segmented.column("t")[1].as_py().hour == 12  # a time without a zone is UTC


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("x,1,a,2.0", "a.csv:402: column 't': invalid TIMESTAMP 'x'"),
        ("0000-01-01T00:00:00Z,1,a,2.0", "a.csv:402: column 't': TIMESTAMP '0000-01-01T00:00:00Z'"),
        ("2020-01-01T00:00:00Z,oops,a,2.0", "a.csv:402: column 'id': invalid int64 value 'oops'"),
        ("2020-01-01T00:00:00Z,1,,2.0", "a.csv:402: column 'city': empty value in a NOT NULL"),
        ("2020-01-01T00:00:00Z,1,a", "a.csv:402: expected 4 fields, got 3"),
    ],
)
def test_a_bad_record_in_a_later_segment_names_its_line(
    tmp_path: Path, bad_line: str, message: str
) -> None:
    path = tmp_path / "a.csv"
    path.write_text("t,id,city,x\n" + rows(400) + bad_line + "\n" + rows(100))
    for size in (SEGMENT, STREAMED):
        with pytest.raises(ReadError) as e:
            list(read_csv(DDL, path, name="a.csv", block_size=4096, segment_size=size))
        assert str(e.value).startswith(message), size


def test_a_record_longer_than_a_segment_is_streamed(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    long_city = "c" * (3 * SEGMENT)
    path.write_text("t,id,city,x\n" + rows(100) + f"{TIMES[0]},7,{long_city},1.0\n" + rows(100))
    segmented, streamed = read_both(path, DDL)
    assert segmented.equals(streamed)
    assert long_city in segmented.column("city").to_pylist()


# --- the ordered, parallel map -------------------------------------------------------------------


def test_ordered_map_keeps_the_order_on_several_threads() -> None:
    threads: set[str] = set()

    def slow_square(i: int) -> int:
        threads.add(threading.current_thread().name)
        time.sleep(0.002 * (i % 3))  # later items often finish first
        return i * i

    assert list(ordered_map(slow_square, range(40), workers=3, name="t")) == [
        i * i for i in range(40)
    ]
    assert len(threads) > 1 and threading.current_thread().name not in threads


def test_ordered_map_takes_items_only_a_few_ahead() -> None:
    taken: list[int] = []

    def items() -> Iterator[int]:
        for i in range(100):
            taken.append(i)
            yield i

    results = ordered_map(lambda i: i, items(), workers=2, name="t")
    assert next(results) == 0
    assert len(taken) <= 3
    results.close()  # the consumer stops early: the threads end


def test_ordered_map_raises_an_error_in_its_place() -> None:
    def task(i: int) -> int:
        if i == 5:
            raise ValueError("item 5")
        return i

    got: list[int] = []
    with pytest.raises(ValueError, match="item 5"):
        got.extend(ordered_map(task, range(20), workers=2, name="t"))
    assert got == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="at least one"):
        list(ordered_map(task, range(2), workers=0, name="t"))
