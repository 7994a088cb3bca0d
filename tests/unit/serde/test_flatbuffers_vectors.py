"""Upstream block hashes (kamu-cli at ODF 0.35) reproduced byte for byte."""

from __future__ import annotations

import base64
import struct
from datetime import UTC, datetime

import pytest

from common.odf.block import MetadataBlock
from common.odf.events import AddData, MetadataEvent, SetDataSchema, SetInfo, SetTransform
from common.odf.fragments import DataSlice, OffsetInterval, TransformInput, TransformSql
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from common.serde import fb_reader
from common.serde.flatbuffers_codec import block_hash, decode_block, encode_block, read_manifest

NOON_2020 = datetime(2020, 1, 1, 12, tzinfo=UTC)
PREV = Multihash.sha3_256(b"prev")

ARROW_SCHEMA_A_INT64_B_BOOL = base64.b64decode(
    "DAAAAAgACAAAAAQACAAAAAQAAAACAAAAQAAAAAQAAADY////GAAAAAwAAAAAAAAGEAAAAAAAAAAEAAQABAAAAAEAAAB"
    "iAAAAEAAUABAAAAAPAAQAAAAIABAAAAAYAAAAIAAAAAAAAAIcAAAACAAMAAQACwAIAAAAQAAAAAAAAAEAAAAAAQAAAGEAAAA="
)
"""arrow-rs 52 ``schema_to_fb`` of ``[a: Int64 not null, b: Boolean not null]`` (kamu-cli
test_serde_yaml.rs)."""


def wrap_into_block(event: MetadataEvent, sequence_number: int = 117) -> MetadataBlock:
    """The reference tests' wrapper: noon 2020-01-01, prev = sha3("prev")."""
    return MetadataBlock(
        system_time=NOON_2020,
        prev_block_hash=PREV,
        sequence_number=sequence_number,
        event=event,
    )


def set_transform_event() -> SetTransform:
    return SetTransform(
        inputs=(
            TransformInput(dataset_ref=DatasetID.new_seeded(b"input1").to_did(), alias="input1"),
            TransformInput(dataset_ref="input2", alias="input2"),
        ),
        transform=TransformSql(
            engine="spark", query="SELECT * FROM input1 UNION ALL SELECT * FROM input2"
        ),
    )


VECTORS = {
    "empty-add-data": (
        wrap_into_block(AddData()),
        "73e2977b8beae4aef53670067c1173b9d68e69721908d080b84286ab366d1e14",
        160,
    ),
    "add-data-with-data": (
        wrap_into_block(
            AddData(
                prev_offset=9,
                new_data=DataSlice(
                    logical_hash=Multihash.sha3_256(b"logical"),
                    physical_hash=Multihash.sha3_256(b"physical"),
                    offset_interval=OffsetInterval(start=10, end=99),
                    size=100,
                ),
            )
        ),
        "39426541aa50092a19daa39fd488cf0a6eaace03b2130440922f27916ef74a88",
        320,
    ),
    "set-transform": (
        wrap_into_block(set_transform_event()),
        "dc2ab3737792021b6794d3969315bb521701780c91548104f149906d98c8da70",
        432,
    ),
    "set-data-schema": (
        wrap_into_block(SetDataSchema(schema=ARROW_SCHEMA_A_INT64_B_BOOL)),
        "44d64d764fb207713407b9a761566409404c907f765993105608299cd6f5bebf",
        None,
    ),
    "set-info-seed-like": (
        MetadataBlock(
            system_time=datetime(2050, 1, 1, 12, tzinfo=UTC),
            sequence_number=0,
            event=SetInfo(description="foo"),
        ),
        "5603b882241c71351baf996d6dba7e3ddbd571457e93c1cd282bdc61f9fed5f2",
        112,
    ),
    "yaml-set-data-schema-seq-123": (
        wrap_into_block(SetDataSchema(schema=ARROW_SCHEMA_A_INT64_B_BOOL), sequence_number=123),
        "0fddaca15aebd849e2be5f14dfc6bbcce9dc5feaca1a88d330d79286efdce553",
        None,
    ),
}


def test_arrow_schema_fixture_is_the_reference_bytes() -> None:
    assert len(ARROW_SCHEMA_A_INT64_B_BOOL) == 140


@pytest.mark.parametrize(("block", "digest", "size"), VECTORS.values(), ids=VECTORS.keys())
def test_block_hash_matches_reference(block: MetadataBlock, digest: str, size: int | None) -> None:
    manifest = encode_block(block)
    if size is not None:
        assert len(manifest) == size
    assert block_hash(manifest) == Multihash(0x16, bytes.fromhex(digest))
    assert block_hash(manifest).to_multibase() == "f1620" + digest
    assert decode_block(manifest) == block


def test_set_info_vector_inner_buffer_is_only_4_aligned() -> None:
    """No uint64 in the inner buffer: 68 bytes, starting at byte 44 of the manifest."""
    block, _, _ = VECTORS["set-info-seed-like"]
    manifest = encode_block(block)
    assert struct.unpack_from("<I", manifest, 40)[0] == 68
    assert len(manifest) == 44 + 68


# --- Annotated layout of vector 1 (serialization guide §8) ------------------------------------

EMPTY_ADD_DATA_INNER = bytes.fromhex(
    "14000000"  # 00 root offset -> table at 0x14
    "0000"  # 04 finish padding
    "0e002c001c0018000c000b000400"  # 06 vtable: len 14, size 44, fields @28 @24 @12 @11 @4
    "0e000000"  # 14 soffset -> vtable at 0x06
    "2c000000"  # 18 event offset -> 0x44
    "000000"  # 1c padding
    "01"  # 1f event type AddData
    "7500000000000000"  # 20 sequence_number 117
    "00000000"  # 28 u64 alignment padding
    "1c000000"  # 2c prev_block_hash offset -> 0x48
    "e407000001000000c0a8000000000000"  # 30 Timestamp 2020-01-01T12:00:00
    "04000400"  # 40 empty AddData vtable
    "04000000"  # 44 AddData soffset
    "22000000"
    + PREV.to_bytes().hex()  # 48 prev_block_hash: 34-byte multihash
    + "0000"  # 6e padding
)

EMPTY_ADD_DATA_MANIFEST_HEAD = bytes.fromhex(
    "14000000"  # 00 root offset
    "000000000000"  # 04 padding
    "0a0018000c0008000400"  # 0a vtable: len 10, size 24, kind@12 version@8 content@4
    "0a000000"  # 14 soffset
    "14000000"  # 18 content offset -> 0x2c
    "02000000"  # 1c version 2
    "0000400000000000"  # 20 kind 0x400000
    "00000000"  # 28 padding
    "70000000"  # 2c content length 112
)


def test_empty_add_data_byte_layout() -> None:
    block, _, _ = VECTORS["empty-add-data"]
    manifest = encode_block(block)
    assert len(EMPTY_ADD_DATA_INNER) == 112
    assert manifest == EMPTY_ADD_DATA_MANIFEST_HEAD + EMPTY_ADD_DATA_INNER


# --- Version 3: 4-aligned Timestamp --------------------------------------------------------------


def _system_time_position(manifest: bytes) -> int:
    """Offset of MetadataBlock.system_time inside the content (inner) buffer."""
    _, inner = read_manifest(manifest)
    table = fb_reader.Table(inner, struct.unpack_from("<I", inner, 0)[0], "MetadataBlock")
    return table.field(4, 16)


@pytest.mark.parametrize(("block", "digest", "size"), VECTORS.values(), ids=VECTORS.keys())
def test_version_3_aligns_timestamps_and_decodes_the_same(
    block: MetadataBlock, digest: str, size: int | None
) -> None:
    v3 = encode_block(block, version=3)
    assert read_manifest(v3)[0] == 3
    assert read_manifest(encode_block(block))[0] == 2
    assert decode_block(v3) == block
    assert _system_time_position(v3) % 4 == 0


def test_version_2_timestamps_can_be_unaligned_and_version_3_fixes_them() -> None:
    """In the SetTransform vector the v2 system_time sits at 2 (mod 4)."""
    block, _, _ = VECTORS["set-transform"]
    v2, v3 = encode_block(block), encode_block(block, version=3)
    assert _system_time_position(v2) % 4 == 2
    assert _system_time_position(v3) % 4 == 0
    assert v2 != v3
    assert decode_block(v2) == decode_block(v3) == block
