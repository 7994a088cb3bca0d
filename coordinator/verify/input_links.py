"""A derivative dataset's references into its inputs' chains (``ExecuteTransform.queryInputs``).

Each transaction records, per input, the block interval it read (``prevBlockHash``,
``newBlockHash``] and the offsets it ended at. Those blocks must still be in the input's
chain, in that order, and the input's data must end at the recorded offset as of
``newBlockHash``; otherwise the input was rolled back or replaced after it was read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from common.odf.errors import OdfError
from common.odf.events import ExecuteTransform, SetTransform
from common.odf.fragments import ExecuteTransformInput
from common.odf.identity import DatasetID
from coordinator.dataset.state import last_input_offset
from coordinator.transform.recorded import InputHistory
from coordinator.verify.integrity import StoredBlock
from coordinator.verify.report import Check, Problem

InputChains = Mapping[DatasetID, InputHistory | str]
"""Each input's chain, or why it is not available (not in the workspace, damaged)."""


def input_link_problems(blocks: Sequence[StoredBlock], inputs: InputChains) -> list[Problem]:
    """Problems of every ``ExecuteTransform``'s ``queryInputs`` (and of unavailable inputs)."""
    problems = _unavailable_inputs(blocks, inputs)
    for stored in blocks:
        event = stored.block.event
        if not isinstance(event, ExecuteTransform):
            continue
        for i, entry in enumerate(event.query_inputs):
            chain = inputs.get(entry.dataset_id)
            if isinstance(chain, InputHistory):
                for message in _entry_problems(entry, chain):
                    problems.append(_problem(stored, f"queryInputs[{i}].{message}"))
    return problems


def _unavailable_inputs(blocks: Sequence[StoredBlock], inputs: InputChains) -> list[Problem]:
    """One problem per unavailable input, at the first SetTransform that declares it."""
    problems, reported = [], set()
    for stored in blocks:
        event = stored.block.event
        if not isinstance(event, SetTransform):
            continue
        for i, entry in enumerate(event.inputs):
            try:
                dataset_id = DatasetID.from_did(entry.dataset_ref)
            except OdfError:
                continue  # reported by the chain rules
            reason = inputs.get(dataset_id)
            if isinstance(reason, str) and dataset_id not in reported:
                reported.add(dataset_id)
                name = entry.alias or entry.dataset_ref
                problems.append(_problem(stored, f"inputs[{i}] {name!r}: {reason}"))
    return problems


def _problem(stored: StoredBlock, message: str) -> Problem:
    return Problem(check=Check.INPUT, block=stored.ref, message=message)


def _entry_problems(entry: ExecuteTransformInput, chain: InputHistory) -> list[str]:
    name = repr(chain.alias)
    found = []
    prev = chain.positions.get(entry.prev_block_hash) if entry.prev_block_hash else None
    new = chain.positions.get(entry.new_block_hash) if entry.new_block_hash else None
    if entry.prev_block_hash is not None and prev is None:
        found.append(
            f"prevBlockHash: block {entry.prev_block_hash} is not in the chain of input {name}"
        )
    if entry.new_block_hash is not None and new is None:
        found.append(
            f"newBlockHash: block {entry.new_block_hash} is not in the chain of input {name}"
            " (the input's head was moved back or replaced after it was read)"
        )
    if prev is not None and new is not None and new <= prev:
        found.append(f"newBlockHash: block {entry.new_block_hash} is not after prevBlockHash")
    if (entry.new_block_hash is not None and new is None) or (new is None and prev is None):
        return found
    at = new if new is not None else prev
    assert at is not None
    expected = chain.states[at].last_offset
    recorded = last_input_offset(entry)
    if recorded != expected:
        block = chain.blocks[at].name
        found.append(
            f"newOffset: the transaction read input {name} up to offset {recorded}, but the"
            f" input's data as of block {block} ends at offset {expected}"
        )
    return found
