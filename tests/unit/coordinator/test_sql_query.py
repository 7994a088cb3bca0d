"""``odf sql`` without an engine: the names a query mentions, statements, aliases, columns."""

from __future__ import annotations

import re

import pytest

from common.odf.errors import ValidationError
from coordinator.cli.sql import parse_aliases
from coordinator.query import SqlSyntaxError, mentioned_names, single_query, statements
from coordinator.query.display import unique_names
from coordinator.query.references import NameChain, name_chains


def test_names_chains_and_quoted_names() -> None:
    sql = (
        "SELECT f.carrier, COUNT(*) FROM `nyc.flights` AS f "
        "JOIN nyc.airlines a ON a.code = f.carrier JOIN `we``ird`.`x y` w"
    )
    assert name_chains(sql) == [
        NameChain(("SELECT",)),
        NameChain(("f", "carrier")),
        NameChain(("COUNT",)),
        NameChain(("FROM",)),
        NameChain(("nyc.flights",)),
        NameChain(("AS",)),
        NameChain(("f",)),
        NameChain(("JOIN",)),
        NameChain(("nyc", "airlines")),
        NameChain(("a",)),
        NameChain(("ON",)),
        NameChain(("a", "code")),
        NameChain(("f", "carrier")),
        NameChain(("JOIN",)),
        NameChain(("we`ird", "x y")),
        NameChain(("w",)),
    ]
    names = mentioned_names(sql)
    assert {"nyc.flights", "nyc.airlines", "nyc", "airlines", "we`ird.x y", "x y"} <= names
    assert all(n == n.lower() for n in names)


def test_strings_and_comments_mention_nothing() -> None:
    sql = """-- `nyc.hidden` in a comment
    SELECT 'nyc.a', "nyc.b", 'it\\'s `nyc.c`' /* `nyc.d` /* nested `nyc.e` */ `nyc.f` */
    FROM `Nyc.Seen`"""
    names = mentioned_names(sql)
    assert "nyc.seen" in names
    assert not {n for n in names if n.startswith("nyc.") and n != "nyc.seen"}


@pytest.mark.parametrize(
    ("sql", "where"),
    [
        ("SELECT 'open", "unterminated 'string' starting at line 1, column 8"),
        ("SELECT 1\n  FROM `open", "unterminated `quoted name` starting at line 2, column 8"),
        ("SELECT /* /* */", "unterminated /* comment starting at line 1, column 8"),
    ],
)
def test_unterminated_tokens_are_located(sql: str, where: str) -> None:
    with pytest.raises(SqlSyntaxError, match=re.escape(where)):
        mentioned_names(sql)


def test_statements_split_at_top_level_semicolons_only() -> None:
    assert statements("SELECT ';' AS s; -- a; comment\n SELECT `a;b` FROM t;;  ") == [
        "SELECT ';' AS s",
        "-- a; comment\n SELECT `a;b` FROM t",
    ]
    assert single_query("SELECT 1;\n", where="q.sql") == "SELECT 1"
    with pytest.raises(ValidationError, match=r"^q\.sql: one query expected, found 2"):
        single_query("SELECT 1; SELECT 2", where="q.sql")
    with pytest.raises(ValidationError, match=r"^--command: no query given"):
        single_query(" ; -- nothing", where="--command")


def test_aliases() -> None:
    assert parse_aliases(["f=nyc.flights", " a = nyc.airlines "]) == {
        "f": "nyc.flights",
        "a": "nyc.airlines",
    }
    with pytest.raises(ValidationError, match=r"expected ALIAS=NAME, got 'nyc\.flights'"):
        parse_aliases(["nyc.flights"])
    with pytest.raises(ValidationError, match="alias 'F' is given twice"):
        parse_aliases(["f=a", "F=b"])


def test_repeated_column_names_are_numbered_for_display() -> None:
    assert unique_names(["id", "x", "ID", "id_2", "id"]) == ["id", "x", "ID_3", "id_2", "id_4"]
    assert unique_names(["a", "b"]) == ["a", "b"]
