"""Invalid UTF-8 is refused on ingest (file and line named), shown safely, and found by verify."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.arrow_strings import invalid_utf8_column
from common.odf.events import AddPushSource, SetVocab
from common.odf.fragments import MergeStrategyAppend, ReadStepNdJson
from common.odf.multihash import Multihash
from coordinator.cli.output import render_rows
from coordinator.ingest.errors import ReadError
from coordinator.ingest.push import push_ingest
from coordinator.ingest.readers import utf8
from coordinator.ingest.readers.utf8 import check_utf8_file
from coordinator.query.display import table_rows
from coordinator.verify.files import data_file_facts
from tests.unit.ingest.helpers import add_data_events, new_dataset

SOURCE = AddPushSource(
    source_name="src",
    read=ReadStepNdJson(schema=("t TIMESTAMP", "s STRING", "l ARRAY<STRING>")),
    merge=MergeStrategyAppend(),
)
GOOD = b'{"t": "2020-01-01T00:00:00Z", "s": "ok \xc3\xa9", "l": ["x"]}\n'


def bad_string(value: bytes) -> pa.Array:
    return pa.array([b"ok", value], pa.binary()).view(pa.string())


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        (
            "a.ndjson",
            GOOD + b'{"t": null, "s": "bad\xff"}\n',
            "a.ndjson:2: invalid UTF-8: byte 0xff at byte 22",
        ),
        (
            "a.ndjson",
            GOOD + b'\n{"l": ["\xc3"]}\n',
            "a.ndjson:3: invalid UTF-8: byte 0xc3 at byte 9",
        ),
        (
            "a.csv",
            b"t,s\n2020-01-01,\xed\xa0\x80\n",
            "a.csv:2: invalid UTF-8: byte 0xed at byte 12",
        ),
        ("a.json", b'[\n{"s": "\xfe"}]', "a.json:2: invalid UTF-8: byte 0xfe at byte 8"),
        (
            "a.geojson",
            b'{"type": "FeatureCollection",\n\n "x": "\xc0\xaf"}',
            "a.geojson:3: invalid UTF-8",
        ),
    ],
)
def test_text_inputs_with_invalid_utf8_are_refused_naming_the_line(
    tmp_path: Path, name: str, content: bytes, where: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ReadError) as e:
        check_utf8_file(path, name=name)
    assert str(e.value).startswith(where)
    assert "\n" not in str(e.value)


def test_a_sequence_split_across_chunks_is_valid_and_errors_count_lines_across_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(utf8, "CHUNK", 7)
    path = tmp_path / "a.ndjson"
    path.write_bytes("é\n€€€\n\n😀😀\n".encode() * 5)
    check_utf8_file(path, name="a.ndjson")  # every multi-byte sequence crosses a chunk border
    path.write_bytes("é\n€€€\n\n😀😀\n".encode() * 5 + b"ab\xe2\x82")  # truncated at the end
    with pytest.raises(ReadError, match=r"^a.ndjson:21: invalid UTF-8: byte 0xe2 at byte 3 "):
        check_utf8_file(path, name="a.ndjson")


def test_push_ingest_refuses_invalid_utf8_and_commits_nothing(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, SOURCE, SetVocab(event_time_column="t"))
    head = ds.head()
    data = tmp_path / "a.ndjson"
    data.write_bytes(GOOD + b'{"t": "2020-01-02T00:00:00Z", "s": "\x80"}\n')
    with pytest.raises(ReadError, match=r"^a.ndjson:2: invalid UTF-8"):
        push_ingest(ds, data, name="a.ndjson")
    assert ds.head() == head
    data.write_bytes(GOOD)
    push_ingest(ds, data, name="a.ndjson")
    assert len(add_data_events(ds)) == 1


def test_binary_inputs_have_their_string_columns_checked(tmp_path: Path) -> None:
    ds = new_dataset(tmp_path, SOURCE, SetVocab(event_time_column="t"))
    head = ds.head()
    data = tmp_path / "a.parquet"
    strings = pa.array([["x"], ["y", "z"]]).cast(pa.list_(pa.string()))
    nested = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), bad_string(b"\xff"))
    table = pa.table({"t": pa.array([None, None], pa.timestamp("ms", "UTC")), "s": ["a", "b"]})
    pq.write_table(table.append_column("l", nested), data)
    with pytest.raises(ReadError, match=r"^a.parquet: column 'l': invalid UTF-8"):
        push_ingest(ds, data, name="a.parquet", input_format="parquet")
    assert ds.head() == head
    assert invalid_utf8_column(table.append_column("l", strings).to_batches()[0]) is None


def test_rendering_invalid_utf8_does_not_fail() -> None:
    nested = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), bad_string(b"b\xffd"))
    table = pa.table({"s": bad_string(b"x\xfe"), "l": nested, "n": [1, 2]})
    rows = table_rows(table)
    assert rows == [{"s": "ok", "l": ["ok"], "n": 1}, {"s": "x\ufffd", "l": ["b\ufffdd"], "n": 2}]
    out = io.StringIO()
    render_rows(rows, table.column_names, "json", out=out)
    assert "x\ufffd" in out.getvalue()


def test_verify_reports_invalid_utf8_in_a_committed_data_file(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    pq.write_table(pa.table({"n": [1, 2], "s": bad_string(b"\xff")}), tmp_path / "f.parquet")
    digest = Multihash.sha3_256(b"x")  # the name only matters for the path
    (tmp_path / "f.parquet").rename(tmp_path / "data" / str(digest))
    facts = data_file_facts(tmp_path, digest)
    assert facts.unreadable is None
    assert facts.invalid_utf8 == "s"
