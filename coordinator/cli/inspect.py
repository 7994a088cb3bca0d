"""Looking into a dataset: ``odf log``, ``odf tail``, ``odf inspect schema``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from common.odf.errors import ValidationError
from common.odf.events import AddData, ExecuteTransform
from common.odf.fragments import DataSlice
from common.serde.yaml_codec import dump_block_manifest, to_plain
from coordinator.dataset import Dataset
from coordinator.dataset.describe import describe_event
from coordinator.output import (
    OutputFormat,
    add_output_format_argument,
    render_document,
    render_rows,
    table_rows,
)
from coordinator.workspace import Workspace

LOG_COLUMNS = ("seq", "hash", "system_time", "event", "details")
SCHEMA_COLUMNS = ("name", "type", "nullable")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("log", help="show the metadata blocks of a dataset, newest first")
    p.add_argument("name", metavar="NAME", help="dataset name or id")
    p.add_argument("-n", "--limit", type=_positive, help="show at most this many blocks")
    add_output_format_argument(p, (OutputFormat.TABLE, OutputFormat.JSON, OutputFormat.YAML))
    p.set_defaults(handler=cmd_log)

    p = subparsers.add_parser("tail", help="show the latest records of a dataset")
    p.add_argument("name", metavar="NAME", help="dataset name or id")
    p.add_argument("-n", "--num-records", type=_positive, default=10, help="default: 10")
    p.add_argument("-s", "--skip", type=_non_negative, default=0, help="skip the latest S")
    add_output_format_argument(p)
    p.set_defaults(handler=cmd_tail)

    p = subparsers.add_parser("inspect", help="inspect a dataset")
    inspect = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    p = inspect.add_parser("schema", help="the data schema from SetDataSchema")
    p.add_argument("name", metavar="NAME", help="dataset name or id")
    add_output_format_argument(p)
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
    ds = Workspace.find().open_dataset(args.name)
    blocks = []
    for item in ds.iter_blocks():
        blocks.append(item)
        if args.limit is not None and len(blocks) >= args.limit:
            break
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
    ds = Workspace.find().open_dataset(args.name)
    table = tail_records(ds, args.num_records, skip=args.skip)
    render_rows(table_rows(table), table.column_names, args.output_format)
    return 0


def tail_records(ds: Dataset, n: int, *, skip: int = 0) -> pa.Table:
    """The latest ``n`` records (after skipping the latest ``skip``), oldest first."""
    state = ds.state()
    offset_column = state.vocab.offset_column
    wanted = n + skip
    slices: list[DataSlice] = []
    covered = 0
    for _, block in ds.iter_blocks():
        if covered >= wanted:
            break
        event = block.event
        if isinstance(event, AddData | ExecuteTransform) and event.new_data is not None:
            slices.append(event.new_data)
            o = event.new_data.offset_interval
            covered += o.end - o.start + 1
    if not slices:
        schema = state.arrow_schema()
        return (schema or pa.schema([])).empty_table()
    tables = [pq.read_table(ds.data_path(s.physical_hash)) for s in reversed(slices)]
    table = pa.concat_tables(tables, promote_options="default")
    table = table.sort_by(offset_column)
    end = max(table.num_rows - skip, 0)
    return table.slice(max(end - n, 0), end - max(end - n, 0))


# --- inspect schema ----------------------------------------------------------------------------


def cmd_inspect_schema(args: argparse.Namespace) -> int:
    ds = Workspace.find().open_dataset(args.name)
    schema = ds.state().arrow_schema()
    if schema is None:
        raise ValidationError(
            f"dataset {ds.alias!r} has no schema yet (it is set by the first ingest or transform)"
        )
    rows = [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]
    render_rows(rows, SCHEMA_COLUMNS, args.output_format)
    return 0
