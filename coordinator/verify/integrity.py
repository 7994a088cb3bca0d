"""Integrity verification: everything that can be checked from a dataset's stored bytes alone.

- ``refs/head`` names a stored block and was not moved back (``stored_chain``);
- every block file hashes to its name, as stored, and decodes; links reach the Seed;
- sequence numbers, links and every chain rule hold, block after block from the Seed
  (``coordinator.dataset.rules``, the same rules commits are checked with);
- every data file named by a block exists with its size, physical hash, record count and
  logical hash; every checkpoint with its size and physical hash (``files``).

Nothing is re-encoded and nothing needs an engine. Problems are collected, not raised, so one
run names every damaged block.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from common.hashing.data_file import FileFacts, column_types
from common.odf.errors import ValidationError
from common.odf.events import AddData, ExecuteTransform
from common.odf.fragments import Checkpoint, DataSlice
from common.odf.multihash import Multihash
from coordinator.dataset.layout import DatasetLayout
from coordinator.dataset.rules import validate_append
from coordinator.dataset.state import DatasetState, advance
from coordinator.verify.engine_hashes import EngineHashes, data_facts_reader
from coordinator.verify.files import (
    checkpoint_facts,
    checkpoint_problems,
    data_file_facts,
    data_slice_problems,
)
from coordinator.verify.report import Check, Problem
from coordinator.verify.stored_chain import ReadBlock, StoredChain, hidden_blocks, walk_chain


@dataclass(frozen=True, slots=True)
class StoredBlock(ReadBlock):
    """A block of the chain with the dataset's state just before it."""

    state_before: DatasetState


@dataclass(frozen=True, slots=True)
class IntegrityResult:
    chain: StoredChain
    blocks: tuple[StoredBlock, ...]
    """The blocks reached from the head, oldest first."""
    problems: tuple[Problem, ...]

    @property
    def complete(self) -> bool:
        """Whether the whole chain, from the head to the Seed, could be read."""
        return self.chain.complete


def verify_integrity(
    layout: DatasetLayout,
    on_bytes: Callable[[int], None] | None = None,
    engine_hashes: EngineHashes | None = None,
) -> IntegrityResult:
    """Check the dataset at ``layout`` from its stored bytes; see the module docstring.
    ``on_bytes`` is told the size of each data and checkpoint file once it is checked;
    ``engine_hashes``: the data files are hashed by the engine's executors
    (``engine_hashes.py``)."""
    chain = walk_chain(layout)
    problems = [*chain.problems, *hidden_blocks(layout, chain)]
    blocks, rule_problems = check_rules(chain.blocks, validate=chain.complete)
    problems += rule_problems
    read_data = data_facts_reader(engine_hashes, layout.root, _data_hashes(blocks))
    problems += file_problems(
        layout.root, blocks, complete=chain.complete, on_bytes=on_bytes, read_data=read_data
    )
    return IntegrityResult(chain, blocks, tuple(sorted_problems(problems)))


def _data_hashes(blocks: Sequence[StoredBlock]) -> list[Multihash]:
    """The physical hashes of the data files the chain's data events name, in chain order."""
    found = []
    for read in blocks:
        event = read.block.event
        if isinstance(event, AddData | ExecuteTransform) and event.new_data is not None:
            found.append(event.new_data.physical_hash)
    return found


def check_rules(
    blocks: Sequence[ReadBlock], *, validate: bool = True
) -> tuple[tuple[StoredBlock, ...], list[Problem]]:
    """Fold the chain (oldest first) through every chain rule, as if appending each block.

    Without ``validate`` (a chain that does not reach its Seed) the states are folded but
    the rules are not checked: every block would break the first one.
    """
    state = DatasetState()
    stored, problems = [], []
    for read in blocks:
        if validate:
            try:
                validate_append(state, read.block)
            except ValidationError as e:
                problems.append(
                    Problem(check=Check.CHAIN, block=read.ref, message=f"breaks a chain rule: {e}")
                )
        stored.append(StoredBlock(read.name, read.block, state))
        state = advance(state, read.name, read.block)
    return tuple(stored), problems


def file_problems(
    root: Path,
    blocks: Sequence[StoredBlock],
    *,
    complete: bool = True,
    on_bytes: Callable[[int], None] | None = None,
    read_data: Callable[[Path, Multihash], FileFacts] = data_file_facts,
) -> list[Problem]:
    """Every data file and checkpoint named by a data event, against what the event says
    and (data files) against the dataset's schema in effect at the event, known when the
    chain is ``complete``; ``read_data`` gives a data file's facts."""
    data_cache: dict[Multihash, FileFacts] = {}
    checkpoint_cache: dict[Multihash, FileFacts] = {}
    problems = []
    for read in blocks:
        event = read.block.event
        if not isinstance(event, AddData | ExecuteTransform):
            continue
        if event.new_data is not None:
            facts = _facts(data_cache, read_data, root, event.new_data, on_bytes)
            schema = read.state_before.arrow_schema() if complete else None
            columns = column_types(schema) if schema is not None else None
            for message in data_slice_problems(event.new_data, facts, columns):
                problems.append(Problem(check=Check.DATA, block=read.ref, message=message))
        if event.new_checkpoint is not None:
            facts = _facts(checkpoint_cache, checkpoint_facts, root, event.new_checkpoint, on_bytes)
            for message in checkpoint_problems(event.new_checkpoint, facts):
                problems.append(Problem(check=Check.CHECKPOINT, block=read.ref, message=message))
    return problems


def _facts(
    cache: dict[Multihash, FileFacts],
    read_facts: Callable[[Path, Multihash], FileFacts],
    root: Path,
    stored: DataSlice | Checkpoint,
    on_bytes: Callable[[int], None] | None,
) -> FileFacts:
    """What the file ``stored`` names is, read once per hash (``on_bytes`` told its size)."""
    facts = cache.get(stored.physical_hash)
    if facts is None:
        facts = cache[stored.physical_hash] = read_facts(root, stored.physical_hash)
        if on_bytes is not None:
            on_bytes(stored.size)
    return facts


def sorted_problems(problems: Sequence[Problem]) -> list[Problem]:
    """``refs/head`` first, then by block sequence number (stable otherwise)."""

    def key(p: Problem) -> int:
        if p.block is None:
            return -2
        return -1 if p.block.sequence_number is None else p.block.sequence_number

    return sorted(problems, key=key)
