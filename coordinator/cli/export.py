"""``odf export NAME --format parquet|csv|ndjson --output PATH [--partition-size N]``: a
dataset's records, in offset order, for tools outside ODF (``Application.export``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coordinator.app import Application
from coordinator.query.export import ExportFormat


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("export", help="write a dataset's records to files")
    p.add_argument("name", metavar="NAME", help="the dataset")
    p.add_argument(
        "--format",
        choices=[f.value for f in ExportFormat],
        default="parquet",
        help="default: parquet",
    )
    p.add_argument(
        "--output", type=Path, required=True, metavar="PATH", help="a new file or directory"
    )
    p.add_argument(
        "--partition-size",
        type=int,
        metavar="N",
        help="a directory of files of at most N records each, instead of one file",
    )
    p.set_defaults(handler=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    done = Application.open().export(
        args.name, ExportFormat(args.format), args.output, partition_size=args.partition_size
    )
    files = "1 file" if done.files == 1 else f"{done.files} files"
    print(f"exported {done.records} records of {args.name} to {done.path} ({files})")
    return 0
