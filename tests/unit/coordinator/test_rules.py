"""The metadata chain rules, applied to blocks built on a folded state (no disk)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pyarrow as pa
import pytest

from common.odf.block import MetadataBlock
from common.odf.events import (
    AddData,
    AddPushSource,
    ExecuteTransform,
    MetadataEvent,
    SetPollingSource,
    SetTransform,
    SetVocab,
)
from common.odf.fragments import (
    Checkpoint,
    DatasetKind,
    ExecuteTransformInput,
    FetchStepUrl,
    MergeStrategyAppend,
    ReadStepCsv,
    SqlQueryStep,
    TransformInput,
    TransformSql,
)
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from coordinator.dataset.commit import build_blocks
from coordinator.dataset.errors import AppendValidationError
from coordinator.dataset.rules import schema_change_problem, validate_append
from coordinator.dataset.state import DatasetState, next_system_time
from tests.unit.coordinator.events import (
    SCHEMA,
    at,
    seed,
    set_schema,
    slice_of,
    source_state,
    watermark_only,
)

PHYS = Multihash.sha3_256(b"data-1")
CKPT = Multihash.sha3_256(b"checkpoint-1")
INPUT = DatasetID.new_seeded(b"input1")


def chain(*events: MetadataEvent, time: datetime | None = None) -> DatasetState:
    _, state = build_blocks(DatasetState(), list(events), time or at(0))
    return state


def append(state: DatasetState, event: MetadataEvent, time: datetime | None = None) -> DatasetState:
    _, new = build_blocks(state, [event], time or at(1))
    return new


def root_with_schema() -> DatasetState:
    return chain(seed(), set_schema())


def rejects(state: DatasetState, event: MetadataEvent, match: str) -> None:
    with pytest.raises(AppendValidationError, match=match):
        append(state, event)


# --- links ---------------------------------------------------------------------------------


def test_first_block_must_be_a_seed() -> None:
    with pytest.raises(AppendValidationError, match="first block of a chain must be a Seed"):
        chain(set_schema())


def test_seed_only_once() -> None:
    rejects(chain(seed()), seed(b"other"), "Seed must be the first block")


def test_links_are_checked() -> None:
    state = chain(seed())
    good = MetadataBlock(
        system_time=at(1), prev_block_hash=state.head, sequence_number=1, event=SetVocab()
    )
    validate_append(state, good)
    with pytest.raises(AppendValidationError, match=r"MetadataBlock\.prevBlockHash"):
        validate_append(state, replace(good, prev_block_hash=PHYS))
    with pytest.raises(AppendValidationError, match=r"sequenceNumber: is 2, expected 1"):
        validate_append(state, replace(good, sequence_number=2))
    with pytest.raises(AppendValidationError, match=r"systemTime: .* is before the head"):
        validate_append(state, replace(good, system_time=at(-1)))


# --- data events ---------------------------------------------------------------------------


def test_data_needs_a_schema_first() -> None:
    state = chain(seed())
    rejects(
        state,
        AddData(new_data=slice_of(0, 9, PHYS, 100), new_watermark=at(0)),
        "SetDataSchema event must be present before adding data",
    )


def test_offsets_chain_through_prev_offset() -> None:
    state = append(root_with_schema(), AddData(new_data=slice_of(0, 9, PHYS, 100)))
    assert (state.last_offset, state.next_offset, state.num_records) == (9, 10, 10)
    rejects(state, AddData(prev_offset=8, new_data=slice_of(9, 12, PHYS, 1)), "prevOffset: is 8")
    rejects(state, AddData(new_data=slice_of(10, 12, PHYS, 1)), "prevOffset: is \\(none\\)")
    rejects(
        state,
        AddData(prev_offset=9, new_data=slice_of(11, 12, PHYS, 1)),
        r"offsetInterval.start: is 11, offsets must continue at 10",
    )
    rejects(
        state,
        AddData(prev_offset=9, new_data=slice_of(10, 9, PHYS, 1)),
        "end 9 is before start 10",
    )
    state = append(state, AddData(prev_offset=9, new_data=slice_of(10, 19, PHYS, 50)))
    assert state.last_offset == 19
    assert state.data_size == 150


def test_watermark_only_event_carries_the_offset() -> None:
    state = append(
        root_with_schema(), AddData(new_data=slice_of(0, 9, PHYS, 100), new_watermark=at(0))
    )
    state = append(state, watermark_only(9, at(3)))
    assert state.last_offset == 9
    assert state.last_watermark == at(3)
    rejects(state, watermark_only(9, at(2)), "goes back from the last watermark")
    rejects(
        state,
        AddData(prev_offset=9, new_source_state=source_state("x")),
        "newWatermark: is missing",
    )


def test_event_that_changes_nothing_is_refused() -> None:
    state = append(
        root_with_schema(), AddData(new_watermark=at(0), new_source_state=source_state("a"))
    )
    rejects(
        state, AddData(new_watermark=at(0), new_source_state=source_state("a")), "neither has data"
    )
    state = append(state, AddData(new_watermark=at(0), new_source_state=source_state("b")))
    assert state.source_state("default") == source_state("b")
    rejects(chain(seed()), AddData(), "neither has data")


def test_add_data_only_on_root_datasets() -> None:
    state = chain(seed(kind=DatasetKind.DERIVATIVE), set_schema())
    rejects(state, AddData(new_watermark=at(0)), "only Root datasets")


# --- schema evolution ------------------------------------------------------------------------


def test_schema_may_only_add_columns() -> None:
    state = root_with_schema()
    wider = SCHEMA.append(pa.field("area", pa.float64()))
    state = append(state, set_schema(wider))
    assert state.arrow_schema() == wider
    rejects(state, set_schema(SCHEMA), "column 'area' was removed")


@pytest.mark.parametrize(
    ("new", "message"),
    [
        (SCHEMA.remove(4), "column 'city' was removed or renamed"),
        (SCHEMA.set(5, pa.field("population", pa.int32())), "changed type from int64 to int32"),
        (SCHEMA.set(4, pa.field("city", pa.string(), nullable=False)), "became non-nullable"),
        (pa.schema([SCHEMA.field(1), SCHEMA.field(0), *list(SCHEMA)[2:]]), "was moved"),
    ],
)
def test_schema_change_problems(new: pa.Schema, message: str) -> None:
    problem = schema_change_problem(SCHEMA, new)
    assert problem is not None and message in problem


def test_schema_change_allows_added_and_relaxed_columns() -> None:
    relaxed = pa.schema([f.with_nullable(True) for f in SCHEMA]).insert(
        4, pa.field("x", pa.bool_())
    )
    assert schema_change_problem(SCHEMA, relaxed) is None


# --- sources ---------------------------------------------------------------------------------

CSV = ReadStepCsv(schema=("city STRING", "population BIGINT"))


def polling() -> SetPollingSource:
    return SetPollingSource(
        fetch=FetchStepUrl(url="http://example.org/a.csv"), read=CSV, merge=MergeStrategyAppend()
    )


def push(name: str = "default", read: ReadStepCsv = CSV) -> AddPushSource:
    return AddPushSource(source_name=name, read=read, merge=MergeStrategyAppend())


def test_push_and_polling_sources_exclude_each_other() -> None:
    with_push = chain(seed(), push())
    assert with_push.push_source() == push()
    rejects(with_push, polling(), "while push sources are still active")
    rejects(chain(seed(), polling()), push(), "while a polling source is still active")


def test_push_source_needs_a_read_schema() -> None:
    rejects(chain(seed()), push(read=ReadStepCsv()), r"AddPushSource.read.schema")


def test_preprocess_queries_must_be_normalized() -> None:
    bad = replace(polling(), preprocess=TransformSql(engine="spark", query="select 1"))
    rejects(chain(seed()), bad, r"preprocess.query: must be normalized")


# --- derivative datasets -----------------------------------------------------------------------


def set_transform(ref: str = INPUT.to_did(), alias: str | None = "input1") -> SetTransform:
    return SetTransform(
        inputs=(TransformInput(dataset_ref=ref, alias=alias),),
        transform=TransformSql(
            engine="spark", queries=(SqlQueryStep(query="select * from input1"),)
        ),
    )


def derivative() -> DatasetState:
    return chain(seed(b"deriv", DatasetKind.DERIVATIVE), set_transform(), set_schema())


def test_transform_inputs_must_be_resolved() -> None:
    state = chain(seed(b"deriv", DatasetKind.DERIVATIVE))
    rejects(state, set_transform(ref="input1"), r"inputs\[0\].datasetRef: must be resolved")
    rejects(state, set_transform(alias=None), r"inputs\[0\].alias: must be set")
    rejects(chain(seed()), set_transform(), "only Derivative datasets")


def execute(
    in_prev_block: Multihash | None,
    in_new_block: Multihash | None,
    in_prev_offset: int | None,
    in_new_offset: int | None,
    /,
    **fields: object,
) -> ExecuteTransform:
    entry = ExecuteTransformInput(
        dataset_id=INPUT,
        prev_block_hash=in_prev_block,
        new_block_hash=in_new_block,
        prev_offset=in_prev_offset,
        new_offset=in_new_offset,
    )
    return ExecuteTransform(query_inputs=(entry,), **fields)  # type: ignore[arg-type]


B1, B2 = Multihash.sha3_256(b"b1"), Multihash.sha3_256(b"b2")


def test_execute_transform_input_and_checkpoint_chaining() -> None:
    first = execute(
        None,
        B1,
        None,
        9,
        new_data=slice_of(0, 4, PHYS, 10),
        new_checkpoint=Checkpoint(physical_hash=CKPT, size=3),
        new_watermark=at(0),
    )
    state = append(derivative(), first)
    assert state.last_checkpoint == CKPT
    progress = state.input_progress(INPUT)
    assert progress is not None and progress.new_offset == 9
    # Next transaction: prev = last new; checkpoint carried.
    rejects(
        state,
        execute(None, B2, 9, 12, prev_offset=4, prev_checkpoint=CKPT, new_watermark=at(1)),
        r"queryInputs\[0\].prevBlockHash",
    )
    rejects(
        state,
        execute(B1, B2, 8, 12, prev_offset=4, prev_checkpoint=CKPT, new_watermark=at(1)),
        r"queryInputs\[0\].prevOffset: is 8",
    )
    rejects(
        state,
        execute(B1, B2, 9, 12, prev_offset=4, new_watermark=at(1)),
        "prevCheckpoint: is \\(none\\)",
    )
    rejects(
        state,
        execute(B1, B1, 9, None, prev_offset=4, prev_checkpoint=CKPT, new_watermark=at(1)),
        "empty block interval",
    )
    ok = execute(B1, B2, 9, None, prev_offset=4, prev_checkpoint=CKPT, new_watermark=at(1))
    state = append(state, ok)
    assert state.last_watermark == at(1)
    assert state.last_checkpoint is None  # the last data event wrote no checkpoint


def test_execute_transform_needs_set_transform() -> None:
    state = chain(seed(b"deriv", DatasetKind.DERIVATIVE), set_schema())
    rejects(state, execute(None, B1, None, None, new_watermark=at(0)), "preceded by a SetTransform")


def test_the_next_system_time_never_goes_before_the_head() -> None:
    state = chain(seed(), time=at(10))
    assert next_system_time(state, at(20)) == at(20)
    assert next_system_time(state, at(5)) == at(10)  # the clock stepped back
    assert next_system_time(DatasetState(), at(5)) == at(5)
    assert next_system_time(state) >= at(10)
