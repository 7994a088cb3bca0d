"""Looking into a dataset: ``odf log``, ``odf tail``, ``odf inspect schema``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from coordinator.app import listing
from coordinator.cli.arguments import (
    add_name_argument,
    command_group,
    non_negative_int,
    positive_int,
)
from coordinator.cli.connect import add_daemon_argument, use_cases, workspace_or_daemon
from coordinator.cli.output import (
    OutputFormat,
    add_output_format_argument,
    render_document,
    render_rows,
)
from coordinator.cli.terminal_text import visible
from coordinator.dataset.describe import describe_event
from coordinator.query.display import table_rows

E = TypeVar("E")

if TYPE_CHECKING:
    from common.odf.fragments import ExecuteTransformInput
    from coordinator.app import Application
    from coordinator.transform.lineage import Lineage, Node

LOG_COLUMNS = ("seq", "hash", "system_time", "event", "details")
SCHEMA_COLUMNS = ("name", "type", "nullable")
LINEAGE_FORMATS = ("tree", "dot", "mermaid", "json")
QUERY_COLUMNS = ("seq", "hash", "system_time", "engine", "version", "inputs", "queries")
TRANSACTION_COLUMNS = (
    "seq",
    "hash",
    "system_time",
    "inputs",
    "offsets",
    "records",
    "watermark",
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("log", help="show the metadata blocks of a dataset, newest first")
    add_name_argument(p, "dataset name or id")
    p.add_argument("-n", "--limit", type=positive_int, help="show at most this many blocks")
    add_output_format_argument(
        p, (OutputFormat.TABLE, OutputFormat.JSON, OutputFormat.YAML, OutputFormat.CSV)
    )
    add_daemon_argument(p)
    p.set_defaults(handler=cmd_log)

    p = subparsers.add_parser("tail", help="show the latest records of a dataset")
    add_name_argument(p, "dataset name or id")
    p.add_argument("-n", "--num-records", type=positive_int, default=10, help="default: 10")
    p.add_argument("-s", "--skip", type=non_negative_int, default=0, help="skip the latest S")
    add_output_format_argument(p)
    add_daemon_argument(p)
    p.set_defaults(handler=cmd_tail)

    inspect = command_group(subparsers, "inspect", "inspect a dataset", dest="what", metavar="WHAT")
    p = inspect.add_parser(
        "info",
        help="what a dataset is: id, kind, description, keywords, license, attachments"
        " (Markdown rendered on a terminal)",
    )
    add_name_argument(p, "dataset name or id")
    add_output_format_argument(p, (OutputFormat.TABLE, OutputFormat.JSON))
    add_daemon_argument(p)
    p.set_defaults(handler=cmd_inspect_info)

    p = inspect.add_parser("schema", help="the data schema from SetDataSchema")
    add_name_argument(p, "dataset name or id")
    add_output_format_argument(p)
    add_daemon_argument(p)
    p.set_defaults(handler=cmd_inspect_schema)

    p = inspect.add_parser(
        "lineage", help="the dataset graph: inputs and dependents (all, or around NAME)"
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="only what lies up- and downstream")
    p.add_argument(
        "-o", "--output-format", choices=LINEAGE_FORMATS, default="tree", help="default: tree"
    )
    p.set_defaults(handler=cmd_inspect_lineage)

    p = inspect.add_parser("query", help="every query the dataset has had, oldest first")
    add_name_argument(p, "dataset name or id")
    add_output_format_argument(p)
    p.set_defaults(handler=cmd_inspect_query)

    p = inspect.add_parser(
        "transactions", help="each transaction (ExecuteTransform): inputs, offsets, records"
    )
    add_name_argument(p, "dataset name or id")
    add_output_format_argument(p)
    p.set_defaults(handler=cmd_inspect_transactions)


# --- log ---------------------------------------------------------------------------------------


def cmd_log(args: argparse.Namespace) -> int:
    ws, daemon = workspace_or_daemon(args)
    blocks = daemon.log(args.name, args.limit) if daemon else listing.log(ws, args.name, args.limit)
    fmt = OutputFormat(args.output_format)
    if fmt is OutputFormat.YAML:
        from common.serde.yaml_codec import dump_block_manifest

        for h, block in blocks:
            sys.stdout.write(f"--- # {h}\n{dump_block_manifest(block)}")
    elif fmt is OutputFormat.JSON:
        from common.serde.yaml_codec import to_plain

        render_document([{"hash": str(h), "block": to_plain(b)} for h, b in blocks], fmt)
    else:
        rows = [
            {
                "seq": b.sequence_number,
                "hash": h,
                "system_time": b.system_time,
                "event": type(b.event).__name__,
                "details": describe_event(b.event),
            }
            for h, b in blocks
        ]
        render_rows(rows, LOG_COLUMNS, fmt, wide=args.wide, optional=("system_time",))
    return 0


# --- inspect info ------------------------------------------------------------------------------


def cmd_inspect_info(args: argparse.Namespace) -> int:
    ws, daemon = workspace_or_daemon(args)
    blocks = daemon.log(args.name, None) if daemon else listing.log(ws, args.name, None)
    info = dataset_info(args.name, blocks)
    if args.output_format == OutputFormat.JSON.value:
        render_document(info, OutputFormat.JSON)
        return 0
    sys.stdout.write(info_text(info, markdown=sys.stdout.isatty()))
    return 0


def dataset_info(name: str, blocks: Sequence[tuple[Any, Any]]) -> dict[str, Any]:
    """The latest SetInfo, SetLicense and SetAttachments of a chain (blocks newest first)."""
    from common.odf.events import Seed, SetAttachments, SetInfo, SetLicense

    info: dict[str, Any] = {"name": name, "id": None, "kind": None}
    latest: dict[type, Any] = {}
    for _, block in blocks:
        latest.setdefault(type(block.event), block.event)
    seed = latest.get(Seed)
    if seed is not None:
        info["id"] = seed.dataset_id.to_did()
        info["kind"] = seed.dataset_kind.value
    described = latest.get(SetInfo)
    info["description"] = described.description if described else None
    info["keywords"] = list(described.keywords or ()) if described else []
    license_ = latest.get(SetLicense)
    info["license"] = (
        {
            "shortName": license_.short_name,
            "name": license_.name,
            "spdxId": license_.spdx_id,
            "websiteUrl": license_.website_url,
        }
        if license_
        else None
    )
    attached = latest.get(SetAttachments)
    info["attachments"] = (
        [{"path": a.path, "content": a.content} for a in attached.attachments.items]
        if attached
        else []
    )
    return info


def info_text(info: dict[str, Any], *, markdown: bool) -> str:
    """``odf inspect info`` for people; attachments as Markdown rendered for a terminal."""
    lines = [f"{key}: {visible(str(info[key]) if info[key] else '-')}" for key in _INFO_KEYS]
    lines.append(f"keywords: {visible(', '.join(info['keywords'])) or '-'}")
    lic = info["license"]
    if lic:
        spdx = f", SPDX {lic['spdxId']}" if lic["spdxId"] else ""
        lines.append(
            f"license: {visible(lic['shortName'])} ({visible(lic['name'])}{visible(spdx)},"
            f" {visible(lic['websiteUrl'])})"
        )
    else:
        lines.append("license: -")
    attachments = info["attachments"]
    lines.append(f"attachments: {len(attachments) or '-'}")
    text = "".join(f"{line}\n" for line in lines)
    for a in attachments:
        text += f"\n--- {visible(a['path'])} ({len(a['content'].encode()):,} bytes)\n"
        text += _markdown(a["content"]) if markdown else visible(a["content"], lines=True) + "\n"
    return text


_INFO_KEYS = ("name", "id", "kind", "description")


def _markdown(text: str) -> str:
    """Markdown rendered for this terminal (control characters of the source escaped)."""
    from rich.console import Console
    from rich.markdown import Markdown

    console = Console(force_terminal=True)
    with console.capture() as captured:
        console.print(Markdown(visible(text, lines=True)))
    return captured.get()


# --- tail --------------------------------------------------------------------------------------


def cmd_tail(args: argparse.Namespace) -> int:
    table = use_cases(args).tail(args.name, args.num_records, skip=args.skip)
    columns = table.column_names
    optional = [c for c in ("op", "system_time") if c in columns]  # by name: the vocabulary's
    render_rows(table_rows(table), columns, args.output_format, wide=args.wide, optional=optional)
    return 0


# --- inspect schema ----------------------------------------------------------------------------


def cmd_inspect_schema(args: argparse.Namespace) -> int:
    schema = use_cases(args).schema(args.name)
    rows = [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]
    render_rows(rows, SCHEMA_COLUMNS, args.output_format, wide=args.wide)
    return 0


# --- inspect lineage ---------------------------------------------------------------------------


def cmd_inspect_lineage(args: argparse.Namespace) -> int:
    lineage = _application().lineage(args.name)
    match args.output_format:
        case "json":
            render_document(
                {
                    "nodes": [_node_document(n) for n in lineage.nodes],
                    "edges": [{"input": e.source, "dataset": e.target} for e in lineage.edges],
                },
                OutputFormat.JSON,
            )
        case "dot":
            sys.stdout.write(lineage_dot(lineage))
        case "mermaid":
            sys.stdout.write(lineage_mermaid(lineage))
        case _:
            sys.stdout.write(lineage_tree(lineage, args.name))
    return 0


def lineage_tree(lineage: Lineage, focus: str | None) -> str:
    """Datasets with what they feed indented below them; around a dataset, its inputs too."""
    lines: list[str] = []

    def walk(
        name: str, step: Any, prefix: str, last: bool, top: bool, seen: frozenset[str]
    ) -> None:
        label = visible(_node_label(lineage, name))
        lines.append(label if top else f"{prefix}{'└── ' if last else '├── '}{label}")
        below = sorted(step(name))
        inner = prefix if top else prefix + ("    " if last else "│   ")
        for i, child in enumerate(below):
            if child in seen:
                continue
            walk(child, step, inner, i == len(below) - 1, False, seen | {child})

    if focus is None:
        for root in lineage.roots():
            walk(root, lineage.downstream, "", True, True, frozenset({root}))
        return "".join(f"{line}\n" for line in lines)
    name = next((n.name for n in lineage.nodes if n.name.lower() == focus.lower()), focus)
    lines.append("upstream (inputs):")
    walk(name, lineage.upstream, "", True, True, frozenset({name}))
    lines.append("downstream (dependents):")
    walk(name, lineage.downstream, "", True, True, frozenset({name}))
    return "".join(f"{line}\n" for line in lines)


def _node_label(lineage: Lineage, name: str) -> str:
    node = lineage.node(name)
    if node is None or node.kind == "external":
        return f"{name} (not in this workspace)"
    clone = f", clone of {node.clone_of}" if node.clone_of else ""
    return f"{name} ({node.kind}{clone})"


def _node_document(n: Node) -> dict[str, Any]:
    document: dict[str, Any] = {"name": n.name, "kind": n.kind}
    if n.clone_of is not None:
        document["cloneOf"] = n.clone_of
    if n.dataset_id is not None:
        document["id"] = n.dataset_id
    return document


def lineage_dot(lineage: Lineage) -> str:
    shapes = {"Root": "box", "Derivative": "ellipse"}
    lines = ["digraph lineage {", "  rankdir=LR;"]
    lines += [f'  "{n.name}" [shape={shapes.get(n.kind, "diamond")}];' for n in lineage.nodes]
    lines += [f'  "{e.source}" -> "{e.target}";' for e in lineage.edges]
    return "\n".join([*lines, "}"]) + "\n"


def lineage_mermaid(lineage: Lineage) -> str:
    ids = {n.name: f"n{i}" for i, n in enumerate(lineage.nodes)}
    lines = ["graph LR"]
    for n in lineage.nodes:
        lines.append(
            f'  {ids[n.name]}["{n.name}"]' if n.kind != "Root" else f'  {ids[n.name]}[("{n.name}")]'
        )
    for e in lineage.edges:
        if e.source in ids and e.target in ids:
            lines.append(f"  {ids[e.source]} --> {ids[e.target]}")
    return "\n".join(lines) + "\n"


# --- inspect query and transactions ------------------------------------------------------------


def cmd_inspect_query(args: argparse.Namespace) -> int:
    from common.odf.events import SetTransform

    def columns(event: SetTransform) -> dict[str, Any]:
        t = event.transform
        return {
            "engine": t.engine,
            "version": t.version,
            "inputs": ", ".join(i.alias or i.dataset_ref for i in event.inputs),
            "queries": "; ".join(
                f"{q.alias}: {q.query}" if q.alias else q.query for q in t.steps()
            ),
        }

    rows = _event_rows(_application(), args.name, SetTransform, columns)
    render_rows(rows, QUERY_COLUMNS, args.output_format, wide=args.wide, optional=("version",))
    return 0


def cmd_inspect_transactions(args: argparse.Namespace) -> int:
    from common.odf.events import ExecuteTransform

    app = _application()
    names = {i.id.to_did(): i.alias for i in app.ws.list_datasets()}

    def columns(event: ExecuteTransform) -> dict[str, Any]:
        data = event.new_data
        interval = data.offset_interval if data else None
        return {
            "inputs": "; ".join(_input_range(i, names) for i in event.query_inputs),
            "offsets": f"{interval.start}..{interval.end}" if interval else None,
            "records": interval.end - interval.start + 1 if interval else 0,
            "watermark": event.new_watermark,
        }

    rows = _event_rows(app, args.name, ExecuteTransform, columns)
    render_rows(rows, TRANSACTION_COLUMNS, args.output_format, wide=args.wide)
    return 0


def _event_rows(
    app: Application, name: str, kind: type[E], columns: Callable[[E], dict[str, Any]]
) -> list[dict[str, Any]]:
    """A row per block of ``name`` recording a ``kind`` event, oldest first: the block's
    sequence number, hash and system time, then ``columns`` of its event."""
    rows = []
    for h, b in app.blocks_of(name, kind):
        event = b.event
        assert isinstance(event, kind)
        rows.append(
            {"seq": b.sequence_number, "hash": h, "system_time": b.system_time, **columns(event)}
        )
    return rows


def _input_range(i: ExecuteTransformInput, names: dict[str, str]) -> str:
    name = names.get(i.dataset_id.to_did(), i.dataset_id.to_did())
    if i.new_offset is None:
        return f"{name}: no new records"
    start = 0 if i.prev_offset is None else i.prev_offset + 1
    return f"{name}: {start}..{i.new_offset}"


def _application() -> Application:
    from coordinator.app.application import Application  # not for log, tail and schema

    return Application.open()
