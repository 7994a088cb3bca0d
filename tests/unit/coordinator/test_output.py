"""Rendering rows and documents in each output format."""

from __future__ import annotations

import csv
import io
import json
import random
import string
from contextlib import redirect_stdout
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from common.odf.events import SetInfo
from common.odf.fragments import DatasetKind
from common.odf.snapshot import DatasetSnapshot
from coordinator.cli import main
from coordinator.cli.output import (
    PLAIN_WIDTH,
    OutputFormat,
    plain_table,
    render_document,
    render_rows,
)
from coordinator.cli.rich_table import _Cell, print_table
from coordinator.workspace import Workspace

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


def _rich(columns: list[str], rows: list[list[str]]) -> str:
    out = io.StringIO()
    print_table(columns, rows, out)
    return out.getvalue()


def _random_cell(rnd: random.Random, width: int) -> str:
    return "".join(rnd.choice(string.printable[:95]) for _ in range(rnd.randrange(width + 1)))


@pytest.mark.parametrize("seed", range(40))
def test_plain_table_is_what_rich_prints_to_a_file(seed: int) -> None:
    rnd = random.Random(seed)
    columns = [_random_cell(rnd, 8) or "c" for _ in range(rnd.randrange(1, 7))]
    rows = [[_random_cell(rnd, 40) for _ in columns] for _ in range(rnd.randrange(5))]
    assert plain_table(columns, rows) == _rich(columns, rows)


@pytest.mark.parametrize("overflow", [-1, 0, 1])
def test_plain_table_up_to_rich_width_and_no_further(overflow: int) -> None:
    columns = ["a", "b"]
    rows = [["x" * 100, "y" * (PLAIN_WIDTH - 102 + overflow)]]
    text = plain_table(columns, rows)
    assert (text is None) == (overflow > 0)
    if text is not None:
        assert text == _rich(columns, rows)


@pytest.mark.parametrize("cell", ["two\nlines", "a\ttab", "wide 漢字", "ünï", "\x1b[31mred"])
def test_plain_table_leaves_to_rich_what_it_lays_out_differently(cell: str) -> None:
    assert plain_table(["a"], [[cell]]) is None
    assert plain_table([cell], []) is None


def test_document() -> None:
    out = io.StringIO()
    render_document({"t": datetime(2024, 1, 1, tzinfo=UTC), "xs": (1, 2)}, "json", out=out)
    assert json.loads(out.getvalue()) == {"t": "2024-01-01T00:00:00Z", "xs": [1, 2]}


def _tables(cell: type[Text], width: int, rows: list[tuple[str, str]]) -> str:
    console = Console(file=io.StringIO(), width=width, no_color=True, highlight=False)
    table = Table()
    table.add_column("a", overflow="fold")
    table.add_column("b", overflow="fold")
    for a, b in rows:
        table.add_row(cell(a), cell(b))
    with console.capture() as capture:
        console.print(table)
    return capture.get()


@pytest.mark.parametrize("width", [20, 41, 400])
def test_table_cells_render_exactly_as_rich_text(width: int) -> None:
    rows = [
        ("short", "word " * 40),
        ("a\nmulti\n\nline", "x" * 130 + " tail"),
        ("", "tabs\tand  spaces  " * 5),
        ("ünïcödé 漢字 wide", "[red]not markup[/red] " * 3),
    ]
    assert _tables(_Cell, width, rows) == _tables(Text, width, rows)


def test_a_table_cell_never_renders_several_lines_as_one_segment() -> None:
    # rich splits a multi-line segment with repeated str.partition: quadratic in its size.
    console = Console(file=io.StringIO(), width=30)
    options = console.options.update(width=30)
    segments = list(_Cell("word " * 10_000 + "\n" + "y" * 500).__rich_console__(console, options))
    assert len(segments) > 1600
    assert all(s.text.count("\n") <= 1 and len(s.text) <= 30 for s in segments)


def test_log_of_a_large_description(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """5 MB: seconds when rendering is linear; quadratic rendering took minutes."""
    ws = Workspace.init(tmp_path)
    description = "word " * 1_000_000
    snapshot = DatasetSnapshot(
        name="big", kind=DatasetKind.ROOT, metadata=(SetInfo(description=description),)
    )
    ws.create_dataset(snapshot)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["log", "big"]) == 0
    text = out.getvalue()
    assert text.count("word") == 1_000_000
    assert text.splitlines()[0].split() == ["seq", "hash", "system_time", "event", "details"]
