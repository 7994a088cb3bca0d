"""Inputs' histories for verification: read tolerantly, a damaged input named, not raised."""

from __future__ import annotations

from coordinator.dataset import Dataset
from coordinator.transform.recorded import InputHistory
from coordinator.verify.stored_chain import walk_chain


def load_input_history(dataset: Dataset) -> InputHistory | str:
    """The input's history, or why it cannot be trusted (a damaged chain)."""
    chain = walk_chain(dataset.layout)
    if chain.problems or not chain.complete:
        first = chain.problems[0] if chain.problems else "its chain does not reach its Seed"
        return f"input {dataset.alias!r} is damaged: {first} (verify it)"
    return InputHistory.of(dataset, chain.blocks)
