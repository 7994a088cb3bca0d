"""Looking into a dataset: ``odf log``, ``odf tail``, ``odf inspect schema``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from common.serde.yaml_codec import dump_block_manifest, to_plain
from coordinator.cli.connect import add_daemon_argument, use_cases
from coordinator.cli.output import (
    OutputFormat,
    add_output_format_argument,
    render_document,
    render_rows,
    table_rows,
)
from coordinator.dataset.describe import describe_event

LOG_COLUMNS = ("seq", "hash", "system_time", "event", "details")
SCHEMA_COLUMNS = ("name", "type", "nullable")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("log", help="show the metadata blocks of a dataset, newest first")
    p.add_argument("name", metavar="NAME", help="dataset name or id")
    p.add_argument("-n", "--limit", type=_positive, help="show at most this many blocks")
    add_output_format_argument(p, (OutputFormat.TABLE, OutputFormat.JSON, OutputFormat.YAML))
    add_daemon_argument(p)
    p.set_defaults(handler=cmd_log)

    p = subparsers.add_parser("tail", help="show the latest records of a dataset")
    p.add_argument("name", metavar="NAME", help="dataset name or id")
    p.add_argument("-n", "--num-records", type=_positive, default=10, help="default: 10")
    p.add_argument("-s", "--skip", type=_non_negative, default=0, help="skip the latest S")
    add_output_format_argument(p)
    add_daemon_argument(p)
    p.set_defaults(handler=cmd_tail)

    p = subparsers.add_parser("inspect", help="inspect a dataset")
    inspect = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    p = inspect.add_parser("schema", help="the data schema from SetDataSchema")
    p.add_argument("name", metavar="NAME", help="dataset name or id")
    add_output_format_argument(p)
    add_daemon_argument(p)
    p.set_defaults(handler=cmd_inspect_schema)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


# --- log ---------------------------------------------------------------------------------------


def cmd_log(args: argparse.Namespace) -> int:
    blocks = use_cases(args).log(args.name, args.limit)
    fmt = OutputFormat(args.output_format)
    if fmt is OutputFormat.YAML:
        for h, block in blocks:
            sys.stdout.write(f"--- # {h}\n{dump_block_manifest(block)}")
    elif fmt is OutputFormat.JSON:
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
        render_rows(rows, LOG_COLUMNS, fmt)
    return 0


# --- tail --------------------------------------------------------------------------------------


def cmd_tail(args: argparse.Namespace) -> int:
    table = use_cases(args).tail(args.name, args.num_records, skip=args.skip)
    render_rows(table_rows(table), table.column_names, args.output_format)
    return 0


# --- inspect schema ----------------------------------------------------------------------------


def cmd_inspect_schema(args: argparse.Namespace) -> int:
    schema = use_cases(args).schema(args.name)
    rows = [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]
    render_rows(rows, SCHEMA_COLUMNS, args.output_format)
    return 0
