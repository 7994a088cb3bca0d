"""Reading the inputs of a derivative dataset: each input's chain after what was processed.

Only the blocks after the last processed one are read (newest first, back to it), as RFC-014
intends; the chain is scanned further back only to find the schema in effect before a
``SetDataSchema`` that falls inside that window.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from common.odf.block import MetadataBlock
from common.odf.events import AddData, ExecuteTransform, SetDataSchema
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from coordinator.dataset import Dataset, DatasetNotFoundError, DatasetState
from coordinator.dataset.state import last_input_block
from coordinator.transform.errors import InputDivergedError, TransformSetupError
from coordinator.transform.plan import InputBlock, InputWindow

InputResolver = Callable[[DatasetID], Dataset]
"""Finds an input dataset by id (raises ``DatasetNotFoundError``)."""


@dataclass(frozen=True, slots=True)
class DerivativeInputs:
    """The input datasets of a derivative dataset and their windows, in SetTransform order."""

    datasets: tuple[Dataset, ...]
    windows: tuple[InputWindow, ...]

    def dataset(self, dataset_id: DatasetID) -> Dataset:
        return next(
            d
            for d, w in zip(self.datasets, self.windows, strict=True)
            if w.dataset_id == dataset_id
        )


def load_inputs(state: DatasetState, resolve: InputResolver) -> DerivativeInputs:
    """Open every input of the dataset in ``state`` and read its unprocessed blocks."""
    if state.transform is None:
        raise TransformSetupError("the dataset has no SetTransform: it is not derivative")
    datasets, windows = [], []
    for i, entry in enumerate(state.transform.inputs):
        dataset_id = DatasetID.from_did(entry.dataset_ref)
        try:
            ds = resolve(dataset_id)
        except DatasetNotFoundError:
            raise TransformSetupError(
                f"input {entry.alias or entry.dataset_ref!r} (SetTransform.inputs[{i}],"
                f" {entry.dataset_ref}) is not in the workspace"
            ) from None
        progress = state.input_progress(dataset_id)
        start = last_input_block(progress) if progress else None
        datasets.append(ds)
        windows.append(read_window(ds, start, query_alias=entry.alias or ds.alias))
    return DerivativeInputs(tuple(datasets), tuple(windows))


def read_window(ds: Dataset, start: Multihash | None, *, query_alias: str) -> InputWindow:
    """The blocks of ``ds`` after ``start`` (``None``: all of them), oldest first."""
    state = ds.state()
    if state.id is None:
        raise TransformSetupError(f"input {ds.alias!r} has no Seed block")
    newest_first: list[tuple[Multihash, MetadataBlock]] = []
    found = start is None
    blocks = ds.iter_blocks()
    for h, block in blocks:
        if h == start:
            found = True
            break
        newest_first.append((h, block))
    if not found:
        raise InputDivergedError(
            f"input {ds.alias!r}: block {start} that the last transaction processed is not in"
            " its chain (the input was reset or replaced)"
        )
    window = tuple(_input_block(h, b) for h, b in reversed(newest_first))
    has_schema_change = any(b.schema is not None for b in window)
    start_schema = _schema_before(blocks) if has_schema_change else state.schema_bytes
    return InputWindow(
        dataset_id=state.id,
        dataset_alias=ds.alias,
        query_alias=query_alias,
        vocab=state.vocab,
        start_block=start,
        start_schema=start_schema,
        blocks=window,
    )


def _schema_before(rest: Iterator[tuple[Multihash, MetadataBlock]]) -> bytes | None:
    """The schema of the newest SetDataSchema among the remaining (older) blocks."""
    for _, block in rest:
        if isinstance(block.event, SetDataSchema):
            return block.event.schema
    return None


def _input_block(h: Multihash, block: MetadataBlock) -> InputBlock:
    event = block.event
    if isinstance(event, AddData | ExecuteTransform):
        data = event.new_data
        return InputBlock(
            hash=h,
            system_time=block.system_time,
            data=data.offset_interval if data else None,
            data_file=data.physical_hash if data else None,
            watermark=event.new_watermark,
            is_data_event=True,
        )
    if isinstance(event, SetDataSchema):
        return InputBlock(hash=h, system_time=block.system_time, schema=event.schema)
    return InputBlock(hash=h, system_time=block.system_time)
