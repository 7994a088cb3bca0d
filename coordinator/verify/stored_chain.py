"""Reading a dataset's metadata chain exactly as stored, reporting every inconsistency.

Unlike ``coordinator.dataset.chain`` (which refuses a bad block), this walk goes on as long as
it can, so one verification names every damaged block: each block file is hashed as stored
(never re-encoded) and compared with its name, then decoded to follow its ``prevBlockHash``.
It also looks at the blocks in ``blocks/`` that the head does not reach: a block that
continues the chain after the head means ``refs/head`` was moved back to hide it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from common.odf.errors import DecodeError, ValidationError
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import block_hash, decode_block
from coordinator.dataset.chain import NamedBlock
from coordinator.dataset.layout import PENDING_PREFIX, DatasetLayout
from coordinator.verify.report import BlockRef, Check, Problem


@dataclass(frozen=True, slots=True)
class ReadBlock(NamedBlock):
    """A block reached from the head: its name (what links point at) and its decoded form."""

    @property
    def ref(self) -> BlockRef:
        return BlockRef(self.name, self.block.sequence_number)


@dataclass(frozen=True, slots=True)
class StoredChain:
    head: Multihash | None
    blocks: tuple[ReadBlock, ...]
    """The decodable blocks reached from the head, oldest first."""
    complete: bool
    """Whether the walk reached a block without ``prevBlockHash`` (the chain's start)."""
    problems: tuple[Problem, ...]


def read_head(layout: DatasetLayout) -> tuple[Multihash | None, Problem | None]:
    """The head block's hash, or why ``refs/head`` is unusable."""
    path = layout.head_ref_path
    try:
        text = path.read_bytes().decode("ascii").strip()
    except FileNotFoundError:
        return None, Problem(check=Check.HEAD, message="is missing: the dataset has no head")
    except UnicodeDecodeError:
        return None, Problem(check=Check.HEAD, message="is not ASCII text")
    try:
        return Multihash.from_multibase(text), None
    except (DecodeError, ValueError) as e:
        return None, Problem(check=Check.HEAD, message=f"is not a multihash: {e}")


def walk_chain(layout: DatasetLayout) -> StoredChain:
    """Every block reachable from ``refs/head``, each checked against its hash."""
    head, problem = read_head(layout)
    problems = [problem] if problem else []
    newest_first: list[ReadBlock] = []
    current, child = head, None
    complete = head is not None
    seen: set[Multihash] = set()
    while current is not None:
        if current in seen:
            problems.append(_chain_problem(child, f"prevBlockHash {current} makes a cycle"))
            complete = False
            break
        seen.add(current)
        read, found = _read_block(layout, current, child)
        problems += found
        if read is None:
            complete = False
            break
        newest_first.append(read)
        current, child = read.block.prev_block_hash, read
    return StoredChain(
        head=head,
        blocks=tuple(reversed(newest_first)),
        complete=complete,
        problems=tuple(problems),
    )


def _read_block(
    layout: DatasetLayout, name: Multihash, child: ReadBlock | None
) -> tuple[ReadBlock | None, list[Problem]]:
    """Read, hash and decode one block; ``child`` is the block that links to it."""
    try:
        data = layout.block_path(name).read_bytes()
    except FileNotFoundError:
        return None, [_chain_problem(child, f"names block {name}, which is not in blocks/")]
    problems = []
    actual = block_hash(data)
    expected_sequence = child.block.sequence_number - 1 if child else None
    try:
        block = decode_block(data)
    except ValidationError as e:
        ref = BlockRef(name, expected_sequence)
        if actual != name:
            problems.append(_modified(ref, actual))
        reason = f"cannot be decoded ({e}); the blocks before it cannot be checked"
        problems.append(Problem(check=Check.BLOCK, block=ref, message=reason))
        return None, problems
    read = ReadBlock(name, block)
    if actual != name:
        problems.append(_modified(read.ref, actual))
    return read, problems


def _modified(ref: BlockRef, actual: Multihash) -> Problem:
    return Problem(
        check=Check.BLOCK,
        block=ref,
        message=f"its bytes hash to {actual}, not to its name: the block file was modified",
    )


def _chain_problem(child: ReadBlock | None, message: str) -> Problem:
    if child is None:
        return Problem(check=Check.HEAD, message=message)
    return Problem(check=Check.CHAIN, block=child.ref, message=f"prevBlockHash {message}")


# --- blocks the head does not reach ------------------------------------------------------------


def hidden_blocks(layout: DatasetLayout, chain: StoredChain) -> list[Problem]:
    """Stored blocks that continue the chain but are not reachable from ``refs/head``.

    A commit writes its blocks before it moves the head, and an interrupted commit's blocks
    are named by its journal (and removed by the next commit), so outside of a journal no
    stored block may follow a reachable one without being reachable itself.
    """
    reachable = {b.name: b for b in chain.blocks}
    parents = _unreachable_blocks(layout, set(reachable) | _journal_blocks(layout))
    problems = []
    for fork, children in _hidden_by_fork(parents, reachable).items():
        at = reachable[fork]
        hidden = sorted(children, key=lambda b: b.block.sequence_number)
        first, last = hidden[0], hidden[-1]
        count = f"{len(hidden)} block(s) up to {last.ref}" if len(hidden) > 1 else "it"
        if fork == chain.head:
            message = (
                f"names {at.ref}, but {first.ref} in blocks/ follows it: the head was moved"
                f" back, hiding {count}"
            )
        else:
            message = (
                f"does not reach {first.ref}, which follows {at.ref} in blocks/: the head was"
                f" swapped to another branch, hiding {count}"
            )
        problems.append(Problem(check=Check.HEAD, message=message))
    return problems


def _unreachable_blocks(layout: DatasetLayout, known: set[Multihash]) -> dict[Multihash, ReadBlock]:
    """Decodable, correctly named stored blocks outside ``known``, by name."""
    found = {}
    for name in _stored_names(layout):
        if name in known:
            continue
        try:
            data = layout.block_path(name).read_bytes()
            if block_hash(data) != name:
                continue
            found[name] = ReadBlock(name, decode_block(data))
        except (OSError, ValidationError):
            continue
    return found


def _hidden_by_fork(
    unreachable: dict[Multihash, ReadBlock], reachable: dict[Multihash, ReadBlock]
) -> dict[Multihash, list[ReadBlock]]:
    """Unreachable blocks grouped by the reachable block their ancestry leads to."""
    groups: dict[Multihash, list[ReadBlock]] = {}
    for read in unreachable.values():
        parent, seen = read.block.prev_block_hash, {read.name}
        while parent in unreachable and parent not in seen:
            seen.add(parent)
            parent = unreachable[parent].block.prev_block_hash
        if parent is not None and parent in reachable:
            groups.setdefault(parent, []).append(read)
    return groups


def _stored_names(layout: DatasetLayout) -> Iterable[Multihash]:
    if not layout.blocks_dir.is_dir():
        return
    for path in layout.blocks_dir.iterdir():
        if path.name.startswith(PENDING_PREFIX) or not path.is_file():
            continue
        try:
            yield Multihash.from_multibase(path.name)
        except (DecodeError, ValueError):
            continue


def _journal_blocks(layout: DatasetLayout) -> set[Multihash]:
    """Blocks named by the commit journal of an in-flight (or interrupted) commit."""
    try:
        doc = json.loads(layout.journal_path.read_text(encoding="utf-8"))
        created = [str(p) for p in doc.get("created", [])]
    except (OSError, ValueError, AttributeError):
        return set()
    names = set()
    for rel in created:
        directory, _, name = rel.partition("/")
        if directory == layout.blocks_dir.name:
            try:
                names.add(Multihash.from_multibase(name))
            except (DecodeError, ValueError):
                continue
    return names
