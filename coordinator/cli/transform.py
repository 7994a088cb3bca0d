"""``odf set-transform NAME --query SQL | --file FILE``: change a derivative dataset's query.

The new query is validated by the engine (ValidateQuery) and against the schema evolution
rules, then recorded as a new ``SetTransform``; a dataset that has already run transactions
goes through the engine's MigrateQuery at the switch (``coordinator.evolution``). ``--file``
reads SQL text, or a ``Transform`` in YAML (``kind: Sql``, ``engine``, ``queries``, ...)
when the file ends in ``.yaml``/``.yml``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from common.humanize import human_time
from common.odf.errors import ValidationError
from common.odf.fragments import TransformSql
from common.serde.yaml_codec import load_object
from coordinator.app import TransformOptions
from coordinator.cli.arguments import add_name_argument
from coordinator.cli.connect import add_daemon_argument, use_cases
from coordinator.cli.terminal_text import visible
from coordinator.evolution.query_change import QueryChange

YAML_SUFFIXES = (".yaml", ".yml")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "set-transform", help="change a derivative dataset's query (validated, then migrated)"
    )
    add_name_argument(p, "the derivative dataset")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--query", metavar="SQL", help="the new query")
    source.add_argument(
        "--file",
        type=Path,
        metavar="FILE",
        help="a file with the new query (SQL), or a Transform in YAML (.yaml/.yml)",
    )
    p.add_argument(
        "--input",
        action="append",
        dest="inputs",
        metavar="[ALIAS=]NAME",
        help="an input of the new query (repeat for several; default: the current inputs)",
    )
    p.add_argument("--engine", help="the engine of the new query (default: the current one)")
    p.add_argument(
        "--version",
        help="pin the new query to this engine version (default: the configured engine's)",
    )
    add_daemon_argument(p, writes=True)
    p.set_defaults(handler=cmd_set_transform)


def cmd_set_transform(args: argparse.Namespace) -> int:
    change = use_cases(args).set_transform(
        args.name,
        read_transform(args),
        TransformOptions(engine=args.engine, version=args.version, inputs=args.inputs),
    )
    for line in describe(change):
        print(visible(line, lines=True))
    return 0


def read_transform(args: argparse.Namespace) -> str | TransformSql:
    """The new query from ``--query`` or ``--file``: SQL text, or a whole ``Transform``."""
    if args.query is not None:
        return _sql(args.query, "--query")
    path: Path = args.file
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationError("no such file", path=str(path)) from None
    if path.suffix in YAML_SUFFIXES:
        transform = load_object(TransformSql, text, source=str(path))
        assert isinstance(transform, TransformSql)
        return transform
    return _sql(text, str(path))


def _sql(text: str, where: str) -> str:
    query = text.strip()
    if not query:
        raise ValidationError("the query is empty", path=where)
    return query


def describe(change: QueryChange) -> list[str]:
    lines = [f"{change.dataset}: new query recorded in block {change.set_transform}"]
    if change.added_columns:
        lines.append(
            f"{change.dataset}: adds column(s) {', '.join(change.added_columns)}"
            " (written with the next data)"
        )
    if not change.migrated:
        lines.append(f"{change.dataset}: no transaction ran yet, nothing to migrate")
    elif change.migration is None:
        lines.append(f"{change.dataset}: migrated; the engine's state carries over unchanged")
    else:
        mark = change.migration.new_watermark
        lines.append(
            f"{change.dataset}: migrated; the engine's new state is recorded in block"
            f" {change.head} (watermark {human_time(mark) if mark else 'none'})"
        )
    return lines
