"""Workspace commands: ``odf init``, ``odf add``, ``odf list``, ``odf delete``."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.humanize import plural
from common.odf.errors import ValidationError
from coordinator.app.listing import list_datasets
from coordinator.cli.arguments import add_flag, add_name_argument
from coordinator.cli.connect import (
    add_daemon_argument,
    application,
    show_engine_starts,
    use_cases,
    workspace_or_daemon,
)
from coordinator.cli.output import OutputFormat, add_output_format_argument, render_rows
from coordinator.cli.progress import terminal_progress
from coordinator.ingest import DEFAULT_MAX_RECORDS

if TYPE_CHECKING:
    from coordinator.app import DatasetSummary

# Each command imports the application (the model, the engines' glue) only when it runs:
# ``odf list`` lists from the datasets' state caches without it (CLI start time).

LIST_COLUMNS = ("name", "kind", "head", "blocks", "records", "size", "updated", "watermark")
LIST_OPTIONAL = ("size", "blocks", "updated", "watermark")
"""Left out of a table on a narrow terminal, the last first (``--wide`` keeps them)."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("init", help="create an odf workspace in the current directory")
    p.add_argument("--exists-ok", action="store_true", help="succeed if it already exists")
    p.set_defaults(handler=cmd_init)

    p = subparsers.add_parser("add", help="create datasets from DatasetSnapshot YAML files")
    p.add_argument("paths", nargs="+", type=Path, metavar="FILE", help="snapshot files")
    add_flag(p, "-r", "--recursive", help="also take every *.yaml file under the given directories")
    add_daemon_argument(p)
    p.set_defaults(handler=cmd_add)

    p = subparsers.add_parser(
        "list",
        aliases=["ls"],
        help="list the datasets (broken ones with an error; exit code 1 if any)",
    )
    add_output_format_argument(p)
    add_daemon_argument(p)
    p.set_defaults(handler=cmd_list)

    p = subparsers.add_parser("delete", aliases=["rm"], help="delete datasets")
    p.add_argument("names", nargs="+", metavar="NAME", help="dataset names or ids")
    add_flag(
        p, "-r", "--recursive", help="also delete every dataset downstream (listed, then confirmed)"
    )
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    add_daemon_argument(p, writes=True)
    p.set_defaults(handler=cmd_delete)

    p = subparsers.add_parser("reset", help="move a dataset's head back to an earlier block")
    add_name_argument(p, "the dataset")
    p.add_argument("block", metavar="BLOCK", help="the block hash (or a unique prefix of it)")
    add_flag(
        p,
        "--force",
        help="even when dependents have consumed later blocks (they must then be reset too)",
    )
    add_daemon_argument(p, writes=True)
    p.set_defaults(handler=cmd_reset)

    p = subparsers.add_parser(
        "compact", help="merge a root dataset's small data files (rewrites its chain: --hard)"
    )
    add_name_argument(p, "the root dataset")
    add_flag(p, "--hard", help="required: the chain is rewritten, so block hashes change")
    p.add_argument(
        "--max-records",
        type=int,
        default=DEFAULT_MAX_RECORDS,
        metavar="N",
        help=f"records per merged file at most (default: {DEFAULT_MAX_RECORDS:,})",
    )
    add_daemon_argument(p, writes=True)
    p.set_defaults(handler=cmd_compact)

    p = subparsers.add_parser("rename", aliases=["mv"], help="rename a dataset")
    add_name_argument(p, "the dataset")
    p.add_argument("new_name", metavar="NEW_NAME", help="its new name")
    add_daemon_argument(p, writes=True)
    p.set_defaults(handler=cmd_rename)


def cmd_init(args: argparse.Namespace) -> int:
    from coordinator.app.application import Application

    ws = Application.init(Path.cwd(), exist_ok=args.exists_ok)
    print(f"initialized an odf workspace in {ws.odf_dir}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    app = use_cases(args)
    from coordinator.app.snapshots import read_snapshots, snapshot_files

    sources = read_snapshots(snapshot_files(args.paths, recursive=args.recursive))
    with terminal_progress(args) as progress:
        show_engine_starts(app, progress)
        added = list(app.add(sources))
    for ds in added:
        print(f"added {ds.alias} ({ds.id})")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """Every dataset; a broken one (unreadable head or blocks) is listed with a one-line
    ``error`` and the others as usual, and the exit code is then 1 (after the listing)."""
    ws, daemon = workspace_or_daemon(args)
    summaries = daemon.list_datasets() if daemon is not None else list_datasets(ws)
    rows = [_row(summary) for summary in summaries]
    broken = [r["name"] for r in rows if r["error"] is not None]
    table = OutputFormat(args.output_format) is OutputFormat.TABLE
    columns = (*LIST_COLUMNS, "error") if broken or not table else LIST_COLUMNS
    render_rows(rows, columns, args.output_format, wide=args.wide, optional=LIST_OPTIONAL)
    if broken:
        what = plural(len(broken), "broken dataset")
        print(f"error: {what}: {', '.join(broken)}", file=sys.stderr)
        return 1
    return 0


def _row(summary: DatasetSummary) -> dict[str, Any]:
    return {f.name: getattr(summary, f.name) for f in fields(summary)}  # hashes stay whole


def cmd_delete(args: argparse.Namespace) -> int:
    names = list(args.names)
    if args.recursive:
        names = application(args).with_dependents(names)
        extra = [n for n in names if n.lower() not in {a.lower() for a in args.names}]
        if extra and not args.yes:
            listed = ", ".join(names)
            if not sys.stdin.isatty():
                raise ValidationError(
                    f"would delete {listed}; confirm with --yes", path="--recursive"
                )
            answer = input(f"delete {listed}? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                print("nothing deleted", file=sys.stderr)
                return 1
    for name in use_cases(args).delete(names):
        print(f"deleted {name}")
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    done = use_cases(args).reset(args.name, args.block, force=args.force)
    for stale in done.invalidated:
        print(f"warning: {stale}: no longer valid; reset it too", file=sys.stderr)
    print(f"{done.dataset}: head {done.head} ({plural(done.removed, 'later block')} removed)")
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    if not args.hard:
        raise ValidationError(
            "compaction rewrites the chain (every block after the first merged slice gets a new"
            " hash): confirm with --hard",
            path="compact",
        )
    if args.max_records < 1:
        raise ValidationError("must be at least 1", path="--max-records")
    done = use_cases(args).compact(args.name, max_records=args.max_records)
    print(
        f"{done.dataset}: {plural(done.files_before, 'data file')} in"
        f" {plural(done.blocks_before, 'block')} -> {done.files_after} in {done.blocks_after}"
        f" (head {done.head})"
    )
    return 0


def cmd_rename(args: argparse.Namespace) -> int:
    new = use_cases(args).rename(args.name, args.new_name)
    print(f"renamed {args.name} to {new}")
    return 0
