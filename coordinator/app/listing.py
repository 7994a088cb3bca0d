"""What ``odf list`` and ``odf log`` show, read with as little imported as possible.

``DatasetSummary``: one dataset as ``odf list`` shows it, from the state cache when current.

A summary is read from the dataset's state cache (``coordinator.dataset.listing``: no block
decoded, the FlatBuffers model not even imported) when the cache is at the head, else from
``Dataset.state()``, which also saves the cache for the next listing. A broken dataset (an
unreadable head or block) gets only its name and a one-line ``error``.

``log``: a dataset's blocks, newest first, read through its metadata chain alone (not the
whole ``Dataset`` with its commit machinery, nor the application).
"""

from __future__ import annotations

from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from common.odf.errors import OdfError
from common.odf.record import record
from coordinator.dataset import listing
from coordinator.dataset.layout import DatasetLayout

if TYPE_CHECKING:
    from common.odf.block import MetadataBlock
    from common.odf.multihash import Multihash
    from coordinator.dataset.state import DatasetState
    from coordinator.workspace import Workspace


@record
class DatasetSummary:
    """One dataset of ``list``; a broken one has only its name and ``error``."""

    name: str
    kind: str | None = None
    head: Multihash | None = None
    blocks: int | None = None
    records: int | None = None
    size: int | None = None
    updated: datetime | None = None
    watermark: datetime | None = None
    error: str | None = None


def list_datasets(ws: Workspace) -> list[DatasetSummary]:
    """Every dataset of ``ws`` by name; a broken one with a one-line error."""
    return [summarize(root, root.name) for root in ws.dataset_dirs()]


def summarize(root: Path, alias: str) -> DatasetSummary:
    """The summary of the dataset in directory ``root``, named ``alias``."""
    cached = listing.read(DatasetLayout(root))
    if cached is not None:
        return DatasetSummary(
            name=alias,
            kind=cached.kind,
            head=cached.head,
            blocks=cached.blocks,
            records=cached.records,
            size=cached.size,
            updated=cached.updated,
            watermark=cached.watermark,
        )
    from coordinator.dataset.dataset import Dataset  # the model: only when the cache is not

    try:
        return summary_of_state(alias, Dataset(root, alias=alias).state())
    except (OdfError, OSError) as e:
        reason = " ".join(str(e).split()).replace(f"{root}/", "")
        return DatasetSummary(name=alias, error=reason)


def log(
    ws: Workspace, name: str, limit: int | None = None
) -> list[tuple[Multihash, MetadataBlock]]:
    """The blocks of dataset ``name`` (or id) in ``ws``, newest first (at most ``limit``)."""
    from coordinator.dataset.chain import MetadataChain  # the FlatBuffers model: only here

    root = ws.dataset_path(name)
    return list(islice(MetadataChain(DatasetLayout(root)).iter_blocks(), limit))


def summary_of_state(alias: str, state: DatasetState) -> DatasetSummary:
    """The summary of a dataset from its state (the full path, with the model loaded)."""
    return DatasetSummary(
        name=alias,
        kind=state.kind.value if state.kind else None,
        head=state.head,
        blocks=state.sequence_number + 1,
        records=state.num_records,
        size=state.data_size,
        updated=state.system_time,
        watermark=state.last_watermark,
    )
