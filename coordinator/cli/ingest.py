"""``odf ingest NAME FILE...``: push data files into a root dataset's push source.

Each file is ingested separately, in argument order, one commit each; ``-`` reads stdin.
Long ingests show a progress bar on a terminal.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from common.humanize import human_time, plural
from common.odf.errors import ValidationError
from coordinator.app import IngestFile, IngestOptions
from coordinator.cli.arguments import add_name_argument, optional_time, parse_time
from coordinator.cli.connect import add_daemon_argument, use_cases
from coordinator.cli.progress import terminal_progress
from coordinator.ingest.context import IngestResult
from coordinator.ingest.readers import FORMATS
from coordinator.tempdirs import owned_temp_dir

STDIN = "-"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("ingest", help="push data files into a root dataset")
    add_name_argument(p, "the dataset")
    p.add_argument("files", nargs="+", metavar="FILE", help="files to ingest; - reads stdin")
    p.add_argument("--source-name", help="the push source to use when there are several")
    p.add_argument(
        "--input-format",
        choices=sorted(FORMATS),
        help="read the data as this format instead of the source's",
    )
    p.add_argument(
        "--event-time",
        metavar="RFC3339",
        help="event time of records that have none (default: the time of the ingest)",
    )
    add_daemon_argument(p, writes=True)
    p.set_defaults(handler=cmd_ingest)

    p = subparsers.add_parser(
        "set-watermark", help="move a root dataset's watermark forward (no records)"
    )
    add_name_argument(p, "the root dataset")
    p.add_argument("time", metavar="TIME", help="the new watermark (RFC 3339)")
    add_daemon_argument(p, writes=True)
    p.set_defaults(handler=cmd_set_watermark)


def cmd_ingest(args: argparse.Namespace) -> int:
    options = IngestOptions(
        source_name=args.source_name,
        input_format=args.input_format,
        event_time=optional_time(args.event_time, "--event-time"),
    )
    app = use_cases(args)
    app.summary(args.name)  # it exists, before stdin is read
    if args.files.count(STDIN) > 1:
        raise ValidationError("stdin (-) can be given only once", path="FILE")
    with ExitStack() as files, terminal_progress(args) as progress:
        local = [IngestFile(*files.enter_context(_local_file(f))) for f in args.files]
        for file, result in zip(
            local,
            app.ingest(
                args.name,
                local,
                replace(options, progress=progress),
            ),
            strict=False,
        ):
            print(describe(result, file.name))
    return 0


def cmd_set_watermark(args: argparse.Namespace) -> int:
    watermark = parse_time(args.time, "TIME")
    head = use_cases(args).set_watermark(args.name, watermark)
    print(f"{args.name}: watermark {human_time(watermark)} (head {head})")
    return 0


def describe(result: IngestResult, source: str) -> str:
    if result.up_to_date:
        why = f" ({result.message})" if result.message else ""
        return f"{result.dataset}: up to date{why}"
    records = plural(result.num_records, "record")
    return f"{result.dataset}: {records} from {source} (head {result.new_head})"


@contextmanager
def _local_file(file: str) -> Iterator[tuple[Path, str]]:
    """The file to read: the given path, or stdin copied to a temporary file."""
    if file != STDIN:
        path = Path(file)
        if not path.is_file():
            raise ValidationError("no such file", path=file)
        yield path, file
        return
    with owned_temp_dir("odf-stdin-") as tmp:  # removed by the next run if this one is killed
        path = tmp / "stdin"
        with open(path, "wb") as out:
            shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)
        yield path, "<stdin>"
