"""Data and checkpoint files against what their block says about them.

Reading a file (``data_file_facts``, ``checkpoint_facts``) is separate from judging it
(``data_slice_problems``, ``checkpoint_problems``, pure): the facts of one file are computed
once even when several blocks name it.
"""

from __future__ import annotations

from pathlib import Path

from common.hashing import physical_hash_file
from common.hashing.data_file import FileFacts, inspect_data_file
from common.odf.fragments import Checkpoint, DataSlice
from common.odf.multihash import Multihash


def data_file_facts(root: Path, physical_hash: Multihash) -> FileFacts:
    """Size, physical hash, record count and logical hash of ``data/<physical_hash>``, from
    one read of the file, then its string columns' UTF-8 (``inspect_data_file``)."""
    rel = data_file_rel(physical_hash)
    path = root / rel
    if not path.is_file():
        return FileFacts(path=rel)
    return inspect_data_file(path, rel)


def data_file_rel(physical_hash: Multihash) -> str:
    """A data file's path relative to the dataset directory, as ``FileFacts.path`` names it."""
    return f"data/{physical_hash}"


def checkpoint_facts(root: Path, physical_hash: Multihash) -> FileFacts:
    """Size and physical hash of ``checkpoints/<physical_hash>``."""
    rel = f"checkpoints/{physical_hash}"
    return _raw_facts(root / rel, rel)


def _raw_facts(path: Path, rel: str) -> FileFacts:
    if not path.is_file():
        return FileFacts(path=rel)
    return FileFacts(path=rel, size=path.stat().st_size, physical_hash=physical_hash_file(path))


def data_slice_problems(
    expected: DataSlice, facts: FileFacts, schema: tuple[tuple[str, str], ...] | None
) -> list[str]:
    """How the stored data file differs from the block's ``newData`` and from the dataset's
    schema in effect at the block (``schema``, ``None``: unknown); empty when it does not."""
    o = expected.offset_interval
    what = f"data file {facts.path} (offsets {o.start}..{o.end})"
    if facts.size is None:
        return [f"{what} is missing"]
    problems = _raw_problems(what, expected.size, expected.physical_hash, facts)
    if facts.unreadable is not None:
        return [*problems, f"{what} cannot be read as Parquet: {facts.unreadable}"]
    if facts.logical_hash != expected.logical_hash:
        problems.append(_logical_mismatch(what, expected, facts))
    if facts.invalid_utf8 is not None:
        problems.append(f"{what} has invalid UTF-8 in string column {facts.invalid_utf8!r}")
    wanted = o.end - o.start + 1
    if facts.records is not None and facts.records != wanted:
        problems.append(f"{what} has {facts.records} records, the block's offsets say {wanted}")
    if schema is not None and facts.columns is not None and facts.columns != schema:
        problems.append(
            f"{what} has columns {_names(facts.columns)}, the dataset's schema {_names(schema)}"
        )
    return problems


def _logical_mismatch(what: str, expected: DataSlice, facts: FileFacts) -> str:
    mismatch = (
        f"{what} has logical hash {facts.logical_hash}, the block says {expected.logical_hash}"
    )
    if facts.physical_hash != expected.physical_hash:
        return f"{mismatch}: its records differ"
    same_file = f"{mismatch}, although it is the very file the block names (physical hash)"
    if facts.exposed_slots == 0:
        return f"{same_file}: the block's writer computed the logical hash of these records wrongly"
    return (
        f"{same_file}: {facts.exposed_slots} null slots of struct fields inside non-null rows"
        " hash as values, as the reference's arrow-digest does, holding what arrow-rs's Parquet"
        " reader leaves there (reproduced for 10,000-row batches); the block's writer hashed"
        " those slots otherwise (another reader or batch size, see docs/sharing.md)"
    )


def _names(columns: tuple[tuple[str, str], ...]) -> str:
    return "(" + ", ".join(f"{n}: {t}" for n, t in columns) + ")"


def checkpoint_problems(expected: Checkpoint, facts: FileFacts) -> list[str]:
    """How the stored checkpoint differs from the block's ``newCheckpoint``."""
    what = f"checkpoint {facts.path}"
    if facts.size is None:
        return [f"{what} is missing"]
    return _raw_problems(what, expected.size, expected.physical_hash, facts)


def _raw_problems(what: str, size: int, physical: Multihash, facts: FileFacts) -> list[str]:
    problems = []
    if facts.size != size:
        problems.append(f"{what} has {facts.size} bytes, the block says {size}")
    if facts.physical_hash != physical:
        problems.append(
            f"{what} hashes to {facts.physical_hash}, not to the physical hash the block"
            " records: the file was modified"
        )
    return problems
