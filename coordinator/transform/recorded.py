"""The input side of recorded transactions: what a past ``ExecuteTransform`` read.

Every ``ExecuteTransform`` records, per input, the block interval it read (``prevBlockHash``,
``newBlockHash``] and the offsets it ended at. ``InputHistory`` holds an input's whole chain
with its state after each block, so that the input side of any recorded transaction (its data
files, explicit watermarks and schema) is rebuilt without rescanning the chain
(``recorded_input_plan``): a verification replays transactions from it, a query change plans
its migration with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from common.odf.events import AddData, ExecuteTransform
from common.odf.fragments import ExecuteTransformInput, Watermark
from common.odf.multihash import Multihash
from coordinator.dataset import Dataset
from coordinator.dataset.chain import NamedBlock
from coordinator.dataset.state import DatasetState, advance
from coordinator.transform.errors import RecordedInputError
from coordinator.transform.plan import DataFileRef, InputPlan


@dataclass(frozen=True, slots=True)
class InputHistory:
    dataset: Dataset
    blocks: tuple[NamedBlock, ...]
    """Oldest first."""
    states: tuple[DatasetState, ...]
    """The input's state after each block."""
    positions: Mapping[Multihash, int]

    @property
    def alias(self) -> str:
        return self.dataset.alias

    @classmethod
    def of(cls, dataset: Dataset, blocks: Sequence[NamedBlock]) -> InputHistory:
        """From the blocks of ``dataset``'s chain, oldest first."""
        states, state = [], DatasetState()
        for read in blocks:
            state = advance(state, read.name, read.block)
            states.append(state)
        positions = {read.name: i for i, read in enumerate(blocks)}
        return cls(dataset, tuple(blocks), tuple(states), positions)

    def state_at(self, block: Multihash) -> DatasetState | None:
        """The input's state as of ``block`` (``None``: not in its chain)."""
        i = self.positions.get(block)
        return None if i is None else self.states[i]

    def first_schema_state(self) -> DatasetState | None:
        """The input's state at its first ``SetDataSchema`` (``None``: it has no data yet)."""
        return next((s for s in self.states if s.schema is not None), None)

    def window(self, prev: Multihash | None, new: Multihash | None) -> tuple[NamedBlock, ...]:
        """The blocks in (``prev``, ``new``], oldest first."""
        if new is None:
            return ()
        start = 0 if prev is None else self._position(prev, "prevBlockHash") + 1
        end = self._position(new, "newBlockHash") + 1
        if end <= start:
            raise RecordedInputError(f"input {self.alias!r}: block {new} is not after block {prev}")
        return self.blocks[start:end]

    def _position(self, block: Multihash, what: str) -> int:
        i = self.positions.get(block)
        if i is None:
            raise RecordedInputError(
                f"input {self.alias!r}: {what} {block} is not in its chain (the input was"
                " rolled back or replaced)"
            )
        return i


def read_input_history(dataset: Dataset) -> InputHistory:
    """The input's history from its chain, read as a transform reads it (a damaged block is
    an error)."""
    blocks = [NamedBlock(name, block) for name, block in dataset.iter_blocks()]
    return InputHistory.of(dataset, blocks[::-1])


def recorded_input_plan(
    entry: ExecuteTransformInput, query_alias: str, history: InputHistory
) -> InputPlan:
    """What the ``queryInputs`` entry ``entry`` of a transaction read from its input.

    The same ``InputPlan`` the planner made when the transaction ran: the data files and
    explicit watermarks of the data blocks in (``prevBlockHash``, ``newBlockHash``], and the
    input's schema and vocabulary as of the last block read. An entry that has read nothing
    yet (a migration adding an input) gets the input's first schema: the one its data starts
    with, which stays the same however far the input advances.
    """
    window = history.window(entry.prev_block_hash, entry.new_block_hash)
    last = entry.new_block_hash or entry.prev_block_hash
    state = history.state_at(last) if last is not None else history.first_schema_state()
    if state is None or state.schema_bytes is None:
        where = f"as of block {last}" if last is not None else "yet"
        raise RecordedInputError(f"input {history.alias!r} has no data schema {where}")
    files, watermarks = [], []
    for read in window:
        event = read.block.event
        if not isinstance(event, AddData | ExecuteTransform):
            continue
        if event.new_data is not None:
            files.append(
                DataFileRef(
                    physical_hash=event.new_data.physical_hash,
                    file_interval=event.new_data.offset_interval,
                )
            )
        if event.new_watermark is not None:
            watermarks.append(
                Watermark(system_time=read.block.system_time, event_time=event.new_watermark)
            )
    return InputPlan(
        dataset_id=entry.dataset_id,
        dataset_alias=history.alias,
        query_alias=query_alias,
        vocab=state.vocab,
        prev_block_hash=entry.prev_block_hash,
        new_block_hash=entry.new_block_hash,
        prev_offset=entry.prev_offset,
        new_offset=entry.new_offset,
        files=tuple(files),
        explicit_watermarks=tuple(watermarks),
        schema=state.schema_bytes,
    )
