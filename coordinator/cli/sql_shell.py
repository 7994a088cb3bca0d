"""``odf sql`` without ``--command``: statements typed at a prompt, or read from a pipe.

On a terminal, an interactive shell (prompt_toolkit): a statement may span lines and ends with
``;``; TAB completes dataset and column names and SQL keywords; the history is kept across
sessions in the workspace (``.odf/sql_history``). ``\\d`` lists the datasets, ``\\d NAME``
shows a dataset's columns, ``\\q`` (or Ctrl-D) leaves. Each result is followed by its row count
and time; a result wider or longer than the terminal goes through the pager (``$PAGER``,
default ``less -SRFX``). Ctrl-C while a query runs cancels it and keeps the shell; at the
prompt it clears the line. Queries run through the daemon's warm engines when a daemon serves
the workspace, otherwise on an engine the shell keeps warm until it exits.

From a pipe, the ``;``-separated statements of standard input run in order, each result
printed in the chosen output format; the first failing statement stops the run (exit 1).
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from common.odf.errors import OdfError
from coordinator.cli.connect import application, workspace_or_daemon
from coordinator.cli.terminal_text import visible
from coordinator.query import QueryResult, statements

if TYPE_CHECKING:
    import pyarrow as pa

    from coordinator.app import UseCases

HISTORY_FILE = "sql_history"
SHELL_ENGINE_IDLE_S = 600.0
"""How long the shell keeps an idle in-process engine running for the next statement."""
DEFAULT_PAGER = "less -SRFX"
Query = Callable[["UseCases", str], QueryResult]
"""Runs one statement as the command line asks (views, as-of, limit)."""
_KEYWORD_TEXT = (
    "SELECT FROM WHERE GROUP BY ORDER HAVING LIMIT OFFSET JOIN LEFT RIGHT FULL OUTER INNER "
    "CROSS ON USING AS AND OR NOT IN IS NULL LIKE BETWEEN CASE WHEN THEN ELSE END DISTINCT "
    "UNION ALL INTERSECT EXCEPT WITH ASC DESC COUNT SUM AVG MIN MAX CAST OVER PARTITION "
    "WINDOW TRUE FALSE EXISTS INTERVAL DATE TIMESTAMP"
)
KEYWORDS = tuple(_KEYWORD_TEXT.split())


def run_shell(args: argparse.Namespace, query: Query) -> int:
    """The interactive shell or the piped statements (see the module doc); ``query`` runs
    one statement."""
    ws, client = workspace_or_daemon(args)
    app: UseCases = client if client is not None else application(args, ws)
    piped = None if sys.stdin.isatty() else statements(sys.stdin.read())
    warm = getattr(app, "keep_engines_warm", None)
    many = piped is None or len(piped) > 1
    pool = warm(idle_timeout=SHELL_ENGINE_IDLE_S) if warm is not None and many else None
    try:
        if piped is None:
            _Shell(app, ws.odf_dir / HISTORY_FILE, args, query).loop()
            return 0
        from coordinator.cli.sql import print_result

        for i, statement in enumerate(piped):
            if i and args.output_format == "table":
                print()
            print_result(query(app, statement), args.output_format, wide=args.wide)
    finally:
        if pool is not None:
            pool.close()
    return 0


class _Shell:
    def __init__(
        self, app: UseCases, history: os.PathLike[str], args: argparse.Namespace, query: Query
    ) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.key_binding import KeyBindings
        from prompt_toolkit.key_binding.key_processor import KeyPressEvent

        self.app, self.args, self.query = app, args, query
        keys = KeyBindings()

        @keys.add("enter")
        def _enter(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if _complete(buffer.text):
                buffer.validate_and_handle()
            else:
                buffer.insert_text("\n")

        self.session: PromptSession[str] = PromptSession(
            history=FileHistory(os.fspath(history)),
            completer=_Names(app),
            complete_while_typing=False,
            multiline=True,
            key_bindings=keys,
            prompt_continuation=lambda width, line, wrapped: "...> ".rjust(width),
        )

    def loop(self) -> None:
        print("odf sql: statements end with ';'. \\d lists datasets, \\d NAME a schema, \\q quits.")
        while True:
            try:
                text = self.session.prompt("odf> ")
            except KeyboardInterrupt:
                continue  # the line is cleared
            except EOFError:
                return
            if not self.command(text.strip()):
                return

    def command(self, text: str) -> bool:
        """Run what was entered; ``False`` to leave."""
        if text.startswith("\\"):
            word, _, rest = text.rstrip(";").partition(" ")
            if word in ("\\q", "\\quit"):
                return False
            if word == "\\d":
                self.describe(rest.strip())
            else:
                _error(f"unknown command {word} (\\d, \\d NAME, \\q)")
            return True
        try:
            for statement in statements(text):
                self.statement(statement)
        except OdfError as e:
            _error(str(e))
        return True

    def statement(self, sql: str) -> None:
        started = time.monotonic()
        try:
            result = self.query(self.app, sql)
        except KeyboardInterrupt:
            _error("cancelled")
            return
        took = time.monotonic() - started
        rows = result.table.num_rows
        more = f" of {result.num_records}, --limit N for more" if result.cut else ""
        page(
            render(result, wide=True)
            + f"({rows} row{'s' if rows != 1 else ''}{more}, {took:.2f} s)\n"
        )

    def describe(self, name: str) -> None:
        try:
            if not name:
                summaries = self.app.list_datasets()
                rows = [[d.name, d.kind or "", str(d.records or 0)] for d in summaries]
                page(_table_text(["name", "kind", "records"], rows))
            else:
                schema = self.app.schema(name)
                page(_table_text(["column", "type"], [[f.name, str(f.type)] for f in schema]))
        except OdfError as e:
            _error(str(e))


def _complete(text: str) -> bool:
    """Whether the buffer holds a whole entry: a backslash command, or statements ended by
    ``;`` (an empty line does nothing)."""
    stripped = text.strip()
    return not stripped or stripped.startswith("\\") or stripped.endswith(";")


def render(result: QueryResult, *, wide: bool) -> str:
    """The result's table as the terminal shows it."""
    from coordinator.query.display import unique_names

    names = unique_names(result.table.column_names)
    table = result.table.rename_columns(names)
    return _table_text(names, _cells(table), wide=wide)


def _cells(table: pa.Table) -> list[list[str]]:
    from coordinator.query.display import table_rows

    names = table.column_names
    return [[_text(row.get(n)) for n in names] for row in table_rows(table)]


def _text(value: object) -> str:
    return "" if value is None else visible(str(value), lines=True)


def _table_text(columns: list[str], rows: list[list[str]], *, wide: bool = True) -> str:
    from coordinator.cli.rich_table import print_table

    out = _Terminal()
    print_table([visible(c) for c in columns], rows, out, wide=wide)
    return out.getvalue()


class _Terminal(io.StringIO):
    """Text rendered as for the terminal (colours, rules), to be printed or paged."""

    def isatty(self) -> bool:
        return True


def page(text: str) -> None:
    """``text`` on the terminal, through the pager when wider or longer than it."""
    size = shutil.get_terminal_size()
    lines = text.splitlines()
    from rich.text import Text

    widest = max((Text.from_ansi(line).cell_len for line in lines), default=0)
    if widest <= size.columns and len(lines) < size.lines - 1:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    command = shlex.split(os.environ.get("PAGER") or DEFAULT_PAGER)
    try:
        subprocess.run(command, input=text, text=True, check=False)
    except OSError:  # no pager: printed as it is
        sys.stdout.write(text)
        sys.stdout.flush()


def _error(message: str) -> None:
    print(f"error: {visible(message)}", file=sys.stderr, flush=True)


class _Names(Completer):
    """Completes dataset names (quoted in backticks when they have dots), the columns of the
    datasets, and SQL keywords; the names are read once, when first completed."""

    def __init__(self, app: UseCases) -> None:
        self.app = app
        self.words: list[str] | None = None

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        found = _WORD.search(document.text_before_cursor)
        word = found.group(1) if found else ""
        lowered = word.lower().lstrip("`")
        for candidate in self._words():
            if candidate.lower().lstrip("`").startswith(lowered):
                yield Completion(candidate, start_position=-len(word))

    def _words(self) -> list[str]:
        if self.words is None:
            self.words = sorted(set(self._names()), key=str.lower) + list(KEYWORDS)
        return self.words

    def _names(self) -> Iterable[str]:
        try:
            summaries = self.app.list_datasets()
        except OdfError:
            return
        for summary in summaries:
            name = summary.name
            yield f"`{name}`" if "." in name or "-" in name else name
            try:
                yield from self.app.schema(name).names
            except OdfError:
                continue  # no schema yet


_WORD = re.compile(r"(`[^`]*|[\w.]+)$")
"""The word before the cursor: a name being typed, or a backtick-quoted one."""
