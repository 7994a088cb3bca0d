"""A dataset directory written by another ODF coordinator opens and grows unchanged."""

from __future__ import annotations

import hashlib
from pathlib import Path

from common.odf.block import MetadataBlock
from common.odf.events import MetadataEvent, SetInfo
from common.serde.flatbuffers_codec import block_hash, encode_block
from coordinator.dataset import Dataset
from tests.unit.coordinator.events import at, seed, set_schema, watermark_only

KAMU_SUMMARY = b"kind: DatasetSummary\nversion: 1\ncontent: {}\n"


def write_foreign(root: Path, events: list[MetadataEvent]) -> list[str]:
    """The reference coordinator's layout: blocks/<multihash>, refs/head without newline, info/."""
    for d in ("blocks", "refs", "data", "checkpoints", "info"):
        (root / d).mkdir(parents=True)
    prev = None
    names = []
    for i, event in enumerate(events):
        block = MetadataBlock(
            system_time=at(i), prev_block_hash=prev, sequence_number=i, event=event
        )
        data = encode_block(block, version=3 if i % 2 else 2)  # both layouts exist in the wild
        prev = block_hash(data)
        (root / "blocks" / prev.to_multibase()).write_bytes(data)
        names.append(prev.to_multibase())
    (root / "refs" / "head").write_text(names[-1])
    (root / "info" / "summary").write_bytes(KAMU_SUMMARY)
    return names


def digest_tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and ".coordinator" not in p.parts
    }


def test_foreign_dataset_opens_and_grows_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "kamu-dataset"
    names = write_foreign(root, [seed(), set_schema(), SetInfo(description="from kamu")])
    before = digest_tree(root)
    ds = Dataset(root)
    state = ds.state()
    assert str(state.head) == names[-1]
    assert state.id == seed().dataset_id and state.schema == set_schema()
    assert [str(h) for h, _ in ds.iter_blocks()] == list(reversed(names))
    assert digest_tree(root) == before  # reading changes nothing of the dataset
    ds.commit(watermark_only(None, at(5)), expected_head=ds.head())
    after = digest_tree(root)
    changed = {k for k in before if after.get(k) != before[k]}
    assert changed == {"refs/head"}
    assert len(set(after) - set(before)) == 1  # the new block
