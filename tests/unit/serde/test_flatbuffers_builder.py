"""The fast builder against the PyPI ``flatbuffers.Builder``: identical bytes, always."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import flatbuffers
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.odf import engine_protocol as ep
from common.odf import unions
from common.odf.block import MetadataBlock
from common.odf.events import AddData, ExecuteTransform, SetDataSchema
from common.odf.fragments import Checkpoint, DataSlice, ExecuteTransformInput, OffsetInterval
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from common.serde import fb_roots, fb_writer
from common.serde.flatbuffers_codec import encode_block, encode_block_reference
from tests.support import strategies as ods

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NOON = datetime(2020, 1, 1, 12, tzinfo=UTC)


def test_reference_builder_has_the_vtable_dedup_fix() -> None:
    """flatbuffers < 25.12.19 shares vtables that differ only in object size (#8653)."""
    version = tuple(int(x) for x in flatbuffers.__version__.split(".")[:3])
    assert version >= (25, 12, 19)


@pytest.mark.parametrize("version", [2, 3])
@SETTINGS
@given(block=ods.metadata_blocks())
def test_blocks_are_identical(block: MetadataBlock, version: int) -> None:
    assert encode_block(block, version=version) == encode_block_reference(block, version=version)


MESSAGE_TYPES: list[Any] = [
    ep.TransformRequest,
    ep.RawQueryRequest,
    ep.ValidateQueryRequest,
    ep.MigrateQueryRequest,
    ep.QueryRequest,
    fb_roots.TransformResponseRoot,
    fb_roots.RawQueryResponseRoot,
    fb_roots.ValidateQueryResponseRoot,
    fb_roots.MigrateQueryResponseRoot,
    fb_roots.QueryResponseRoot,
]


def _both(obj: Any, ts_align: int = 1) -> tuple[bytes, bytes]:
    out = []
    for new in (fb_writer.new_builder, fb_writer.new_reference_builder):
        builder = new(64)
        out.append(fb_writer.finish(builder, fb_writer.write_table(builder, obj, ts_align)))
    return out[0], out[1]


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_engine_messages_are_identical(cls: type, data: st.DataObject) -> None:
    fast, reference = _both(data.draw(ods.model(cls)))
    assert fast == reference


def test_vtables_differing_only_in_object_size_are_not_shared() -> None:
    """Guide pitfall 2: Checkpoint (offsets [12, 4], size 16) vs OffsetInterval (size 20)."""
    for start in range(1, 9):
        block = MetadataBlock(
            system_time=NOON,
            prev_block_hash=Multihash.sha3_256(b"prev"),
            sequence_number=start,
            event=AddData(
                prev_offset=start - 1,
                new_data=DataSlice(
                    logical_hash=Multihash.sha3_256(b"l"),
                    physical_hash=Multihash.sha3_256(b"p"),
                    offset_interval=OffsetInterval(start=start, end=start + 10),
                    size=100,
                ),
                new_checkpoint=Checkpoint(physical_hash=Multihash.sha3_256(b"c"), size=10),
            ),
        )
        assert encode_block(block) == encode_block_reference(block)
        assert encode_block(block, version=3) == encode_block_reference(block, version=3)


def test_execute_transform_with_partial_inputs() -> None:
    """Guide pitfall 2, second case: DataSlice vs an input with both hashes and one offset."""
    inputs = tuple(
        ExecuteTransformInput(
            dataset_id=DatasetID.new_seeded(b"in%d" % i),
            prev_block_hash=Multihash.sha3_256(b"a"),
            new_block_hash=Multihash.sha3_256(b"b"),
            new_offset=i,
        )
        for i in range(3)
    )
    event = ExecuteTransform(
        query_inputs=inputs,
        new_data=DataSlice(
            logical_hash=Multihash.sha3_256(b"l"),
            physical_hash=Multihash.sha3_256(b"p"),
            offset_interval=OffsetInterval(start=0, end=5),
            size=6,
        ),
        new_watermark=NOON,
    )
    block = MetadataBlock(system_time=NOON, sequence_number=3, event=event)
    assert encode_block(block) == encode_block_reference(block)


@pytest.mark.parametrize("size", [0, 1, 3, 1023, 1024, 5000, 200_000])
def test_buffer_growth(size: int) -> None:
    block = MetadataBlock(
        system_time=NOON, sequence_number=size, event=SetDataSchema(schema=b"\xab" * size)
    )
    assert encode_block(block) == encode_block_reference(block)


def test_every_union_variant_with_empty_tables() -> None:
    """Empty tables share one 4-byte vtable; both builders agree on where it goes."""
    for variants in unions.all_unions().values():
        for cls in variants:
            try:
                root = cls()
            except TypeError:
                continue  # has required fields
            fast, reference = _both(root)
            assert fast == reference, cls.__name__
