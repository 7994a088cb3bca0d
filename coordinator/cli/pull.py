"""``odf pull NAME... | --all``: bring datasets up to date.

Root datasets run their polling source until it is exhausted (one commit per fetched slice);
derivative datasets run transformations until their inputs are fully processed (bounded
transactions). What pulling means depends on the dataset kind: ``PULLERS`` maps each kind to
its function. Datasets are pulled in dependency order (inputs first); ``--recursive`` also
pulls everything upstream. One engine serves the whole command (started on first use).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from common.odf.errors import OdfError, ValidationError
from common.odf.fragments import DatasetKind
from coordinator.cli.ingest import describe, terminal_progress
from coordinator.dataset import Dataset
from coordinator.engine.raw_query import RawQueryEngines
from coordinator.ingest.polling import pull_root
from coordinator.ingest.progress import Progress
from coordinator.ingest.source_state import parse_rfc3339
from coordinator.transform.graph import dependency_order
from coordinator.transform.plan import UpToDate
from coordinator.transform.runner import (
    Clock,
    Transformer,
    utc_now,
    workspace_resolver,
    workspace_transformer,
)
from coordinator.transform.transaction import TransactionResult
from coordinator.workspace import Workspace


@dataclass(frozen=True, slots=True)
class PullOptions:
    fetch_uncacheable: bool
    progress: Progress
    transformer: Transformer
    """Runs transformations, and holds the command's engines (also for preprocess queries)."""
    system_time: datetime | None = None
    """``--system-time`` for root datasets' ingestion (None: now)."""


Puller = Callable[[Dataset, PullOptions], Iterator[str]]
"""Pulls one dataset; yields a line to print per step (e.g. per commit)."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("pull", help="update datasets from their sources")
    p.add_argument("names", nargs="*", metavar="NAME", help="datasets to pull")
    p.add_argument("--all", action="store_true", help="pull every dataset in the workspace")
    p.add_argument(
        "-r",
        "--recursive",
        action="store_true",
        help="also pull the datasets the named ones depend on (inputs first)",
    )
    p.add_argument(
        "--system-time",
        metavar="RFC3339",
        help="system time of the new blocks and records, ingested or transformed"
        " (default: now); makes a pull reproducible",
    )
    p.add_argument(
        "--fetch-uncacheable",
        action="store_true",
        help="fetch sources that keep no state (no ETag/Last-Modified) again",
    )
    p.set_defaults(handler=cmd_pull)


def cmd_pull(args: argparse.Namespace) -> int:
    ws = Workspace.find()
    if args.all == bool(args.names):
        raise ValidationError("give dataset names or --all (not both)", path="NAME")
    selected = ws.list_datasets() if args.all else [ws.open_dataset(n) for n in args.names]
    datasets = dependency_order(selected, workspace_resolver(ws), recursive=args.recursive)
    clock = fixed_clock(args.system_time)
    with (
        terminal_progress() as progress,
        workspace_transformer(ws, datasets, clock=clock) as transformer,
    ):
        options = PullOptions(
            fetch_uncacheable=args.fetch_uncacheable,
            progress=progress,
            transformer=transformer,
            system_time=clock() if args.system_time else None,
        )
        for dataset in datasets:
            for line in pull_dataset(dataset, options):
                print(line)
    return 0


def fixed_clock(text: str | None) -> Clock:
    if text is None:
        return utc_now
    try:
        when = parse_rfc3339(text)
    except ValueError:
        raise ValidationError(
            f"{text!r} is not an RFC 3339 time (e.g. 2020-01-01T00:00:00Z)", path="--system-time"
        ) from None
    return lambda: when


def pull_dataset(dataset: Dataset, options: PullOptions) -> Iterator[str]:
    kind = dataset.state().kind
    puller = PULLERS.get(kind) if kind is not None else None
    if puller is None:
        raise OdfError(f"dataset {dataset.alias!r} has no Seed block: nothing to pull")
    return puller(dataset, options)


def pull_root_dataset(dataset: Dataset, options: PullOptions) -> Iterator[str]:
    for result in pull_root(
        dataset,
        fetch_uncacheable=options.fetch_uncacheable,
        engines=RawQueryEngines(options.transformer.engines),
        progress=options.progress,
        system_time=options.system_time,
    ):
        yield describe(result, "the polling source")


def pull_derivative_dataset(dataset: Dataset, options: PullOptions) -> Iterator[str]:
    for step in options.transformer.steps(dataset):
        if isinstance(step, UpToDate):
            yield f"{dataset.alias}: {step.reason}"
        else:
            yield describe_transaction(dataset.alias, step)


def describe_transaction(name: str, t: TransactionResult) -> str:
    data = t.event.new_data
    if data is None:
        records = "no new records"
    else:
        o = data.offset_interval
        records = f"{t.output_records} records (offsets {o.start}..{o.end})"
    mark = t.event.new_watermark
    watermark = mark.isoformat() if mark else "none"
    return (
        f"{name}: {records} from {t.input_records} input records,"
        f" watermark {watermark} (head {t.head})"
    )


PULLERS: dict[DatasetKind, Puller] = {
    DatasetKind.ROOT: pull_root_dataset,
    DatasetKind.DERIVATIVE: pull_derivative_dataset,
}
