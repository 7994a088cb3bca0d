"""The pure pieces of replay: rebuilding what a transaction read, comparing its result."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from common.odf.events import ExecuteTransform, SetDataSchema
from common.odf.fragments import ExecuteTransformInput, OffsetInterval, Watermark
from common.odf.multihash import ARROW0_SHA3_256, Multihash
from coordinator.dataset import CommitItem
from coordinator.transform.errors import RecordedInputError
from coordinator.transform.migration import is_migration
from coordinator.transform.recorded import InputHistory, recorded_input_plan
from coordinator.transform.transaction import event_differences
from coordinator.verify.input_history import load_input_history
from tests.unit.coordinator.events import at, set_schema
from tests.unit.verify.pipeline import Pipeline, build_pipeline


@pytest.fixture
def p(tmp_path: Path) -> Pipeline:
    return build_pipeline(tmp_path)


def root_history(p: Pipeline) -> InputHistory:
    history = load_input_history(p.root)
    assert isinstance(history, InputHistory)
    return history


def recorded_entry(p: Pipeline, index: int) -> ExecuteTransformInput:
    event = p.derived.get_block(p.derived_blocks[index]).event
    assert isinstance(event, ExecuteTransform)
    return event.query_inputs[0]


def test_the_input_side_of_a_recorded_transaction(p: Pipeline) -> None:
    plan = recorded_input_plan(recorded_entry(p, 4), "root", root_history(p))
    added = p.root.get_block(p.root_blocks[3]).event
    assert not isinstance(added, SetDataSchema) and added.new_data is not None
    assert [f.physical_hash for f in plan.files] == [added.new_data.physical_hash]
    assert plan.offset_interval == OffsetInterval(start=5, end=9)
    assert plan.explicit_watermarks == (Watermark(system_time=at(2), event_time=at(2)),)
    assert plan.schema == set_schema().schema
    assert (plan.query_alias, plan.dataset_alias) == ("root", "root")


def test_an_input_at_rest_and_an_input_not_read_yet(p: Pipeline) -> None:
    history = root_history(p)
    at_rest = ExecuteTransformInput(
        dataset_id=p.root.id, prev_block_hash=p.root_blocks[3], prev_offset=9
    )
    plan = recorded_input_plan(at_rest, "root", history)
    assert (plan.files, plan.explicit_watermarks, plan.offset_interval) == ((), (), None)
    unread = recorded_input_plan(ExecuteTransformInput(dataset_id=p.root.id), "r", history)
    assert unread.schema == set_schema().schema and unread.files == ()


def test_an_input_block_that_is_no_longer_in_the_chain(p: Pipeline) -> None:
    p.root.layout.head_ref_path.write_text(p.root_blocks[2].to_multibase())
    with pytest.raises(RecordedInputError, match=r"newBlockHash f1620\w+ is not in its chain"):
        recorded_input_plan(recorded_entry(p, 4), "root", root_history(p))


def test_a_damaged_input_is_not_used(p: Pipeline) -> None:
    p.root.layout.block_path(p.root_blocks[1]).write_bytes(b"garbage" * 4)
    reason = load_input_history(p.root)
    assert isinstance(reason, str) and reason.startswith("input 'root' is damaged: block 1")


def stored_event(p: Pipeline) -> ExecuteTransform:
    event = p.derived.get_block(p.derived_blocks[4]).event
    assert isinstance(event, ExecuteTransform)
    return event


def test_physical_hash_size_and_checkpoint_are_not_compared(p: Pipeline) -> None:
    stored = stored_event(p)
    assert stored.new_data is not None
    replayed = replace(
        stored,
        new_data=replace(stored.new_data, physical_hash=Multihash.sha3_256(b"x"), size=1),
        new_checkpoint=None,
    )
    assert event_differences(stored, [CommitItem(replayed)]) == []


def test_every_compared_field_is_named(p: Pipeline) -> None:
    stored = stored_event(p)
    assert stored.new_data is not None
    other = Multihash(ARROW0_SHA3_256, b"\x01" * 32)
    replayed = replace(
        stored,
        new_data=replace(
            stored.new_data, logical_hash=other, offset_interval=OffsetInterval(start=5, end=8)
        ),
        new_watermark=at(9),
    )
    found = event_differences(stored, [CommitItem(set_schema()), CommitItem(replayed)])
    assert [f.split(":")[0] for f in found] == [
        "output schema",
        "newData.offsetInterval",
        "newData.logicalHash",
        "newWatermark",
    ]
    assert "the block has 5..9, the replay 5..8" in found[1]
    assert str(other) in found[2]
    none = replace(stored, new_data=None)
    assert event_differences(stored, [CommitItem(none)]) == [
        "newData: the block has offsets 5..9, the replay no records"
    ]


def test_a_migration_reads_no_new_input_blocks(p: Pipeline) -> None:
    stored = stored_event(p)
    transform = p.derived.state().transform
    assert transform is not None
    assert not is_migration(stored, transform.transform)
    at_rest = replace(
        stored,
        query_inputs=(replace(stored.query_inputs[0], new_block_hash=None, new_offset=None),),
    )
    assert is_migration(at_rest, transform.transform)
    assert not is_migration(at_rest, None)
