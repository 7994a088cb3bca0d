"""Rendering rows and documents in each output format."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

import yaml

from coordinator.output import OutputFormat, render_document, render_rows

ROWS: list[dict[str, object]] = [
    {"name": "a", "when": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), "n": 1, "extra": "x"},
    {"name": "b[red]", "when": None, "n": None, "extra": "y"},
]
COLUMNS = ("name", "when", "n")


def render(fmt: OutputFormat) -> str:
    out = io.StringIO()
    render_rows(ROWS, COLUMNS, fmt, out=out)
    return out.getvalue()


def test_json_and_yaml_are_plain_data() -> None:
    expected = [
        {"name": "a", "when": "2024-01-02T03:04:05Z", "n": 1},
        {"name": "b[red]", "when": None, "n": None},
    ]
    assert json.loads(render(OutputFormat.JSON)) == expected
    assert yaml.safe_load(render(OutputFormat.YAML)) == expected


def test_csv_has_a_header_and_empty_nulls() -> None:
    rows = list(csv.reader(io.StringIO(render(OutputFormat.CSV))))
    assert rows == [["name", "when", "n"], ["a", "2024-01-02T03:04:05Z", "1"], ["b[red]", "", ""]]


def test_table_keeps_text_verbatim_without_trailing_spaces() -> None:
    lines = render(OutputFormat.TABLE).splitlines()
    assert lines[0].split() == ["name", "when", "n"]
    assert "b[red]" in lines[2]  # not taken as rich markup
    assert all(line == line.rstrip() for line in lines)


def test_document() -> None:
    out = io.StringIO()
    render_document({"t": datetime(2024, 1, 1, tzinfo=UTC), "xs": (1, 2)}, "json", out=out)
    assert json.loads(out.getvalue()) == {"t": "2024-01-01T00:00:00Z", "xs": [1, 2]}
