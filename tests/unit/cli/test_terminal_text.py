"""Text from elsewhere on the terminal: control characters shown escaped, machine formats exact."""

from __future__ import annotations

import csv
import io
import json

import pytest

from coordinator.cli.output import render_rows
from coordinator.cli.terminal_text import visible

HOSTILE = [
    pytest.param("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07", id="osc-window-title"),
    pytest.param("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H", id="csi-clear-screen"),
    pytest.param("\x9b2J", "\\x9b2J", id="c1-csi"),
    pytest.param("ok\rfake", "ok\\rfake", id="carriage-return-overwrites"),
    pytest.param("a\x08\x08b", "a\\x08\\x08b", id="backspace"),
    pytest.param("\x7f\x00", "\\x7f\\x00", id="del-and-nul"),
    pytest.param("abc\u202edcba", "abc\\u202edcba", id="bidi-override"),
    pytest.param("x\u2066y\u2069", "x\\u2066y\\u2069", id="bidi-isolate"),
    pytest.param("line\u2028break", "line\\u2028break", id="line-separator"),
]


@pytest.mark.parametrize(("text", "shown"), HOSTILE)
def test_controls_are_shown_not_obeyed(text: str, shown: str) -> None:
    assert visible(text) == shown
    assert visible(text, lines=True) == shown


def test_one_line_unless_lines_are_kept() -> None:
    assert visible("a\nb\tc") == "a\\nb\\tc"
    assert visible("a\nb\tc", lines=True) == "a\nb\tc"


@pytest.mark.parametrize("text", ["plain", "ünïcödé 漢字 🙂", "back\\slash", ""])
def test_printable_text_is_unchanged(text: str) -> None:
    assert visible(text) == text


def test_tables_escape_values_and_column_names_machine_formats_stay_exact() -> None:
    value = "a\x1b]0;pwned\x07b\x1b[2Jc\u202ed"
    column = "col\x1b[31m[bold]x[/bold]"
    rows = [{column: value}]
    table = io.StringIO()
    render_rows(rows, [column], "table", out=table)
    assert "\x1b" not in table.getvalue() and "\x07" not in table.getvalue()
    assert "a\\x1b]0;pwned\\x07b\\x1b[2Jc\\u202ed" in table.getvalue()
    assert "col\\x1b[31m[bold]x[/bold]" in table.getvalue()  # no rich markup read either
    as_json = io.StringIO()
    render_rows(rows, [column], "json", out=as_json)
    assert json.loads(as_json.getvalue()) == rows
    as_csv = io.StringIO()
    render_rows(rows, [column], "csv", out=as_csv)
    assert list(csv.reader(io.StringIO(as_csv.getvalue()))) == [[column], [value]]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_rich_tables_on_a_terminal_escape_them_too() -> None:
    out = _Terminal()
    render_rows([{"s\x1b[2J": "a\x1b]0;pwned\x07b\nnext line"}], ["s\x1b[2J"], "table", out=out)
    text = out.getvalue()
    for raw in ("\x1b]0;", "\x07", "\x1b[2J"):
        assert raw not in text
    assert "a\\x1b]0;pwned\\x07b" in text and "next line" in text and "s\\x1b[2J" in text
