"""What verification found: problems, one result per transaction, one report per dataset.

A ``Problem`` names where it is (``refs/head`` or a block by sequence number and hash), which
check found it and what differs. A ``TransactionResult`` is one row of the report: a data
block (``AddData``/``ExecuteTransform``) with the outcome of its integrity checks and of its
replay. Problems that belong to no transaction (the head, a block that is not a data event)
are kept in the dataset report only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from common.odf.fragments import OffsetInterval
from common.odf.multihash import Multihash

HEAD_REF = "refs/head"


class Check(enum.Enum):
    """Which verification step found a problem."""

    HEAD = "head"
    """``refs/head``: present, a multihash, naming a stored block, not moved back."""
    BLOCK = "block"
    """A block file: its bytes hash to its name, it decodes."""
    CHAIN = "chain"
    """Links, sequence numbers and the chain rules."""
    DATA = "data"
    """A data file: present, size, physical and logical hash, record count."""
    CHECKPOINT = "checkpoint"
    """A checkpoint file: present, size, physical hash."""
    INPUT = "input"
    """An ``ExecuteTransform``'s references into its inputs' chains."""
    REPLAY = "replay"
    """Running the transaction again gives the recorded result."""


class Outcome(enum.Enum):
    OK = "ok"
    FAILED = "FAILED"
    SKIPPED = "skipped"
    """Not run (``--integrity``)."""
    NOT_APPLICABLE = "-"
    """Replay of a root dataset's ``AddData``: there is nothing to re-run."""
    INPUTS_ABSENT = "inputs absent"
    """Not replayed: an input of the dataset is not in the workspace."""


@dataclass(frozen=True, slots=True)
class BlockRef:
    """A block by its hash (its name in ``blocks/``) and, once decoded, its sequence number."""

    hash: Multihash
    sequence_number: int | None = None

    def __str__(self) -> str:
        if self.sequence_number is None:
            return f"block {self.hash}"
        return f"block {self.sequence_number} ({self.hash})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    check: Check
    message: str
    block: BlockRef | None = None
    """The block at fault; ``None`` for ``refs/head``."""

    @property
    def where(self) -> str:
        return str(self.block) if self.block is not None else HEAD_REF

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionResult:
    """One data block of the chain and what its checks found."""

    block: BlockRef
    event: str
    """``AddData`` or ``ExecuteTransform``."""
    offsets: OffsetInterval | None
    integrity: Outcome
    replay: Outcome
    problems: tuple[Problem, ...] = ()
    engine: str | None = None
    """The engine the transaction was replayed with (provider and pinned version)."""

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, slots=True)
class AbsentInput:
    """An input the chain declares that is not in the workspace (a clone pulled alone)."""

    alias: str
    """The name the query reads it by."""
    dataset_id: str
    """Its did:odf."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetReport:
    dataset: str
    kind: str | None
    head: Multihash | None
    blocks: int
    """Blocks reachable from the head (and decodable)."""
    transactions: tuple[TransactionResult, ...]
    problems: tuple[Problem, ...]
    """Every problem found, including those of ``transactions``, in chain order."""
    replayed: bool
    """Whether replay was run (not ``--integrity``, derivative dataset)."""
    absent_inputs: tuple[AbsentInput, ...] = ()
    """Inputs not in the workspace: their links were not checked, nothing was replayed."""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def complete(self) -> bool:
        """Every check could run (no input was absent)."""
        return not self.absent_inputs
