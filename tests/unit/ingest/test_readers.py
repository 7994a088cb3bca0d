"""Readers on real files: the reference's reader tests, parsing rules and located errors."""

from __future__ import annotations

import json
import re
import zipfile
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shapefile

from common.odf.fragments import (
    ReadStep,
    ReadStepCsv,
    ReadStepEsriShapefile,
    ReadStepGeoJson,
    ReadStepJson,
    ReadStepNdGeoJson,
    ReadStepNdJson,
    ReadStepParquet,
)
from coordinator.ingest.errors import ReadError, UnsupportedOptionError
from coordinator.ingest.readers import read_data, read_step_for_format
from coordinator.ingest.readers.csv import read_csv

CITIES = "city,population\nA,1000\nB,2000\nC,3000\n"


def read(step: ReadStep, path: Path) -> tuple[pa.Schema, list[dict[str, Any]]]:
    data = read_data(step, path, name=path.name)
    table = pa.Table.from_batches(list(data), schema=data.schema)
    return data.schema, table.to_pylist()


def file(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


def fields(schema: pa.Schema) -> list[tuple[str, pa.DataType, bool]]:
    return [(f.name, f.type, f.nullable) for f in schema]


# --- CSV: the reference's reader tests -----------------------------------------------------------


def test_csv_with_schema(tmp_path: Path) -> None:
    step = ReadStepCsv(header=True, schema=("city string not null", "population int not null"))
    schema, records = read(step, file(tmp_path, "a.csv", CITIES))
    assert fields(schema) == [("city", pa.string(), False), ("population", pa.int32(), False)]
    assert records == [
        {"city": "A", "population": 1000},
        {"city": "B", "population": 2000},
        {"city": "C", "population": 3000},
    ]


def test_csv_without_schema_reads_strings_or_infers(tmp_path: Path) -> None:
    path = file(tmp_path, "a.csv", CITIES)
    schema, records = read(ReadStepCsv(header=True), path)
    assert fields(schema) == [("city", pa.string(), True), ("population", pa.string(), True)]
    assert records[0] == {"city": "A", "population": "1000"}
    schema, _ = read(ReadStepCsv(header=True, infer_schema=True), path)
    assert fields(schema) == [("city", pa.string(), True), ("population", pa.int64(), True)]


def test_csv_without_header(tmp_path: Path) -> None:
    path = file(tmp_path, "a.csv", "A,1000\nB,2000\n")
    schema, records = read(ReadStepCsv(schema=("city STRING", "population BIGINT")), path)
    assert fields(schema) == [("city", pa.string(), True), ("population", pa.int64(), True)]
    assert records[1] == {"city": "B", "population": 2000}
    schema, _ = read(ReadStepCsv(), path)
    assert schema.names == ["column_1", "column_2"]


def test_csv_header_columns_are_matched_to_the_schema_by_name(tmp_path: Path) -> None:
    step = ReadStepCsv(header=True, schema=("event_time TIMESTAMP", "temp DOUBLE", "hum DOUBLE"))
    swapped = file(tmp_path, "a.csv", "event_time,hum,temp\n2020-01-01T00:00:00Z,80,21.5\n")
    schema, records = read(step, swapped)
    assert schema.names == ["event_time", "temp", "hum"]
    assert records == [{"event_time": datetime(2020, 1, 1, tzinfo=UTC), "temp": 21.5, "hum": 80.0}]
    # Case and spaces around a name do not matter (unquoted DDL names are lower-cased).
    spaced = file(tmp_path, "b.csv", "HUM, Temp ,Event_Time\n80,21.5,2020-01-01T00:00:00Z\n")
    assert read(step, spaced)[1] == records


def test_csv_header_reordering_holds_for_segments_and_located_errors(tmp_path: Path) -> None:
    rows = "".join(f"{i},{i * 10}\n" for i in range(3000))
    path = file(tmp_path, "big.csv", "b,a\n" + rows + "x,1\n")
    step = ReadStepCsv(header=True, schema=("a BIGINT", "b BIGINT"))
    data = read_csv(step, path, name="big.csv", block_size=4096, segment_size=8192)
    with pytest.raises(ReadError, match=r"^big.csv:3002: column 'b': invalid int64 value 'x'"):
        list(data)
    path.write_text("b,a\n" + rows)
    data = read_csv(step, path, name="big.csv", block_size=4096, segment_size=8192)
    table = pa.Table.from_batches(list(data), schema=data.schema)
    assert table.slice(2999).to_pylist() == [{"a": 29990, "b": 2999}]


@pytest.mark.parametrize(
    ("header", "difference"),
    [
        ("city,n,extra", "not in the schema: extra"),
        ("city", "missing: n"),
        ("city,population", "missing: n; not in the schema: population"),
        ("city,city", "missing: n; repeated: city"),
    ],
)
def test_csv_header_that_is_not_a_permutation_is_refused(
    tmp_path: Path, header: str, difference: str
) -> None:
    path = file(tmp_path, "a.csv", f"\n{header}\nA,1\n")
    with pytest.raises(ReadError) as e:
        read(ReadStepCsv(header=True, schema=("city STRING", "n INT")), path)
    assert str(e.value).startswith(
        f"a.csv:2: the header's columns [{header.replace(',', ', ')}] do not match the"
        f" schema's [city, n] ({difference}); columns are matched by name, in any order"
    )
    assert "ingest.csvColumnsByPosition" in str(e.value) and "\n" not in str(e.value)


def test_csv_columns_by_position_only_skips_the_header(tmp_path: Path) -> None:
    path = file(tmp_path, "a.csv", "population,city\nA,1\n")
    step = ReadStepCsv(header=True, schema=("city STRING", "n INT"))
    data = read_data(step, path, name="a.csv", csv_columns_by_position=True)
    assert pa.Table.from_batches(list(data)).to_pylist() == [{"city": "A", "n": 1}]


def test_csv_null_values(tmp_path: Path) -> None:
    path = file(tmp_path, "a.csv", 'city,population,note\nA,1000,x\nB,,""\nC,3000,NULL\n')
    _, records = read(ReadStepCsv(header=True, infer_schema=True), path)
    assert [r["population"] for r in records] == [1000, None, 3000]
    assert [r["note"] for r in records] == ["x", None, "NULL"]


def test_tsv_null_values(tmp_path: Path) -> None:
    path = file(tmp_path, "a.tsv", "1\t2\t3\t4\n1\t\t\t4\n1\t2\t\t\n\t\t3\t4\n")
    step = ReadStepCsv(separator="\t", schema=("a INT", "b INT", "c INT", "d INT"))
    _, records = read(step, path)
    assert [tuple(r.values()) for r in records] == [
        (1, 2, 3, 4),
        (1, None, None, 4),
        (1, 2, None, None),
        (None, None, 3, 4),
    ]


def test_csv_value_parsing(tmp_path: Path) -> None:
    content = (
        "t,d,b,f,s\n"
        "2020-01-01,2020-01-02,true,NaN,  padded \n"
        '2020-01-01T12:00:00,2020-1-2,FALSE,inf,"quoted, with ""quotes"""\n'
        '2020-01-01 12:00:00+02:00,2020-01-03,True,1.5,"multi\nline"\n'
        "2020-01-01T12:00:00.123456Z,,tRuE,-2,x\n"
    )
    step = ReadStepCsv(
        header=True, schema=("t TIMESTAMP", "d DATE", "b BOOLEAN", "f DOUBLE", "s STRING")
    )
    schema, records = read(step, file(tmp_path, "a.csv", content))
    assert schema.field("t").type == pa.timestamp("us", "UTC")  # stored as ms: years 1-9999
    assert [r["t"] for r in records] == [
        datetime(2020, 1, 1, tzinfo=UTC),
        datetime(2020, 1, 1, 12, tzinfo=UTC),
        datetime(2020, 1, 1, 10, tzinfo=UTC),
        datetime(2020, 1, 1, 12, 0, 0, 123456, tzinfo=UTC),
    ]
    assert [r["d"] for r in records] == [date(2020, 1, 2), date(2020, 1, 2), date(2020, 1, 3), None]
    assert [r["b"] for r in records] == [True, False, True, True]
    assert str(records[0]["f"]) == "nan" and records[1]["f"] == float("inf")
    assert [r["s"] for r in records] == ["  padded ", 'quoted, with "quotes"', "multi\nline", "x"]


def test_csv_bom_blank_lines_and_crlf(tmp_path: Path) -> None:
    path = file(tmp_path, "a.csv", b"\xef\xbb\xbfcity,n\r\nA,1\r\n\r\nB,2\r\n")
    schema, records = read(ReadStepCsv(header=True, infer_schema=True), path)
    assert schema.names == ["city", "n"]
    assert records == [{"city": "A", "n": 1}, {"city": "B", "n": 2}]


def test_csv_is_streamed_in_blocks(tmp_path: Path) -> None:
    lines = "".join(f"c{i},{i}\n" for i in range(5000))
    path = file(tmp_path, "a.csv", lines)
    step = ReadStepCsv(schema=("city STRING", "n BIGINT"))
    batches = list(read_csv(step, path, name="a.csv", block_size=4096))
    assert len(batches) > 10
    assert sum(b.num_rows for b in batches) == 5000
    assert batches[-1].column("n")[-1].as_py() == 4999


# --- CSV: bad input, one line naming file, line and column -------------------------------------


@pytest.mark.parametrize(
    ("content", "schema", "message"),
    [
        ("a,b\n1,2\n3,4\n5,6,7\n", ("a INT", "b INT"), "bad.csv:4: expected 2 fields, got 3"),
        ("a,b\n1,2\n3\n", ("a INT", "b INT"), "bad.csv:3: expected 2 fields, got 1"),
        ("a,b\n1,2\n3,x\n", ("a INT", "b INT"), "bad.csv:3: column 'b': invalid int32 value 'x'"),
        ("a,b\n1,2\n3,3000000000\n", ("a INT", "b INT"), "bad.csv:3: column 'b': invalid int32"),
        ("a,b\n1,yes\n", ("a INT", "b BOOLEAN"), "bad.csv:2: column 'b': invalid bool value 'yes'"),
        (
            "a,t\n1,2020-01-01\n2,9/25/2022\n",
            ("a INT", "t TIMESTAMP"),
            "bad.csv:3: column 't': invalid TIMESTAMP '9/25/2022'",
        ),
        (
            "a,d\n1,2020/01/01\n",
            ("a INT", "d DATE"),
            "bad.csv:2: column 'd': invalid DATE '2020/01/01'",
        ),
        (
            "a,b\n1,2\n,3\n",
            ("a INT NOT NULL", "b INT"),
            "bad.csv:3: column 'a': empty value in a NOT NULL column",
        ),
    ],
)
def test_csv_bad_input(tmp_path: Path, content: str, schema: tuple[str, ...], message: str) -> None:
    path = file(tmp_path, "bad.csv", content)
    with pytest.raises(ReadError) as e:
        read(ReadStepCsv(header=True, schema=schema), path)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_csv_bad_value_deep_in_a_large_file_names_its_line(tmp_path: Path) -> None:
    lines = ["n"] + [str(i) for i in range(20000)] + ["oops"] + ["1"] * 10
    path = file(tmp_path, "big.csv", "\n".join(lines) + "\n")
    step = ReadStepCsv(header=True, schema=("n BIGINT",))
    with pytest.raises(ReadError, match=r"^big.csv:20002: column 'n': invalid int64 value 'oops'"):
        list(read_csv(step, path, name="big.csv", block_size=4096))


def test_csv_null_value_is_honoured_for_every_type(tmp_path: Path) -> None:
    content = "city,population,t\nA,NA,2020-01-01T00:00:00Z\nNA,,NA\n"
    step = ReadStepCsv(
        header=True, null_value="NA", schema=("city STRING", "population INT", "t TIMESTAMP")
    )
    _, records = read(step, file(tmp_path, "a.csv", content))
    assert [r["city"] for r in records] == ["A", None]
    assert [r["population"] for r in records] == [None, None]
    assert records[1]["t"] is None
    assert records[0]["t"] is not None


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (ReadStepCsv(separator="::"), "separator must be a single byte"),
        (ReadStepCsv(encoding="latin1"), "encoding 'latin1' is not supported"),
        (ReadStepCsv(timestamp_format="yyyy"), "timestampFormat 'yyyy' is not supported"),
        (ReadStepCsv(escape="\\"), "escape"),
    ],
)
def test_csv_unsupported_options(tmp_path: Path, step: ReadStepCsv, message: str) -> None:
    with pytest.raises(UnsupportedOptionError, match=message):
        read(step, file(tmp_path, "a.csv", CITIES))


# --- NdJson / Json -------------------------------------------------------------------------------


def test_ndjson_with_schema(tmp_path: Path) -> None:
    content = (
        '{"city": "A", "population": 1000, "event_time": "2022-09-25 01:02:03", "extra": 1}\n'
        "\n"
        '{"city": "B", "population": 2000, "event_time": "2022-09-25T01:02:03-01:00"}\n'
        '{"city": "C", "population": 3000, "event_time": "2022-09-25T01:02:03Z",'
        ' "date": "2022-09-25"}\n'
    )
    step = ReadStepNdJson(
        schema=(
            "city string not null",
            "population int not null",
            "event_time timestamp",
            "date date",
        )
    )
    schema, records = read(step, file(tmp_path, "a.ndjson", content))
    assert fields(schema)[:2] == [("city", pa.string(), False), ("population", pa.int32(), False)]
    assert [r["event_time"] for r in records] == [
        datetime(2022, 9, 25, 1, 2, 3, tzinfo=UTC),
        datetime(2022, 9, 25, 2, 2, 3, tzinfo=UTC),
        datetime(2022, 9, 25, 1, 2, 3, tzinfo=UTC),
    ]
    assert [r["date"] for r in records] == [None, None, date(2022, 9, 25)]


def test_ndjson_inferred_columns_follow_the_reference_order(tmp_path: Path) -> None:
    content = '{"z": 1, "a": "x", "m": 2, "s": {"y": 1, "b": 2}}\n{"b": 1, "a": "y"}\n'
    schema, records = read(ReadStepNdJson(), file(tmp_path, "a.ndjson", content))
    assert schema.names == ["a", "m", "s", "z", "b"]
    assert schema.field("s").type == pa.struct([("b", pa.int64()), ("y", pa.int64())])
    assert records[1] == {"a": "y", "m": None, "s": None, "z": None, "b": 1}


@pytest.mark.parametrize(
    ("content", "step", "message"),
    [
        ('{"a": 1}\n{"a": 2\n', ReadStepNdJson(), "a.ndjson:2: invalid JSON"),
        (
            '{"a": 1}\n\n{"a": "x"}\n',
            ReadStepNdJson(),
            "a.ndjson:3: field 'a': string 'x' where earlier records have type integer",
        ),
        (
            '{"a": 1}\n{"a": "x"}\n',
            ReadStepNdJson(schema=("a BIGINT",)),
            "a.ndjson:2: field 'a': string 'x' is not a valid int64",
        ),
        (
            '{"a": 1.5}\n',
            ReadStepNdJson(schema=("a INT",)),
            "a.ndjson:1: field 'a': number 1.5 is not a valid int32",
        ),
        (
            '{"a": 1}\n{"b": 1}\n',
            ReadStepNdJson(schema=("a INT NOT NULL",)),
            "a.ndjson:2: field 'a': missing or null value",
        ),
        (
            '{"t": "9/25/2022 1:02:03"}\n',
            ReadStepNdJson(schema=("t TIMESTAMP",)),
            "a.ndjson:1: field 't': invalid TIMESTAMP",
        ),
        ("[1, 2]\n", ReadStepNdJson(), "a.ndjson:1: expected an object, got array"),
    ],
)
def test_ndjson_bad_input(tmp_path: Path, content: str, step: ReadStep, message: str) -> None:
    with pytest.raises(ReadError) as e:
        read(step, file(tmp_path, "a.ndjson", content))
    assert str(e.value).startswith(message)


CITIES_JSON = [
    {"population": 1000, "city": "A"},
    {"city": "B", "population": 2000},
    {"city": "C", "population": 3000},
]


def test_json_object_with_sub_path_and_array(tmp_path: Path) -> None:
    step = ReadStepJson(
        sub_path="result.cities", schema=("city string not null", "population int not null")
    )
    doc = file(tmp_path, "a.json", json.dumps({"result": {"cities": CITIES_JSON}}))
    schema, records = read(step, doc)
    assert fields(schema) == [("city", pa.string(), False), ("population", pa.int32(), False)]
    assert records[0] == {"city": "A", "population": 1000}
    schema, records = read(ReadStepJson(), file(tmp_path, "b.json", json.dumps(CITIES_JSON)))
    assert schema.names == ["city", "population"]
    assert len(records) == 3


@pytest.mark.parametrize(
    ("doc", "sub_path", "message"),
    [
        ({"result": {}}, "result.cities", "sub-path 'result.cities' not found"),
        ({"result": {"cities": 1}}, "result.cities", "sub-path 'result.cities' is not an array"),
        ({"cities": []}, None, "the document root is not an array"),
        ([{"n": 1}, {"n": "x"}], None, "a.json: $[1]: field 'n': string 'x'"),
    ],
)
def test_json_bad_input(tmp_path: Path, doc: Any, sub_path: str | None, message: str) -> None:
    with pytest.raises(ReadError) as e:
        read(ReadStepJson(sub_path=sub_path), file(tmp_path, "a.json", json.dumps(doc)))
    assert message in str(e.value)


# --- GeoJson / NdGeoJson / Shapefile -------------------------------------------------------------

SQUARE = {
    "type": "Polygon",
    "coordinates": [[[0.0, 0.0], [10.0, 0.0], [10.0, 10.0], [0.0, 10.0], [0.0, 0.0]]],
}
FEATURES = [
    {
        "type": "Feature",
        "id": 0,
        "properties": {"id": 0, "zipcode": "00101", "name": "A"},
        "geometry": SQUARE,
    },
    {
        "type": "Feature",
        "id": 1,
        "properties": {"id": 1, "zipcode": "00202", "name": "B"},
        "geometry": {"type": "Point", "coordinates": [20.0, 1]},
    },
]
GEO_SCHEMA = (
    "id int not null",
    "zipcode string not null",
    "name string not null",
    "geometry string not null",
)


def test_geojson(tmp_path: Path) -> None:
    doc = file(
        tmp_path, "a.geojson", json.dumps({"type": "FeatureCollection", "features": FEATURES})
    )
    _, records = read(ReadStepGeoJson(schema=GEO_SCHEMA), doc)
    assert records[0] == {
        "id": 0,
        "zipcode": "00101",
        "name": "A",
        "geometry": '{"coordinates":[[[0.0,0.0],[10.0,0.0],[10.0,10.0],[0.0,10.0],[0.0,0.0]]],'
        '"type":"Polygon"}',
    }
    assert records[1]["geometry"] == '{"coordinates":[20.0,1],"type":"Point"}'
    schema, _ = read(ReadStepGeoJson(), doc)
    assert schema.names == ["geometry", "id", "name", "zipcode"]
    assert schema.field("id").type == pa.int64()


def test_ndgeojson(tmp_path: Path) -> None:
    doc = file(tmp_path, "a.ndgeojson", "\n".join(json.dumps(f) for f in FEATURES) + "\n")
    _, records = read(ReadStepNdGeoJson(schema=GEO_SCHEMA), doc)
    assert [r["name"] for r in records] == ["A", "B"]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"type": "Feature"}, "expected a FeatureCollection, got type 'Feature'"),
        (
            {
                "type": "FeatureCollection",
                "features": [{"type": "Feature", "properties": {}, "geometry": None}],
            },
            "features[0]: feature 'geometry' is not an object",
        ),
        (
            {"type": "FeatureCollection", "features": [{"type": "Point"}]},
            "features[0]: expected a Feature",
        ),
    ],
)
def test_geojson_bad_input(tmp_path: Path, doc: Any, message: str) -> None:
    with pytest.raises(ReadError, match=re.escape(message)):
        read(ReadStepGeoJson(), file(tmp_path, "a.geojson", json.dumps(doc)))


def make_shapefile_zip(tmp_path: Path) -> Path:
    base = tmp_path / "shp" / "regions"
    base.parent.mkdir()
    with shapefile.Writer(str(base), shapeType=shapefile.POLYGON) as w:
        w.field("iso", "C")
        w.field("name", "C")
        w.field("pop", "N", decimal=0)
        w.field("area", "N", decimal=2)
        w.field("founded", "D")
        # Clockwise rings are exterior rings in the shapefile format.
        w.poly([[[0, 0], [0, 10], [10, 10], [10, 0], [0, 0]]])
        w.record("UKR", "Cherkasy", 1200, 20.9, date(1795, 6, 1))
        w.poly([[[0, 0], [0, 5], [5, 5], [5, 0], [0, 0]]])
        w.record("UKR", "Zhytomyr", None, 29.8, None)
    archive = tmp_path / "regions.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for ext in ("shp", "shx", "dbf"):
            z.write(f"{base}.{ext}", f"data/regions.{ext}")
        z.writestr("readme.txt", "not a shapefile")
    return archive


def test_shapefile(tmp_path: Path) -> None:
    archive = make_shapefile_zip(tmp_path)
    step = ReadStepEsriShapefile(schema=("iso STRING", "name STRING", "pop BIGINT", "founded DATE"))
    _, records = read(step, archive)
    assert records == [
        {"iso": "UKR", "name": "Cherkasy", "pop": 1200, "founded": date(1795, 6, 1)},
        {"iso": "UKR", "name": "Zhytomyr", "pop": None, "founded": None},
    ]
    schema, records = read(ReadStepEsriShapefile(sub_path="data/*.shp"), archive)
    assert schema.field("pop").type == pa.float64()
    assert records[0]["founded"] == "1795-6-1"
    assert json.loads(records[0]["geometry"])["type"] == "Polygon"


def test_shapefile_bad_input(tmp_path: Path) -> None:
    with pytest.raises(
        ReadError, match=re.escape("expected exactly one .shp file matching 'x/*.shp', found: none")
    ):
        read(ReadStepEsriShapefile(sub_path="x/*.shp"), make_shapefile_zip(tmp_path))
    with pytest.raises(ReadError, match="must be given as a ZIP archive"):
        read(ReadStepEsriShapefile(), file(tmp_path, "a.shp", b"nope"))


# --- Parquet -------------------------------------------------------------------------------------


def test_parquet_as_is_and_coerced_to_a_schema(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    pq.write_table(
        pa.table(
            {
                "t": pa.array([datetime(2023, 1, 1, tzinfo=UTC)], pa.timestamp("ms", "UTC")),
                "n": pa.array([7], pa.int64()),
                "dropped": ["x"],
            }
        ),
        path,
    )
    schema, records = read(ReadStepParquet(), path)
    assert schema.names == ["t", "n", "dropped"]
    schema, records = read(ReadStepParquet(schema=("n INT", "t STRING")), path)
    assert fields(schema) == [("n", pa.int32(), True), ("t", pa.string(), True)]
    assert records[0]["n"] == 7 and records[0]["t"].startswith("2023-01-01")
    with pytest.raises(ReadError, match="column 'missing' is not in the file"):
        read(ReadStepParquet(schema=("missing INT",)), path)
    with pytest.raises(ReadError, match="column 'dropped': cannot convert string to int32"):
        read(ReadStepParquet(schema=("dropped INT",)), path)


# --- --input-format ----------------------------------------------------------------------------


def test_input_format_override_keeps_only_the_schema() -> None:
    source = ReadStepNdJson(schema=("a INT",), timestamp_format="rfc3339")
    assert read_step_for_format(source, None) is source
    assert read_step_for_format(source, "ndjson") is source
    assert read_step_for_format(source, "csv") == ReadStepCsv(schema=("a INT",))
    with pytest.raises(UnsupportedOptionError, match="unknown input format 'xml'"):
        read_step_for_format(source, "xml")
