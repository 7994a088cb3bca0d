"""Workspace commands: ``odf init``, ``odf add``, ``odf list``, ``odf delete``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from common.odf.errors import OdfError, ValidationError
from common.odf.events import SetTransform
from common.odf.snapshot import DatasetSnapshot
from common.serde.yaml_codec import load_snapshots
from coordinator.dataset import Dataset
from coordinator.engine import workspace_engines
from coordinator.output import OutputFormat, add_output_format_argument, render_rows
from coordinator.transform.creation import TransformCreation
from coordinator.workspace import Workspace

SNAPSHOT_SUFFIXES = (".yaml", ".yml")
LIST_COLUMNS = ("name", "kind", "head", "blocks", "records", "size", "updated", "watermark")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("init", help="create an odf workspace in the current directory")
    p.add_argument("--exists-ok", action="store_true", help="succeed if it already exists")
    p.set_defaults(handler=cmd_init)

    p = subparsers.add_parser("add", help="create datasets from DatasetSnapshot YAML files")
    p.add_argument("paths", nargs="+", type=Path, metavar="FILE", help="snapshot files")
    p.add_argument(
        "-r",
        "--recursive",
        action="store_true",
        help="also take every *.yaml file under the given directories",
    )
    p.set_defaults(handler=cmd_add)

    p = subparsers.add_parser(
        "list",
        aliases=["ls"],
        help="list the datasets (broken ones with an error; exit code 1 if any)",
    )
    add_output_format_argument(p)
    p.set_defaults(handler=cmd_list)

    p = subparsers.add_parser("delete", aliases=["rm"], help="delete datasets")
    p.add_argument("names", nargs="+", metavar="NAME", help="dataset names or ids")
    p.set_defaults(handler=cmd_delete)


def cmd_init(args: argparse.Namespace) -> int:
    ws = Workspace.init(Path.cwd(), exist_ok=args.exists_ok)
    print(f"initialized an odf workspace in {ws.odf_dir}")
    return 0


# --- add ---------------------------------------------------------------------------------------


def cmd_add(args: argparse.Namespace) -> int:
    ws = Workspace.find()
    sources = read_snapshots(snapshot_files(args.paths, recursive=args.recursive))
    origin = {id(s): f for f, s in sources}
    with workspace_engines(ws.odf_dir) as engines:
        creation = TransformCreation(ws, engines)  # pins and validates derivative transforms
        for snapshot in creation_order([s for _, s in sources]):
            try:
                ds = ws.create_dataset(creation.prepare(snapshot))
            except ValidationError as e:
                raise ValidationError(e.reason, path=f"{origin[id(snapshot)]}: {e.path}") from None
            print(f"added {ds.alias} ({ds.id})")
    return 0


def snapshot_files(paths: list[Path], *, recursive: bool) -> list[Path]:
    """The snapshot files named by ``paths``; directories only with ``recursive``."""
    files = []
    for path in paths:
        if path.is_dir():
            if not recursive:
                raise ValidationError("is a directory (use --recursive)", path=str(path))
            files += sorted(
                p for p in path.rglob("*") if p.is_file() and p.suffix in SNAPSHOT_SUFFIXES
            )
        elif path.is_file():
            files.append(path)
        else:
            raise ValidationError("no such file", path=str(path))
    return files


def read_snapshots(files: list[Path]) -> list[tuple[Path, DatasetSnapshot]]:
    """Parse every file first, so that one bad file adds nothing."""
    return [(f, s) for f in files for s in _file_snapshots(f)]


def _file_snapshots(path: Path) -> list[DatasetSnapshot]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        reason = f"not UTF-8 text ({e.reason} at byte {e.start})"
        raise ValidationError(reason, path=str(path)) from None
    snapshots = load_snapshots(text, source=str(path))
    if not snapshots:
        raise ValidationError("no DatasetSnapshot in the file (it is empty)", path=str(path))
    return snapshots


def creation_order(snapshots: list[DatasetSnapshot]) -> list[DatasetSnapshot]:
    """Snapshots ordered so that inputs defined in the same batch are created first."""
    by_name: dict[str, DatasetSnapshot] = {}
    for s in snapshots:
        key = s.name.lower()
        if key in by_name:
            raise ValidationError(f"dataset {s.name!r} is defined twice", path="name")
        by_name[key] = s
    ordered: list[DatasetSnapshot] = []
    state: dict[str, str] = {}

    def visit(s: DatasetSnapshot, trail: tuple[str, ...]) -> None:
        key = s.name.lower()
        if state.get(key) == "done":
            return
        if key in trail:
            raise ValidationError(f"inputs form a cycle: {' -> '.join((*trail, key))}")
        for ref in _input_refs(s):
            dep = by_name.get(ref.lower())
            if dep is not None:
                visit(dep, (*trail, key))
        state[key] = "done"
        ordered.append(s)

    for s in snapshots:
        visit(s, ())
    return ordered


def _input_refs(snapshot: DatasetSnapshot) -> list[str]:
    return [
        i.dataset_ref for e in snapshot.metadata if isinstance(e, SetTransform) for i in e.inputs
    ]


# --- list and delete ---------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    """Every dataset; a broken one (unreadable head or blocks) is listed with a one-line
    ``error`` and the others as usual, and the exit code is then 1 (after the listing)."""
    ws = Workspace.find()
    rows = [_list_row(ds) for ds in ws.list_datasets()]
    broken = [r["name"] for r in rows if r["error"] is not None]
    table = OutputFormat(args.output_format) is OutputFormat.TABLE
    columns = (*LIST_COLUMNS, "error") if broken or not table else LIST_COLUMNS
    render_rows(rows, columns, args.output_format)
    if broken:
        print(f"error: {len(broken)} broken dataset(s): {', '.join(broken)}", file=sys.stderr)
        return 1
    return 0


def _list_row(ds: Dataset) -> dict[str, Any]:
    try:
        return {**summary_row(ds), "error": None}
    except (OdfError, OSError) as e:
        reason = " ".join(str(e).split()).replace(f"{ds.layout.root}/", "")
        return {"name": ds.alias, "error": reason}


def summary_row(ds: Dataset) -> dict[str, Any]:
    state = ds.state()
    return {
        "name": ds.alias,
        "kind": state.kind.value if state.kind else None,
        "head": state.head,
        "blocks": state.sequence_number + 1,
        "records": state.num_records,
        "size": state.data_size,
        "updated": state.system_time,
        "watermark": state.last_watermark,
    }


def cmd_delete(args: argparse.Namespace) -> int:
    ws = Workspace.find()
    datasets = [ws.open_dataset(name) for name in args.names]  # all must exist
    for ds in datasets:
        ws.delete_dataset(ds.alias)
        print(f"deleted {ds.alias}")
    return 0
