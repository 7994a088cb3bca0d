"""``odf pull NAME... | --all``: bring datasets up to date.

Root datasets run their polling source until it is exhausted (one commit per fetched slice).
What pulling means depends on the dataset kind: ``PULLERS`` maps each kind to its function,
so the derivative branch (running transformations) plugs in there.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from common.odf.errors import OdfError, ValidationError
from common.odf.fragments import DatasetKind
from coordinator.cli.ingest import configured_engines, describe, terminal_progress
from coordinator.dataset import Dataset
from coordinator.ingest.polling import pull_root
from coordinator.ingest.progress import Progress
from coordinator.workspace import Workspace


@dataclass(frozen=True, slots=True)
class PullOptions:
    fetch_uncacheable: bool
    progress: Progress


Puller = Callable[[Dataset, PullOptions], Iterator[str]]
"""Pulls one dataset; yields a line to print per step (e.g. per commit)."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("pull", help="update datasets from their sources")
    p.add_argument("names", nargs="*", metavar="NAME", help="datasets to pull")
    p.add_argument("--all", action="store_true", help="pull every dataset in the workspace")
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
    datasets = ws.list_datasets() if args.all else [ws.open_dataset(n) for n in args.names]
    datasets.sort(key=lambda d: d.state().kind is not DatasetKind.ROOT)
    with terminal_progress() as progress:
        options = PullOptions(fetch_uncacheable=args.fetch_uncacheable, progress=progress)
        for dataset in datasets:
            for line in pull_dataset(dataset, options):
                print(line)
    return 0


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
        engines=configured_engines(),
        progress=options.progress,
    ):
        yield describe(result, "the polling source")


def pull_derivative_dataset(dataset: Dataset, options: PullOptions) -> Iterator[str]:
    del options
    raise OdfError(
        f"dataset {dataset.alias!r} is derivative: pulling derivative datasets"
        " (running transformations) is not available yet"
    )


PULLERS: dict[DatasetKind, Puller] = {
    DatasetKind.ROOT: pull_root_dataset,
    DatasetKind.DERIVATIVE: pull_derivative_dataset,
}
