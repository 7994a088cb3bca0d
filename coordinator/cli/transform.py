"""``odf set-transform NAME --query SQL | --file FILE``: change a derivative dataset's query.

The new query is validated by the engine (ValidateQuery) and against the schema evolution
rules, then recorded as a new ``SetTransform``; a dataset that has already run transactions
goes through the engine's MigrateQuery at the switch (``coordinator.evolution``). ``--file``
reads SQL text, or a ``Transform`` in YAML (``kind: Sql``, ``engine``, ``queries``, ...)
when the file ends in ``.yaml``/``.yml``.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from common.odf.errors import ValidationError
from common.odf.fragments import TransformInput, TransformSql
from common.serde.yaml_codec import load_object
from coordinator.config import load_config
from coordinator.engine import workspace_engines
from coordinator.evolution.query_change import QueryChange, change_query
from coordinator.transform.runner import engine_mounts, workspace_resolver
from coordinator.workspace import Workspace

YAML_SUFFIXES = (".yaml", ".yml")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "set-transform", help="change a derivative dataset's query (validated, then migrated)"
    )
    p.add_argument("name", metavar="NAME", help="the derivative dataset")
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
    p.set_defaults(handler=cmd_set_transform)


def cmd_set_transform(args: argparse.Namespace) -> int:
    ws = Workspace.find()
    dataset = ws.open_dataset(args.name)
    current = dataset.state().transform
    engine = args.engine or (current.transform.engine if current else "spark")
    transform = read_transform(args, engine)
    if args.version is not None:
        transform = replace(transform, version=args.version)
    config = load_config(ws.odf_dir)
    resolve = workspace_resolver(ws)
    # A container engine migrating the dataset reads its checkpoint and writes to its staging.
    with workspace_engines(ws.odf_dir, engine_mounts([dataset], resolve)) as engines:
        change = change_query(
            dataset,
            transform,
            resolve,
            engines,
            inputs=resolve_inputs(ws, args.inputs) if args.inputs else None,
            exchange=config.transform.exchange,
        )
    for line in describe(change):
        print(line)
    return 0


def resolve_inputs(ws: Workspace, specs: list[str]) -> tuple[TransformInput, ...]:
    """``[ALIAS=]NAME`` options as resolved transform inputs (the alias defaults to the name)."""
    inputs = []
    for spec in specs:
        alias, _, name = spec.rpartition("=")
        ds = ws.open_dataset(name)
        inputs.append(TransformInput(dataset_ref=ds.id.to_did(), alias=alias or ds.alias))
    aliases = [i.alias for i in inputs]
    if len(set(aliases)) != len(aliases):
        raise ValidationError("two inputs have the same alias", path="--input")
    return tuple(inputs)


def read_transform(args: argparse.Namespace, engine: str) -> TransformSql:
    """The new transform from ``--query`` or ``--file``."""
    if args.query is not None:
        return _sql(args.query, "--query", engine)
    path: Path = args.file
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationError("no such file", path=str(path)) from None
    if path.suffix in YAML_SUFFIXES:
        transform = load_object(TransformSql, text, source=str(path))
        assert isinstance(transform, TransformSql)
        return transform if args.engine is None else replace(transform, engine=args.engine)
    return _sql(text, str(path), engine)


def _sql(text: str, where: str, engine: str) -> TransformSql:
    query = text.strip()
    if not query:
        raise ValidationError("the query is empty", path=where)
    return TransformSql(engine=engine, query=query)


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
            f" {change.head} (watermark {mark.isoformat() if mark else 'none'})"
        )
    return lines
