"""Which names a Spark SQL text mentions, found by a small lexer (no parser needed).

``odf sql`` hands the engine only the datasets a query can refer to, so it needs the names in
the text: bare identifiers (``flights``), backtick-quoted ones (```nyc.flights```, with
``````` for a backtick) and dotted chains of them (``nyc.flights``, ``f.carrier``). String
literals (``'...'``, ``"..."``, backslash escapes) and comments (``-- ...``, ``/* ... */``,
nested) mention nothing. Over-reporting is harmless (a dataset that is not used costs
a footer read); missing a name would hide a dataset from the query, so anything that may be
a relation name is reported.

The same lexer splits a script at its top-level semicolons.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from common.odf.errors import ValidationError


class SqlSyntaxError(ValidationError):
    """The SQL text cannot be split into tokens (an unterminated quote or comment)."""


class TokenKind(Enum):
    NAME = "name"
    QUOTED_NAME = "quoted-name"
    DOT = "dot"
    SEMICOLON = "semicolon"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    text: str
    """The name without quotes for names; the source text otherwise."""
    start: int


@dataclass(frozen=True, slots=True)
class NameChain:
    """Names joined by dots: ``nyc.flights`` is ``("nyc", "flights")``, ```nyc.flights```
    is ``("nyc.flights",)``."""

    parts: tuple[str, ...]

    @property
    def dotted(self) -> str:
        return ".".join(self.parts)


_BARE = re.compile(r"[A-Za-z0-9_]+")


def tokens(sql: str) -> Iterator[Token]:
    """Names, dots, semicolons and other characters of ``sql``; no strings or comments."""
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            i = _skip_block_comment(sql, i)
        elif c in "'\"":
            i = _skip_string(sql, i)
        elif c == "`":
            name, end = _quoted_name(sql, i)
            yield Token(TokenKind.QUOTED_NAME, name, i)
            i = end
        elif match := _BARE.match(sql, i):
            yield Token(TokenKind.NAME, match.group(), i)
            i = match.end()
        else:
            kind = {".": TokenKind.DOT, ";": TokenKind.SEMICOLON}.get(c, TokenKind.OTHER)
            yield Token(kind, c, i)
            i += 1


def name_chains(sql: str) -> list[NameChain]:
    """Every chain of names joined by dots, in order of appearance."""
    chains: list[NameChain] = []
    parts: list[str] = []
    expect_name = True
    for token in tokens(sql):
        is_name = token.kind in (TokenKind.NAME, TokenKind.QUOTED_NAME)
        if is_name and expect_name:
            parts.append(token.text)
            expect_name = False
        elif token.kind is TokenKind.DOT and parts and not expect_name:
            expect_name = True
        else:
            if parts:
                chains.append(NameChain(tuple(parts)))
            parts = [token.text] if is_name else []
            expect_name = not is_name
    if parts:
        chains.append(NameChain(tuple(parts)))
    return chains


def mentioned_names(sql: str) -> set[str]:
    """Every name and dotted chain ``sql`` mentions, lowercased (candidate relation names)."""
    names: set[str] = set()
    for chain in name_chains(sql):
        names.add(chain.dotted.lower())
        names.update(p.lower() for p in chain.parts)
    return names


def statements(sql: str) -> list[str]:
    """``sql`` split at top-level semicolons, each stripped; statements with nothing but
    comments and blanks are dropped."""
    parts: list[str] = []
    start, empty = 0, True
    for token in tokens(sql):
        if token.kind is TokenKind.SEMICOLON:
            if not empty:
                parts.append(sql[start : token.start].strip())
            start, empty = token.start + 1, True
        else:
            empty = False
    if not empty:
        parts.append(sql[start:].strip())
    return parts


def _skip_block_comment(sql: str, start: int) -> int:
    depth, i = 0, start
    while i < len(sql):
        if sql.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif sql.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    raise SqlSyntaxError(f"unterminated /* comment starting at {_where(sql, start)}")


def _skip_string(sql: str, start: int) -> int:
    quote, i = sql[start], start + 1
    while i < len(sql):
        if sql[i] == "\\":
            i += 2
        elif sql[i] == quote:
            return i + 1
        else:
            i += 1
    raise SqlSyntaxError(f"unterminated {quote}string{quote} starting at {_where(sql, start)}")


def _quoted_name(sql: str, start: int) -> tuple[str, int]:
    chars: list[str] = []
    i = start + 1
    while i < len(sql):
        if sql[i] == "`":
            if sql.startswith("``", i):
                chars.append("`")
                i += 2
                continue
            return "".join(chars), i + 1
        chars.append(sql[i])
        i += 1
    raise SqlSyntaxError(f"unterminated `quoted name` starting at {_where(sql, start)}")


def _where(sql: str, offset: int) -> str:
    line = sql.count("\n", 0, offset) + 1
    column = offset - (sql.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


def single_query(text: str, *, where: str) -> str:
    """The one query of ``text`` (a trailing semicolon is fine); ``where`` names the source."""
    parts = statements(text)
    if not parts:
        raise ValidationError("no query given", path=where)
    if len(parts) > 1:
        raise ValidationError(
            f"one query expected, found {len(parts)} statements (use WITH ... AS (...) for "
            "intermediate steps)",
            path=where,
        )
    return parts[0]
