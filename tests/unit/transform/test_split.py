"""Split transactions: the engine's slices checked before anything is committed (hostile
answers refused with the slice and field named), and the K events each reading exactly the
input records of its slice."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.hashing import digest_data_file
from common.odf import engine_protocol as ep
from common.odf.events import AddData, ExecuteTransform, SetTransform
from common.odf.fragments import (
    DatasetKind,
    DatasetVocabulary,
    OffsetInterval,
    SqlQueryStep,
    TransformInput,
    TransformSql,
)
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from common.serde.arrow_schema import encode_arrow_schema
from coordinator.dataset import Dataset
from coordinator.engine.errors import EngineContractError
from coordinator.transform.plan import DataFileRef, InputPlan, TransformPlan
from coordinator.transform.recorded import InputHistory, recorded_input_plan
from coordinator.transform.runner import workspace_resolver
from coordinator.transform.split import (
    check_slices,
    event_time_range,
    sample_size,
    slice_events,
    split_items,
)
from coordinator.verify.input_history import load_input_history
from coordinator.verify.verifier import Verifier
from tests.unit.coordinator.events import at, seed, set_schema
from tests.unit.coordinator.events import write_slice as write_events_slice
from tests.unit.verify.pipeline import QUERY, Pipeline, build_pipeline

SCHEMA = pa.schema(
    [("offset", pa.int64()), ("event_time", pa.timestamp("ms", tz="UTC")), ("v", pa.int64())]
)
INPUT = DatasetID.new_seeded(b"split-input")
T = datetime(2026, 1, 1, tzinfo=UTC)


def h(name: str) -> Multihash:
    return Multihash.sha3_256(name.encode())


def plan(prev_offset: int | None = 99) -> TransformPlan:
    """An input of three blocks, offsets 0..49, 50..89 and 90..119, after 10 output records."""
    blocks = (("b1", 0, 49), ("b2", 50, 89), ("b3", 90, 119))
    return TransformPlan(
        expected_head=h("head"),
        system_time=T,
        transform=TransformSql(engine="spark", query="select * from i"),
        vocab=DatasetVocabulary(),
        prev_offset=9,
        prev_checkpoint=None,
        prev_watermark=None,
        output_schema=encode_arrow_schema(SCHEMA),
        inputs=(
            InputPlan(
                dataset_id=INPUT,
                dataset_alias="input",
                query_alias="i",
                vocab=DatasetVocabulary(),
                prev_block_hash=h("b0"),
                new_block_hash=h("b4"),  # a watermark-only block after the data
                prev_offset=None,
                new_offset=119,
                files=tuple(
                    DataFileRef(
                        physical_hash=h("f" + b),
                        file_interval=OffsetInterval(start=s, end=e),
                        block=h(b),
                    )
                    for b, s, e in blocks
                ),
                explicit_watermarks=(),
                schema=encode_arrow_schema(SCHEMA),
            ),
        ),
    )


def write_slice(
    directory: Path, n: int, first: int, count: int, input_first: int, input_count: int
) -> ep.SplitSlice:
    path = directory / f"slice-{n}.parquet"
    offsets = list(range(first, first + count))
    times = [T + timedelta(minutes=o) for o in offsets]
    pq.write_table(
        pa.table({"offset": offsets, "event_time": times, "v": [n] * count}, schema=SCHEMA),
        path,
    )
    d = digest_data_file(path)
    return ep.SplitSlice(
        data_path=str(path),
        offset_interval=OffsetInterval(start=first, end=first + count - 1),
        inputs=(
            ep.SplitSliceInput(
                query_alias="i",
                offset_interval=OffsetInterval(
                    start=input_first, end=input_first + input_count - 1
                ),
            ),
        ),
        physical_hash=d.physical_hash.to_multibase(),
        logical_hash=d.logical_hash.to_multibase(),
        size=d.size,
        num_records=count,
        min_event_time=times[0],
        max_event_time=times[-1],
    )


def reading(s: ep.SplitSlice, start: int, end: int) -> ep.SplitSlice:
    """``s`` claiming to have read input offsets ``start..end``."""
    interval = OffsetInterval(start=start, end=end)
    return replace(s, inputs=(ep.SplitSliceInput(query_alias="i", offset_interval=interval),))


@pytest.fixture
def slices(tmp_path: Path) -> list[ep.SplitSlice]:
    """Three slices, one per input block: inputs 0..49, 50..89, 90..119."""
    return [
        write_slice(tmp_path, 0, 10, 50, 0, 50),
        write_slice(tmp_path, 1, 60, 40, 50, 40),
        replace(write_slice(tmp_path, 2, 100, 30, 90, 30), new_watermark=T),
    ]


def check(slices: list[ep.SplitSlice], directory: Path, rehash: float = 1.0) -> list:  # type: ignore[type-arg]
    return check_slices(
        ep.SplitTransformResponseSuccess(slices=tuple(slices)),
        plan(),
        directory,
        rehash=rehash,
        schema=encode_arrow_schema(SCHEMA),
        rng=random.Random(1),
    )


def test_good_slices_become_events_that_each_read_their_own_records(
    slices: list[ep.SplitSlice], tmp_path: Path
) -> None:
    events = slice_events(plan(), check(slices, tmp_path))
    assert [e.prev_offset for e in events] == [9, 59, 99]
    assert [e.new_data.offset_interval.end for e in events if e.new_data] == [59, 99, 129]
    entries = [e.query_inputs[0] for e in events]
    # Each names the blocks it read whole; the last ends where the plan ends.
    assert [(x.prev_block_hash, x.new_block_hash) for x in entries] == [
        (h("b0"), h("b1")),
        (h("b1"), h("b2")),
        (h("b2"), h("b4")),
    ]
    assert [(x.prev_offset, x.new_offset) for x in entries] == [(None, 49), (49, 89), (89, 119)]
    assert [e.new_watermark for e in events] == [None, None, T]


def test_the_slices_event_times_are_checked_and_give_the_transactions_range(
    slices: list[ep.SplitSlice], tmp_path: Path
) -> None:
    checked = check(slices, tmp_path)
    assert [c.event_times for c in checked] == [
        (T + timedelta(minutes=10), T + timedelta(minutes=59)),
        (T + timedelta(minutes=60), T + timedelta(minutes=99)),
        (T + timedelta(minutes=100), T + timedelta(minutes=129)),
    ]
    assert event_time_range(checked) == (T + timedelta(minutes=10), T + timedelta(minutes=129))
    # An engine that does not say (an older one): accepted, the range unknown.
    quiet = check([replace(s, min_event_time=None, max_event_time=None) for s in slices], tmp_path)
    assert [c.event_times for c in quiet] == [None, None, None]
    assert event_time_range(quiet) is None
    # Bounds found wrong by the re-hash of a sampled file refuse it; unsampled, they stand.
    late = [
        s if n != 1 else replace(s, max_event_time=T + timedelta(days=9))
        for n, s in enumerate(slices)
    ]
    with pytest.raises(EngineContractError, match="slice 2 of 3: event times"):
        check(late, tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s, d: [s[0], s[2]], "slice 2 of 2: offsetInterval 100..129 does not start at"),
        (
            lambda s, d: [
                s[0],
                replace(s[1], offset_interval=OffsetInterval(start=59, end=98)),
                s[2],
            ],
            "slice 2 of 3: offsetInterval 59..98 does not start at the next offset 60",
        ),
        (
            lambda s, d: [s[0], s[1]],
            "input 'i': the slices consumed its records up to offset 89, the transaction"
            " planned up to 119",
        ),
        (
            lambda s, d: [s[0], reading(s[1], 40, 89), s[2]],
            "slice 2 of 3: input 'i' offsetInterval 40..89 does not continue at offset 50",
        ),
        (
            lambda s, d: [reading(s[0], 0, 48), reading(s[1], 49, 89), s[2]],
            "slice 1 of 3: input 'i' offsetInterval 0..48 ends inside an input block",
        ),
        (
            lambda s, d: [s[0], replace(s[1], data_path="/etc/hostname"), s[2]],
            "slice 2 of 3: dataPath '/etc/hostname' is outside the slices directory",
        ),
        (
            lambda s, d: [s[0], replace(s[1], size=s[1].size + 1), s[2]],
            "slice 2 of 3: size",
        ),
        (
            lambda s, d: [s[0], replace(s[1], logical_hash=s[0].logical_hash), s[2]],
            "slice 2 of 3: logicalHash",
        ),
        (
            lambda s, d: [s[0], replace(s[1], physical_hash=s[0].physical_hash), s[2]],
            "slice 2 of 3: physicalHash",
        ),
        (
            lambda s, d: [replace(s[0], new_watermark=datetime(2027, 1, 1, tzinfo=UTC)), *s[1:]],
            "slice 1 of 3: newWatermark 2027-01-01T00:00:00+00:00 is beyond the last slice's",
        ),
        (
            lambda s, d: [s[0], replace(s[1], num_records=39), s[2]],
            "slice 2 of 3: numRecords 39 does not match offsetInterval 60..99",
        ),
        (
            lambda s, d: [s[0], replace(s[1], max_event_time=None), s[2]],
            "slice 2 of 3: minEventTime 2026-01-01T01:00:00+00:00 and maxEventTime none are"
            " not the bounds of a slice with records",
        ),
        (
            lambda s, d: [s[0], replace(s[1], min_event_time=s[1].max_event_time), s[2]],
            "slice 2 of 3: event times 2026-01-01T01:39:00+00:00..2026-01-01T01:39:00+00:00,"
            " its records have 2026-01-01T01:00:00+00:00..2026-01-01T01:39:00+00:00",
        ),
    ],
)
def test_hostile_slices_are_refused_naming_the_slice_and_field(
    slices: list[ep.SplitSlice], tmp_path: Path, change: object, message: str
) -> None:
    with pytest.raises(EngineContractError, match=re.escape(message)):
        check(change(slices, tmp_path), tmp_path)  # type: ignore[operator]


def test_a_symlink_out_of_the_slices_directory_is_refused(
    slices: list[ep.SplitSlice], tmp_path: Path
) -> None:
    inside = tmp_path / "staging"
    inside.mkdir()
    link = inside / "slice.parquet"
    link.symlink_to(Path(slices[0].data_path or ""))
    with pytest.raises(EngineContractError, match=r"slice 1 of 3: dataPath .* is outside"):
        check([replace(slices[0], data_path=str(link)), *slices[1:]], inside)


def test_a_sampled_rehash_checks_a_subset_chosen_here(
    slices: list[ep.SplitSlice], tmp_path: Path
) -> None:
    assert [sample_size(n, 0.05) for n in (0, 1, 20, 21, 100)] == [0, 1, 1, 2, 5]
    assert sample_size(7, 1.0) == 7
    # A wrong hash is found by a full re-hash, and by some sampled ones but not others.
    bad = [
        s if n != 1 else replace(s, logical_hash=slices[0].logical_hash)
        for n, s in enumerate(slices)
    ]
    with pytest.raises(EngineContractError):
        check(bad, tmp_path, rehash=1.0)
    outcomes = set()
    for n in range(12):
        try:
            check_slices(
                ep.SplitTransformResponseSuccess(slices=tuple(bad)),
                plan(),
                tmp_path,
                rehash=0.3,
                schema=encode_arrow_schema(SCHEMA),
                rng=random.Random(n),
            )
            outcomes.add("accepted")
        except EngineContractError:
            outcomes.add("refused")
    assert outcomes == {"accepted", "refused"}


def test_a_slice_with_other_columns_is_refused(slices: list[ep.SplitSlice], tmp_path: Path) -> None:
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"offset": list(range(60, 100)), "w": ["x"] * 40}), other)
    d = digest_data_file(other)
    odd = replace(
        slices[1],
        data_path=str(other),
        size=d.size,
        physical_hash=d.physical_hash.to_multibase(),
        logical_hash=d.logical_hash.to_multibase(),
    )
    with pytest.raises(EngineContractError, match="slice 2 of 3: its columns differ"):
        check([slices[0], odd, slices[2]], tmp_path)


def test_k_blocks_commit_with_one_head_move_and_each_reads_its_own_input_records(
    tmp_path: Path,
) -> None:
    """On a real workspace: two slices over an input of two blocks (0..4, 5..9) committed
    together (one head move); integrity and input links verify, and each block's recorded
    inputs read back exactly the records its slice consumed."""
    p = build_pipeline(tmp_path)
    derived = Dataset(p.ws.datasets_dir / "split")
    transform = SetTransform(
        inputs=(TransformInput(dataset_ref=p.root.id.to_did(), alias="root"),),
        transform=TransformSql(engine="spark", queries=(SqlQueryStep(query=QUERY),)),
    )
    head = derived.commit_events(
        [seed(b"split", DatasetKind.DERIVATIVE), transform, set_schema()],
        expected_head=None,
        system_time=at(0),
    )[-1]
    b2, b3 = p.root_blocks[2], p.root_blocks[3]
    root_plan = InputPlan(
        dataset_id=p.root.id,
        dataset_alias="root",
        query_alias="root",
        vocab=DatasetVocabulary(),
        prev_block_hash=None,
        new_block_hash=b3,
        prev_offset=None,
        new_offset=9,
        files=tuple(
            DataFileRef(physical_hash=h, file_interval=OffsetInterval(start=s, end=s + 4), block=b)
            for b, s, h in ((b2, 0, _file(p, b2)), (b3, 5, _file(p, b3)))
        ),
        explicit_watermarks=(),
        schema=set_schema().schema,
    )
    split_plan = TransformPlan(
        expected_head=head,
        system_time=at(3),
        transform=transform.transform,
        vocab=DatasetVocabulary(),
        prev_offset=None,
        prev_checkpoint=None,
        prev_watermark=None,
        output_schema=set_schema().schema,
        inputs=(root_plan,),
    )

    def slices_of(staging: Path, bounds: tuple[tuple[int, int], ...]) -> list[ep.SplitSlice]:
        found = []
        for n, (start, count) in enumerate(bounds):
            path = write_events_slice(staging, start, count, name=f"slice-{n}")
            d = digest_data_file(path)
            found.append(
                ep.SplitSlice(
                    data_path=str(path),
                    offset_interval=OffsetInterval(start=start, end=start + count - 1),
                    inputs=(
                        ep.SplitSliceInput(
                            query_alias="root",
                            offset_interval=OffsetInterval(start=start, end=start + count - 1),
                        ),
                    ),
                    new_watermark=at(2) if n == len(bounds) - 1 else None,
                    physical_hash=d.physical_hash.to_multibase(),
                    logical_hash=d.logical_hash.to_multibase(),
                    size=d.size,
                    num_records=count,
                )
            )
        return found

    with derived.staging_dir() as staging:
        # A slice ending inside an input block could not be named by its queryInputs.
        with pytest.raises(EngineContractError, match="ends inside an input block"):
            check_slices(
                ep.SplitTransformResponseSuccess(
                    slices=tuple(slices_of(staging, ((0, 3), (3, 7))))
                ),
                split_plan,
                staging,
                rehash=1.0,
                schema=split_plan.output_schema,
            )
        slices = slices_of(staging, ((0, 5), (5, 5)))
        checked = check_slices(
            ep.SplitTransformResponseSuccess(slices=tuple(slices)),
            split_plan,
            staging,
            rehash=0.05,
            schema=split_plan.output_schema,
        )
        items = split_items(split_plan, checked, [c.data_file for c in checked])
        hashes = derived.commit_events(items, expected_head=head, system_time=at(3))
    assert len(hashes) == 2 and derived.state().head == hashes[-1]
    assert derived.state().last_offset == 9 and derived.state().last_watermark == at(2)
    report = Verifier(workspace_resolver(p.ws), None).verify(derived)
    assert report.problems == ()
    history = root_history_of(p.root)
    read = []
    for block in hashes:
        event = derived.get_block(block).event
        assert isinstance(event, ExecuteTransform)
        plan_read = recorded_input_plan(event.query_inputs[0], "root", history)
        read.append((plan_read.offset_interval, len(plan_read.files)))
    assert read == [(OffsetInterval(start=0, end=4), 1), (OffsetInterval(start=5, end=9), 1)]


def _file(p: Pipeline, block: Multihash) -> Multihash:
    event = p.root.get_block(block).event
    assert isinstance(event, AddData) and event.new_data is not None
    return event.new_data.physical_hash


def root_history_of(dataset: Dataset) -> InputHistory:
    history = load_input_history(dataset)
    assert isinstance(history, InputHistory)
    return history
