"""Integrity verification of real datasets on disk, clean and after each kind of tampering."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from common.odf.events import AddData, ExecuteTransform
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import block_hash, decode_block, encode_block
from coordinator.dataset import Dataset
from coordinator.transform.runner import workspace_resolver
from coordinator.verify.integrity import verify_integrity
from coordinator.verify.report import Check, DatasetReport, Outcome, Problem
from coordinator.verify.verifier import Verifier
from tests.unit.coordinator.events import at
from tests.unit.verify.pipeline import Pipeline, build_pipeline


@pytest.fixture
def p(tmp_path: Path) -> Pipeline:
    return build_pipeline(tmp_path)


def verify(p: Pipeline, ds: Dataset) -> DatasetReport:
    return Verifier(workspace_resolver(p.ws), None).verify(ds)


def only(report: DatasetReport) -> Problem:
    assert len(report.problems) == 1, [str(x) for x in report.problems]
    return report.problems[0]


def flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x01
    path.write_bytes(bytes(data))


def data_file(ds: Dataset, block: Multihash) -> Path:
    event = ds.get_block(block).event
    assert isinstance(event, AddData | ExecuteTransform) and event.new_data is not None
    return ds.data_path(event.new_data.physical_hash)


def test_a_clean_pipeline_verifies(p: Pipeline) -> None:
    root, derived = verify(p, p.root), verify(p, p.derived)
    assert root.ok and derived.ok
    assert (root.kind, root.blocks, derived.blocks) == ("Root", 4, 5)
    assert [t.block.hash for t in root.transactions] == p.root_blocks[2:]
    assert [t.block.hash for t in derived.transactions] == p.derived_blocks[3:]
    assert {t.integrity for t in (*root.transactions, *derived.transactions)} == {Outcome.OK}
    assert {t.replay for t in root.transactions} == {Outcome.NOT_APPLICABLE}
    assert {t.replay for t in derived.transactions} == {Outcome.SKIPPED}
    assert derived.transactions[0].offsets is not None
    assert derived.transactions[0].offsets.end == 4


def test_a_changed_byte_in_a_data_file_names_its_block(p: Pipeline) -> None:
    path = data_file(p.root, p.root_blocks[3])
    flip_byte(path, path.stat().st_size // 2)
    report = verify(p, p.root)
    assert not report.ok
    assert {x.check for x in report.problems} == {Check.DATA}
    assert {x.block.hash for x in report.problems if x.block} == {p.root_blocks[3]}
    assert any("not to the physical hash the block records" in x.message for x in report.problems)
    assert report.problems[0].where == f"block 3 ({p.root_blocks[3]})"
    bad = report.transactions[1]
    assert (bad.integrity, report.transactions[0].integrity) == (Outcome.FAILED, Outcome.OK)


def test_a_rewritten_data_file_with_other_records_fails_the_logical_hash(p: Pipeline) -> None:
    import pyarrow.parquet as pq

    path = data_file(p.derived, p.derived_blocks[3])
    table = pq.read_table(path)
    pq.write_table(table.slice(0, 4), path)
    report = verify(p, p.derived)
    messages = [x.message for x in report.problems]
    assert all(x.block and x.block.hash == p.derived_blocks[3] for x in report.problems)
    assert any("has logical hash" in m and "its records differ" in m for m in messages)
    assert any("has 4 records, the block's offsets say 5" in m for m in messages)


def test_a_deleted_data_file_names_its_block(p: Pipeline) -> None:
    data_file(p.derived, p.derived_blocks[4]).unlink()
    problem = only(verify(p, p.derived))
    assert problem.check is Check.DATA
    assert problem.block is not None and problem.block.hash == p.derived_blocks[4]
    assert problem.block.sequence_number == 4
    assert problem.message.endswith("(offsets 5..9) is missing")


def test_a_changed_checkpoint_names_its_block(p: Pipeline) -> None:
    event = p.derived.get_block(p.derived_blocks[3]).event
    assert isinstance(event, ExecuteTransform)
    checkpoint = event.new_checkpoint
    assert checkpoint is not None
    path = p.derived.checkpoint_path(checkpoint.physical_hash)
    path.write_text(path.read_text().replace("0", "1"))
    problem = only(verify(p, p.derived))
    assert problem.check is Check.CHECKPOINT
    assert problem.block is not None and problem.block.hash == p.derived_blocks[3]
    assert "the file was modified" in problem.message


def test_a_missing_checkpoint_of_a_root_dataset(p: Pipeline) -> None:
    event = p.root.get_block(p.root_blocks[3]).event
    assert isinstance(event, AddData) and event.new_checkpoint is not None
    p.root.checkpoint_path(event.new_checkpoint.physical_hash).unlink()
    problem = only(verify(p, p.root))
    assert (problem.check, problem.block and problem.block.hash) == (
        Check.CHECKPOINT,
        p.root_blocks[3],
    )


def test_an_edited_block_names_it(p: Pipeline) -> None:
    """A semantic edit (another watermark), re-encoded and written under the old name."""
    name = p.root_blocks[2]
    path = p.root.layout.block_path(name)
    block = decode_block(path.read_bytes())
    assert isinstance(block.event, AddData)
    edited = replace(block, event=replace(block.event, new_watermark=at(0.5)))
    path.write_bytes(encode_block(edited))
    problem = only(verify(p, p.root))
    assert problem.check is Check.BLOCK
    assert problem.where == f"block 2 ({name})"
    assert "was modified" in problem.message


def test_a_flipped_byte_in_a_block_is_reported_even_when_it_breaks_decoding(p: Pipeline) -> None:
    name = p.derived_blocks[2]
    path = p.derived.layout.block_path(name)
    path.write_bytes(path.read_bytes()[:20])
    report = verify(p, p.derived)
    assert [x.check for x in report.problems] == [Check.BLOCK, Check.BLOCK]
    assert all(x.where == f"block 2 ({name})" for x in report.problems)
    assert "cannot be decoded" in report.problems[1].message
    assert report.blocks == 2  # the two blocks after it were read


def test_a_moved_back_head_names_the_hidden_block(p: Pipeline) -> None:
    p.root.layout.head_ref_path.write_text(p.root_blocks[2].to_multibase())
    problem = only(verify(p, p.root))
    assert problem.check is Check.HEAD and problem.where == "refs/head"
    assert f"names block 2 ({p.root_blocks[2]})" in problem.message
    assert f"block 3 ({p.root_blocks[3]}) in blocks/ follows it" in problem.message
    # The derivative that read the hidden block fails too, naming its transaction.
    derived = verify(p, p.derived)
    assert {x.check for x in derived.problems} == {Check.INPUT}
    assert {x.block.hash for x in derived.problems if x.block} == {p.derived_blocks[4]}
    assert "newBlockHash" in derived.problems[0].message


def test_a_head_moved_back_by_several_blocks_counts_them(p: Pipeline) -> None:
    p.root.layout.head_ref_path.write_text(p.root_blocks[1].to_multibase())
    problem = only(verify(p, p.root))
    assert "hiding 2 block(s) up to block 3" in problem.message


def test_a_head_swapped_with_another_datasets_head(p: Pipeline) -> None:
    p.derived.layout.head_ref_path.write_bytes(p.root.layout.head_ref_path.read_bytes())
    problem = only(verify(p, p.derived))
    assert problem.check is Check.HEAD
    assert problem.message == f"names block {p.root_blocks[3]}, which is not in blocks/"


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "is missing"), (b"zz-not-a-hash", "is not a multihash"), (b"\xff", "not ASCII")],
)
def test_an_unusable_head(p: Pipeline, content: bytes | None, message: str) -> None:
    head = p.root.layout.head_ref_path
    if content is None:
        head.unlink()
    else:
        head.write_bytes(content)
    problem = only(verify(p, p.root))
    assert problem.where == "refs/head" and message in problem.message


def test_a_consistent_forgery_that_breaks_a_chain_rule(p: Pipeline) -> None:
    """Blocks re-hashed and relinked, head updated: only the chain rules can tell."""
    ds = p.root
    blocks = [decode_block(ds.layout.block_path(h).read_bytes()) for h in p.root_blocks]
    last = blocks[3]
    assert isinstance(last.event, AddData)
    forged = replace(last, event=replace(last.event, prev_offset=3))
    data = encode_block(forged)
    name = block_hash(data)
    ds.layout.block_path(name).write_bytes(data)
    ds.layout.block_path(p.root_blocks[3]).unlink()
    ds.layout.head_ref_path.write_text(name.to_multibase())
    problem = only(verify(p, ds))
    assert problem.check is Check.CHAIN and problem.where == f"block 3 ({name})"
    assert "AddData.prevOffset: is 3, the last offset written is 4" in problem.message


def test_blocks_of_an_interrupted_commit_are_not_hidden_blocks(p: Pipeline) -> None:
    """A crashed commit wrote its block but not the head; its journal names the block."""
    ds = p.root
    ds.layout.head_ref_path.write_text(p.root_blocks[2].to_multibase())
    created = [f"blocks/{p.root_blocks[3]}"]
    ds.layout.journal_path.write_text(
        json.dumps({"new_head": p.root_blocks[3].to_multibase(), "created": created})
    )
    assert verify(p, ds).ok


def test_an_input_missing_from_the_workspace_makes_the_report_incomplete(p: Pipeline) -> None:
    # (``odf delete`` refuses to delete an input: the directory is moved away instead)
    p.root.layout.root.rename(p.ws.datasets_dir.parent / "elsewhere")
    report = verify(p, p.derived)
    assert report.ok and not report.complete  # nothing wrong was found; not all was checked
    assert [a.alias for a in report.absent_inputs] == ["root"]
    assert report.absent_inputs[0].dataset_id.startswith("did:odf:")


def test_integrity_alone_reads_no_input(p: Pipeline) -> None:
    result = verify_integrity(p.derived.layout)
    assert result.complete and not result.problems
    assert [b.name for b in result.blocks] == p.derived_blocks
    assert result.blocks[3].state_before.last_offset is None
    assert result.blocks[4].state_before.last_offset == 4


def test_a_consistent_forgery_with_other_columns_breaks_the_schema(p: Pipeline) -> None:
    """A data file with an extra column, its block rewritten with the file's hashes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.unit.verify.pipeline import data_slice

    ds = p.root
    name = p.root_blocks[3]
    block = ds.get_block(name)
    assert isinstance(block.event, AddData) and block.event.new_data is not None
    table = pq.read_table(ds.data_path(block.event.new_data.physical_hash))
    extra = ds.layout.data_dir / "forged"
    pq.write_table(table.append_column("secret", pa.array(["x"] * table.num_rows)), extra)
    new_data = data_slice(extra, 5, 5)
    extra.rename(ds.data_path(new_data.physical_hash))
    data = encode_block(replace(block, event=replace(block.event, new_data=new_data)))
    forged = block_hash(data)
    ds.layout.block_path(forged).write_bytes(data)
    ds.layout.block_path(name).unlink()
    ds.layout.head_ref_path.write_text(forged.to_multibase())
    problem = only(verify(p, ds))
    assert problem.check is Check.DATA and problem.where == f"block 3 ({forged})"
    assert "population: int64, secret: string), the dataset's schema (offset" in problem.message
