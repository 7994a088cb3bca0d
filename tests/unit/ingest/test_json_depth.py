"""JSON from elsewhere nested past the limit: a located refusal before any parser recurses."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from common.odf.fragments import (
    ReadStep,
    ReadStepGeoJson,
    ReadStepJson,
    ReadStepNdGeoJson,
    ReadStepNdJson,
)
from common.serde.json_depth import MAX_DEPTH, first_too_deep
from coordinator.ingest.errors import ReadError
from coordinator.ingest.readers import read_data
from coordinator.ingest.readers.json_depth import check_file

DEEP = 100_000
"""Past Python's recursion limit and past the depth that crashes pyarrow's inference."""


def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


def test_the_limit_itself_passes_one_more_level_does_not() -> None:
    assert first_too_deep(nested(MAX_DEPTH).encode()) is None
    assert first_too_deep(nested(MAX_DEPTH + 1).encode()) == MAX_DEPTH


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param('{"a":' * 4 + "1" + "}" * 4, 15, id="objects"),
        pytest.param('[{"a":[{"b":1}]}]', 7, id="arrays-and-objects-alternate"),
        pytest.param('["]]]]]", [[[[1]]]]]', 12, id="closing-brackets-in-a-string"),
        pytest.param('["\\"]]]]", [[[[1]]]]]', 13, id="escaped-quote-stays-in-the-string"),
        pytest.param('["\\\\", [[[[1]]]]]', 9, id="escaped-backslash-ends-the-string"),
        pytest.param('"[[[[[[[["', None, id="opening-brackets-in-a-string"),
        pytest.param("[[[]]]\n[[[]]]\n[[[]]]", None, id="each-line-starts-at-zero"),
        pytest.param('"\n[[[[]]]]', 5, id="an-open-string-ends-with-its-line"),
    ],
)
def test_strings_escapes_and_lines(text: str, expected: int | None) -> None:
    assert first_too_deep(text.encode(), limit=3) == expected


def test_a_document_nests_across_its_lines() -> None:
    """A pretty-printed document: its line breaks are whitespace, they reset nothing."""
    text = "[\n" * 4 + "]\n" * 4
    assert first_too_deep(text.encode(), limit=3) is None
    assert first_too_deep(text.encode(), limit=3, lines=False) == 6
    assert first_too_deep(b'["\n[[[[", 1]', limit=3, lines=False) is None


def test_a_file_is_checked_across_chunks_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "big.ndjson"
    fine = json.dumps({"v": nested(10)}) + "\n"
    with open(path, "w") as f:
        f.write(fine * 300_000)  # several chunks
        f.write('{"v": 1, "w": ' + nested(DEEP) + "}\n")
    with pytest.raises(ReadError) as e:
        check_file(path, lambda n: f"big.ndjson:{n}")
    assert str(e.value) == (
        f"big.ndjson:300001: JSON nested deeper than {MAX_DEPTH} arrays and objects (column 526)"
    )


PRETTY_OBJECTS = '{"records": [{"v":\n' + nested(DEEP, '{"a":\n', "}") + "}]}"
"""A pretty-printed document: level 3 on its first line, then one more on each line."""
FEATURE = '{"type":"Feature","properties":{"a":1},"geometry":{"type":"Point","coordinates":X}}'


@pytest.mark.parametrize(
    ("step", "content", "where"),
    [
        pytest.param(
            ReadStepNdJson(schema=["v STRING"]),
            '{"v": "a"}\n{"v": ' + nested(DEEP) + "}\n",
            "deep:2",
            id="ndjson-declared-column",
        ),
        pytest.param(
            ReadStepNdJson(),
            '{"v": "a"}\n{"v": ' + nested(DEEP) + "}\n",
            "deep:2",
            id="ndjson-inferred",
        ),
        pytest.param(
            ReadStepNdJson(),
            '{"v": ' + nested(DEEP, '{"a":', "}") + "}\n",
            "deep:1",
            id="ndjson-objects",
        ),
        pytest.param(
            ReadStepJson(), '[{"v": 1},\n{"v": ' + nested(DEEP) + "}]", "deep:2", id="json"
        ),
        pytest.param(ReadStepJson(), "[\n" * DEEP + "]\n" * DEEP, "deep:513", id="json-pretty"),
        pytest.param(ReadStepJson(), PRETTY_OBJECTS, "deep:511", id="json-pretty-objects"),
        pytest.param(
            ReadStepGeoJson(),
            '{"type":"FeatureCollection","features":[\n'
            + FEATURE.replace("X", "[\n" * DEEP + "]" * DEEP)
            + "]}",
            "deep:510",
            id="geojson-pretty",
        ),
        pytest.param(
            ReadStepGeoJson(),
            '{"type":"FeatureCollection","features":[\n'
            + FEATURE.replace("X", nested(DEEP))
            + "]}",
            "deep:2",
            id="geojson",
        ),
        pytest.param(
            ReadStepNdGeoJson(),
            FEATURE.replace("X", "[1,2]") + "\n" + FEATURE.replace("X", nested(DEEP)) + "\n",
            "deep:2",
            id="ndgeojson",
        ),
    ],
)
def test_every_json_reader_refuses_with_the_line(
    step: ReadStep, content: str, where: str, tmp_path: Path
) -> None:
    path = tmp_path / "deep"
    path.write_text(content)
    with pytest.raises(ReadError, match=f"nested deeper than {MAX_DEPTH}") as e:
        data = read_data(step, path, name="deep")
        pa.Table.from_batches(list(data), schema=data.schema)
    assert str(e.value).startswith(f"{where}: JSON nested deeper")
    assert "\n" not in str(e.value)


def test_nesting_within_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "ok.ndjson"
    path.write_text(json.dumps({"v": json.loads(nested(50))}) + "\n")
    data = read_data(ReadStepNdJson(), path, name="ok")
    assert pa.Table.from_batches(list(data), schema=data.schema).num_rows == 1
