"""``odf sql``: ad-hoc SQL over the datasets of the workspace, run by its engine.

Every dataset is a table under its name; names with dots are quoted with backticks in Spark
SQL: ``odf sql -c 'SELECT carrier, COUNT(*) FROM `nyc.flights` GROUP BY carrier'``.
``--input f=nyc.flights`` adds a view ``f`` of a dataset. At most ``--limit`` rows are printed
(default 1000; 0 prints all); how many were left out goes to stderr. With neither
``--command`` nor ``--script``: an interactive shell on a terminal, the ``;``-separated
statements of a pipe otherwise (``coordinator.cli.sql_shell``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from common.odf.errors import ValidationError
from coordinator.app import QueryOptions
from coordinator.cli import end_quickly
from coordinator.cli.arguments import non_negative_int
from coordinator.cli.connect import add_daemon_argument, query_runner, show_engine_starts
from coordinator.cli.output import OutputFormat, add_output_format_argument, render_cells
from coordinator.cli.progress import terminal_progress
from coordinator.daemon.query_http import MAX_SHOWN_ROWS, HttpQueries
from coordinator.query import QueryResult, single_query
from coordinator.query.display import Cells, ShownResult, shown_result

if TYPE_CHECKING:
    from coordinator.app.use_cases import Queries

DEFAULT_LIMIT = 1000
T = TypeVar("T")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sql",
        help="run a SQL query over the workspace's datasets",
        description="Run Spark SQL over the datasets of the workspace. Each dataset is a table"
        " under its name; quote names with dots in backticks (`nyc.flights`). Without -c or -f:"
        " an interactive shell on a terminal (statements end with ';', \\d lists datasets),"
        " else the ';'-separated statements read from standard input.",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("-c", "--command", metavar="SQL", help="the query")
    source.add_argument(
        "-f", "--script", metavar="FILE", help="a file holding the query ('-': standard input)"
    )
    p.add_argument(
        "-i",
        "--input",
        action="append",
        default=[],
        metavar="ALIAS=NAME",
        help="also make dataset NAME a table named ALIAS (repeatable)",
    )
    p.add_argument(
        "--as-of",
        action="append",
        default=[],
        metavar="NAME=BLOCK|TIME",
        help="read dataset NAME as of a block (hash or unique prefix) or an RFC 3339 time:"
        " the data files its chain held then (repeatable)",
    )
    p.add_argument(
        "-n",
        "--limit",
        type=non_negative_int,
        default=DEFAULT_LIMIT,
        help=f"print at most this many rows (default: {DEFAULT_LIMIT}; 0: all)",
    )
    add_output_format_argument(p)
    add_daemon_argument(p)
    p.set_defaults(handler=cmd_sql)


def cmd_sql(args: argparse.Namespace) -> int:
    if args.command is None and args.script is None:
        from coordinator.cli.sql_shell import run_shell

        return run_shell(args, lambda app, query: run_query(app, query, args))
    if args.command is not None:
        query = single_query(args.command, where="--command")
    else:
        query = single_query(_read_script(args.script), where=args.script)
    runner = query_runner(args)
    if isinstance(runner, HttpQueries) and 0 < args.limit <= MAX_SHOWN_ROWS:
        # The daemon sends the rows as they are shown: no pyarrow here, nothing to tear down.
        cells = cells_for(args.output_format)
        shown = _with_progress(args, runner, lambda: runner.shown(query, options(args), cells))
        print_shown(shown, args.output_format, wide=args.wide)
        end_quickly()
        return 0
    result = run_query(runner, query, args)
    print_result(result, args.output_format, wide=args.wide)
    return 0


def run_query(app: Queries, query: str, args: argparse.Namespace) -> QueryResult:
    """Run one query as ``args`` ask (views, as-of, limit), its engine's start shown."""
    return _with_progress(args, app, lambda: app.query(query, options(args)))


def options(args: argparse.Namespace) -> QueryOptions:
    """The query options ``args`` ask for (views, as-of, limit)."""
    return QueryOptions(
        aliases=parse_aliases(args.input),
        limit=args.limit or None,
        as_of=parse_as_of(args.as_of),
    )


def _with_progress(args: argparse.Namespace, app: Queries, call: Callable[[], T]) -> T:
    """``call()``, shown as a running query (and an engine this process starts) on stderr."""
    with terminal_progress(args) as progress:
        show_engine_starts(app, progress)
        task = progress.task("query", unit="rows")
        done = call()
        task.close()
    return done


def parse_as_of(specs: Sequence[str]) -> dict[str, str]:
    """``["x=f1620ab..."]`` -> ``{"x": "f1620ab..."}``; each dataset once."""
    return _parse_pairs(specs, "--as-of", "NAME=BLOCK or NAME=TIME", "dataset")


def parse_aliases(specs: Sequence[str]) -> dict[str, str]:
    """``["f=nyc.flights"]`` -> ``{"f": "nyc.flights"}``; each alias once."""
    return _parse_pairs(specs, "--input", "ALIAS=NAME", "alias")


def _parse_pairs(specs: Sequence[str], option: str, expected: str, what: str) -> dict[str, str]:
    """``KEY=VALUE`` specs given to ``option``, each key once (ignoring case); ``expected``
    names the form in errors, ``what`` the key."""
    found: dict[str, str] = {}
    for spec in specs:
        key, sep, value = (part.strip() for part in spec.partition("="))
        if not sep or not key or not value:
            raise ValidationError(f"expected {expected}, got {spec!r}", path=option)
        if key.lower() in (k.lower() for k in found):
            raise ValidationError(f"{what} {key!r} is given twice", path=option)
        found[key] = value
    return found


def print_result(result: QueryResult, fmt: str, *, wide: bool = False) -> None:
    print_shown(shown_result(result, cells_for(fmt)), fmt, wide=wide)


def cells_for(fmt: str) -> Cells:
    """The cells format ``fmt`` prints: text for a table, plain values for the others."""
    return Cells.TEXT if OutputFormat(fmt) is OutputFormat.TABLE else Cells.VALUES


def print_shown(shown: ShownResult, fmt: str, *, wide: bool = False) -> None:
    render_cells(shown.rows, shown.columns, fmt, wide=wide)
    if shown.cut:
        print(
            f"({len(shown.rows)} of {shown.num_records} rows shown, {shown.cut} left out;"
            " --limit N or --limit 0 for more)",
            file=sys.stderr,
        )


def _read_script(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    return Path(path).read_text(encoding="utf-8")
