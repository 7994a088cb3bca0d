"""``odf export NAME --format parquet|csv|ndjson --output PATH|- [--partition-size N] [--force]``:
a dataset's records, in offset order, for tools outside ODF (``Application.export``).
``--output -`` writes them to standard output (the summary line then goes to stderr)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from common.odf.errors import ValidationError
from coordinator.app import Application
from coordinator.cli.arguments import add_flag, add_name_argument
from coordinator.query.export import ExportFormat, ExportTarget


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("export", help="write a dataset's records to files")
    add_name_argument(p, "the dataset")
    p.add_argument(
        "--format",
        choices=[f.value for f in ExportFormat],
        default="parquet",
        help="default: parquet",
    )
    p.add_argument(
        "--output",
        required=True,
        metavar="PATH",
        help="a new file or directory (missing parent directories are created); - for stdout",
    )
    p.add_argument(
        "--partition-size",
        type=int,
        metavar="N",
        help="a directory of files of at most N records each, instead of one file",
    )
    add_flag(
        p, "--force", help="replace an existing file (or an earlier partitioned export's directory)"
    )
    p.set_defaults(handler=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    app = Application.open()
    fmt = ExportFormat(args.format)
    if args.output == "-":
        if args.partition_size is not None:
            raise ValidationError(
                "cannot be used with --output - (one stream)", path="--partition-size"
            )
        if fmt is ExportFormat.PARQUET and sys.stdout.isatty():
            raise ValidationError(
                "Parquet is binary: redirect standard output to a file or a pipe", path="--output"
            )
        done = app.export_to_stream(args.name, fmt, sys.stdout.buffer)
        print(f"exported {done.records} records of {args.name} to stdout", file=sys.stderr)
        return 0
    target = ExportTarget(fmt, Path(args.output), args.partition_size, args.force)
    done = app.export(args.name, target)
    files = "1 file" if done.files == 1 else f"{done.files} files"
    print(f"exported {done.records} records of {args.name} to {done.path} ({files})")
    return 0
