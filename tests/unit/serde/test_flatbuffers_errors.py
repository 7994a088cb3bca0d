"""Malformed input: every decoder fails with DecodeError / UnsupportedVersionError and a clear
message; bad model values fail to encode with ValidationError naming the field."""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import UTC, datetime

import flatbuffers
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.odf import engine_protocol as ep
from common.odf import unions
from common.odf.block import MetadataBlock
from common.odf.errors import DecodeError, UnsupportedVersionError, ValidationError
from common.odf.events import AddData, SetInfo, SetPollingSource, SetTransform
from common.odf.fragments import (
    DataSlice,
    EventTimeSourceFromPath,
    FetchStepUrl,
    MergeStrategyAppend,
    OffsetInterval,
    PrepStepPipe,
    ReadStepCsv,
    RequestHeader,
    SourceCachingForever,
    TransformSql,
)
from common.odf.multihash import Multihash
from common.serde import fb_reader
from common.serde import flatbuffers_codec as codec

NOON = datetime(2020, 1, 1, 12, tzinfo=UTC)

RICH_BLOCK = MetadataBlock(
    system_time=NOON,
    prev_block_hash=Multihash.sha3_256(b"prev"),
    sequence_number=7,
    event=SetPollingSource(
        fetch=FetchStepUrl(
            url="https://example.org/data.csv",
            event_time=EventTimeSourceFromPath(pattern=r"(\d+)", timestamp_format="%Y"),
            cache=SourceCachingForever(),
            headers=(RequestHeader(name="Accept", value="text/csv"),),
        ),
        prepare=(PrepStepPipe(command=("gunzip", "-c")),),
        read=ReadStepCsv(schema=("a BIGINT", "b STRING"), header=True, separator=";"),
        preprocess=TransformSql(engine="spark", query="SELECT * FROM input"),
        merge=MergeStrategyAppend(),
    ),
)
MANIFEST = codec.encode_block(RICH_BLOCK)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def manifest(*, kind: int = 0x400000, version: int = 2, content: bytes | None = None) -> bytes:
    """A manifest with arbitrary fields (content defaults to the rich block's)."""
    if content is None:
        content = codec.read_manifest(MANIFEST)[1]
    b = flatbuffers.Builder(1024)
    off = b.CreateByteVector(content)
    b.StartObject(3)
    b.PrependInt64Slot(0, kind, 0)
    b.PrependInt32Slot(1, version, 0)
    b.PrependUOffsetTRelativeSlot(2, off, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def inner() -> bytes:
    return codec.read_manifest(MANIFEST)[1]


def test_manifest_helper_reproduces_the_codec() -> None:
    assert manifest() == MANIFEST
    assert codec.decode_block(manifest(version=3)) == RICH_BLOCK


# --- Manifest level ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 4, 99, -1])
def test_unsupported_versions(version: int) -> None:
    with pytest.raises(UnsupportedVersionError, match=rf"version {version} is not supported"):
        codec.decode_block(manifest(version=version))


def test_wrong_manifest_kind() -> None:
    with pytest.raises(DecodeError, match=r"manifest kind is 0x300016, expected odf-metadata"):
        codec.decode_block(manifest(kind=0x300016))


def test_encoding_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersionError, match="cannot write metadata block version 4"):
        codec.encode_block(RICH_BLOCK, version=4)


def test_every_truncation_fails_cleanly() -> None:
    for size in range(len(MANIFEST)):
        with pytest.raises(DecodeError):
            codec.decode_block(MANIFEST[:size])


@pytest.mark.parametrize("data", [b"", b"\x00" * 3, b"\xff" * 64, b"\x00" * 64, b"not a block"])
def test_garbage_manifests(data: bytes) -> None:
    with pytest.raises(DecodeError):
        codec.decode_block(data)


@FUZZ
@given(data=st.binary(max_size=256))
def test_random_bytes_never_leak_low_level_errors(data: bytes) -> None:
    with pytest.raises((DecodeError, UnsupportedVersionError)):
        codec.decode_block(data)


@FUZZ
@given(content=st.binary(max_size=256))
def test_random_content_is_rejected_or_decoded(content: bytes) -> None:
    try:
        block = codec.decode_block(manifest(content=content))
    except DecodeError:
        return
    assert isinstance(block, MetadataBlock)


@FUZZ
@given(data=st.data())
def test_corrupted_blocks_are_rejected_or_decoded(data: st.DataObject) -> None:
    corrupted = bytearray(MANIFEST)
    for _ in range(data.draw(st.integers(1, 4))):
        corrupted[data.draw(st.integers(0, len(corrupted) - 1))] = data.draw(st.integers(0, 255))
    try:
        block = codec.decode_block(bytes(corrupted))
    except (DecodeError, UnsupportedVersionError):
        return
    assert isinstance(block, MetadataBlock)


# --- Content level: targeted corruptions ---------------------------------------------------------


def _patched(content: bytes, at: int, fmt: str, value: int) -> bytes:
    buf = bytearray(content)
    struct.pack_into(fmt, buf, at, value)
    return manifest(content=bytes(buf))


def test_root_offset_outside_the_buffer() -> None:
    with pytest.raises(DecodeError, match=r"MetadataBlock table at byte 100000 lies outside"):
        codec.decode_block(_patched(inner(), 0, "<I", 100_000))


def test_vtable_outside_the_buffer() -> None:
    content = inner()
    root = struct.unpack_from("<I", content, 0)[0]
    with pytest.raises(DecodeError, match=r"MetadataBlock vtable at byte -\d+ lies outside"):
        codec.decode_block(_patched(content, root, "<i", 1_000_000))


def test_content_length_past_the_end() -> None:
    buf = bytearray(MANIFEST)
    at = len(MANIFEST) - len(inner()) - 4
    struct.pack_into("<I", buf, at, 1 << 30)
    with pytest.raises(DecodeError, match=r"runs past the end"):
        codec.decode_block(bytes(buf))


def _field_pos(content: bytes, voffset: int) -> int:
    table = fb_reader.Table(content, struct.unpack_from("<I", content, 0)[0], "MetadataBlock")
    return table.field(voffset, 1)


def test_unknown_event_type() -> None:
    content = inner()
    with pytest.raises(
        DecodeError, match=r"^MetadataBlock\.event: unknown MetadataEvent type code 99"
    ):
        codec.decode_block(_patched(content, _field_pos(content, 10), "<B", 99))


def test_offset_field_pointing_outside() -> None:
    content = inner()
    with pytest.raises(DecodeError, match=r"^MetadataBlock\.prev_block_hash: offset at byte"):
        codec.decode_block(_patched(content, _field_pos(content, 6), "<I", 1 << 20))


def test_string_length_past_the_end() -> None:
    block = MetadataBlock(system_time=NOON, sequence_number=1, event=SetInfo(description="xyz"))
    content = codec.read_manifest(codec.encode_block(block))[1]
    at = content.index(b"\x03\x00\x00\x00xyz\x00")
    with pytest.raises(DecodeError, match=r"^MetadataBlock\.event\.description: vector of"):
        codec.decode_block(_patched(content, at, "<I", 200))


def test_invalid_utf8() -> None:
    block = MetadataBlock(system_time=NOON, sequence_number=1, event=SetInfo(description="xyz"))
    content = codec.read_manifest(codec.encode_block(block))[1]
    bad = content.replace(b"xyz\x00", b"x\xffz\x00")
    with pytest.raises(DecodeError, match=r"description: string at byte \d+ is not valid UTF-8"):
        codec.decode_block(manifest(content=bad))


def test_bad_multihash() -> None:
    mh = Multihash.sha3_256(b"prev").to_bytes()
    content = inner().replace(mh, b"\x16\x21" + mh[2:])
    with pytest.raises(DecodeError, match=r"prev_block_hash: multihash digest length is 32"):
        codec.decode_block(manifest(content=content))


def test_bad_timestamp() -> None:
    block = MetadataBlock(system_time=NOON, sequence_number=1, event=SetInfo())
    content = codec.read_manifest(codec.encode_block(block))[1]
    ts = bytes.fromhex("e407000001000000c0a8000000000000")
    bad = content.replace(ts, ts[:4] + b"\x70\x01" + ts[6:])  # day 368
    with pytest.raises(DecodeError, match=r"system_time: timestamp day of year 368"):
        codec.decode_block(manifest(content=bad))


def test_missing_required_fields() -> None:
    b = flatbuffers.Builder(256)
    b.StartObject(5)
    b.PrependUint64Slot(2, 5, 0)
    b.Finish(b.EndObject())
    no_time = manifest(content=bytes(b.Output()))
    with pytest.raises(DecodeError, match=r"^MetadataBlock\.system_time: required field"):
        codec.decode_block(no_time)


def test_sub_microsecond_nanoseconds_are_truncated() -> None:
    block = MetadataBlock(system_time=NOON, sequence_number=1, event=SetInfo())
    content = codec.read_manifest(codec.encode_block(block))[1]
    ts = bytes.fromhex("e407000001000000c0a8000000000000")
    content = content.replace(ts, ts[:12] + struct.pack("<I", 1_234_567))
    decoded = codec.decode_block(manifest(content=content))
    assert decoded.system_time == NOON.replace(microsecond=1234)


# --- Engine messages ---------------------------------------------------------------------------

DECODERS = [
    (codec.TRANSFORM_REQUEST.decode, ep.TransformRequest),
    (codec.TRANSFORM_RESPONSE.decode, unions.variants("TransformResponse")),
    (codec.RAW_QUERY_REQUEST.decode, ep.RawQueryRequest),
    (codec.RAW_QUERY_RESPONSE.decode, unions.variants("RawQueryResponse")),
    (codec.VALIDATE_QUERY_REQUEST.decode, ep.ValidateQueryRequest),
    (codec.VALIDATE_QUERY_RESPONSE.decode, unions.variants("ValidateQueryResponse")),
    (codec.MIGRATE_QUERY_REQUEST.decode, ep.MigrateQueryRequest),
    (codec.MIGRATE_QUERY_RESPONSE.decode, unions.variants("MigrateQueryResponse")),
    (codec.QUERY_REQUEST.decode, ep.QueryRequest),
    (codec.QUERY_RESPONSE.decode, unions.variants("QueryResponse")),
]


@pytest.mark.parametrize(("decode", "expected"), DECODERS, ids=lambda d: getattr(d, "__name__", ""))
@settings(max_examples=50, deadline=None)
@given(data=st.binary(max_size=128))
def test_engine_decoders_reject_garbage(
    decode: Callable[[bytes], object], expected: type | tuple[type, ...], data: bytes
) -> None:
    try:
        message = decode(data)
    except DecodeError:
        return
    assert isinstance(message, expected)


def test_engine_decoder_names_the_message_and_field() -> None:
    encoded = codec.RAW_QUERY_REQUEST.encode(
        ep.RawQueryRequest(
            input_data_paths=("a.parquet",),
            transform=TransformSql(engine="x"),
            output_data_path="o",
        )
    )
    # Cutting into the data fails; only trailing alignment padding (< 4 bytes) may go.
    for size in range(len(encoded) - 3):
        with pytest.raises(DecodeError, match=r"^RawQueryRequest"):
            codec.RAW_QUERY_REQUEST.decode(encoded[:size])
    with pytest.raises(DecodeError, match=r"^RawQueryRequest\.transform: unknown Transform type"):
        codec.RAW_QUERY_REQUEST.decode(_bad_union(encoded))


def _bad_union(encoded: bytes) -> bytes:
    table = fb_reader.Table(encoded, struct.unpack_from("<I", encoded, 0)[0], "RawQueryRequest")
    buf = bytearray(encoded)
    buf[table.field(6, 1)] = 7
    return bytes(buf)


# --- Encoding errors ---------------------------------------------------------------------------


def test_naive_datetimes_are_rejected() -> None:
    block = MetadataBlock(system_time=datetime(2020, 1, 1), sequence_number=0, event=SetInfo())
    with pytest.raises(
        ValidationError, match=r"^MetadataBlock\.system_time: timestamp .* no time zone"
    ):
        codec.encode_block(block)


def test_out_of_range_integers_name_the_field() -> None:
    block = MetadataBlock(
        system_time=NOON,
        sequence_number=1,
        event=AddData(
            new_data=DataSlice(
                logical_hash=Multihash.sha3_256(b"l"),
                physical_hash=Multihash.sha3_256(b"p"),
                offset_interval=OffsetInterval(start=0, end=-1),
                size=1,
            )
        ),
    )
    with pytest.raises(
        ValidationError,
        match=r"^MetadataBlock\.event\.new_data\.offset_interval\.end: -1 is not a uint64",
    ):
        codec.encode_block(block)


def test_wrong_union_variant_names_the_field() -> None:
    event = SetTransform(inputs=(), transform=MergeStrategyAppend())  # type: ignore[arg-type]
    block = MetadataBlock(system_time=NOON, sequence_number=1, event=event)
    with pytest.raises(
        ValidationError,
        match=r"^MetadataBlock\.event\.transform: MergeStrategyAppend is not a variant of Trans",
    ):
        codec.encode_block(block)


def test_wrong_vector_element_names_the_index() -> None:
    event = SetInfo(keywords=("ok", 5))  # type: ignore[arg-type]
    block = MetadataBlock(system_time=NOON, sequence_number=1, event=event)
    with pytest.raises(
        ValidationError, match=r"^MetadataBlock\.event\.keywords: expected a string"
    ):
        codec.encode_block(block)


def test_missing_required_value() -> None:
    event = SetTransform(inputs=None, transform=TransformSql(engine="x"))  # type: ignore[arg-type]
    block = MetadataBlock(system_time=NOON, sequence_number=1, event=event)
    with pytest.raises(
        ValidationError, match=r"^MetadataBlock\.event\.inputs: required field is missing"
    ):
        codec.encode_block(block)


def _shared_subtree_block(wrappers: int, strings: int) -> bytes:
    """SetPollingSource whose ``prepare`` points ``wrappers`` times at one PrepStepPipe whose
    ``command`` points ``strings`` times at one string: tiny buffer, huge object graph."""
    b = flatbuffers.Builder(1024)
    arg = b.CreateString("x")
    b.StartVector(4, strings, 4)
    for _ in range(strings):
        b.PrependUOffsetTRelative(arg)
    command = b.EndVector()
    b.StartObject(1)
    b.PrependUOffsetTRelativeSlot(0, command, 0)
    pipe = b.EndObject()
    b.StartObject(2)
    b.PrependUint8Slot(0, 2, 0)
    b.PrependUOffsetTRelativeSlot(1, pipe, 0)
    wrapper = b.EndObject()
    b.StartVector(4, wrappers, 4)
    for _ in range(wrappers):
        b.PrependUOffsetTRelative(wrapper)
    prepare = b.EndVector()
    url = b.CreateString("https://example.org")
    b.StartObject(1)
    b.PrependUOffsetTRelativeSlot(0, url, 0)
    fetch = b.EndObject()
    b.StartObject(0)
    empty = b.EndObject()
    b.StartObject(9)
    b.PrependUint8Slot(0, 1, 0)  # FetchStepUrl
    b.PrependUOffsetTRelativeSlot(1, fetch, 0)
    b.PrependUOffsetTRelativeSlot(2, prepare, 0)
    b.PrependUint8Slot(3, 4, 0)  # ReadStepParquet (empty table)
    b.PrependUOffsetTRelativeSlot(4, empty, 0)
    b.PrependUint8Slot(7, 1, 0)  # MergeStrategyAppend (empty table)
    b.PrependUOffsetTRelativeSlot(8, empty, 0)
    event = b.EndObject()
    b.StartObject(5)
    b.Prep(4, 16)
    b.head -= 16
    b.Bytes[b.head : b.head + 16] = bytes.fromhex("e407000001000000c0a8000000000000")
    b.Slot(0)
    b.PrependUint8Slot(3, 4, 0)  # SetPollingSource
    b.PrependUOffsetTRelativeSlot(4, event, 0)
    b.Finish(b.EndObject())
    return manifest(content=bytes(b.Output()))


def test_shared_subtrees_decode_when_small() -> None:
    block = codec.decode_block(_shared_subtree_block(wrappers=3, strings=4))
    assert isinstance(block.event, SetPollingSource)
    assert block.event.prepare == (PrepStepPipe(command=("x",) * 4),) * 3


def test_shared_subtree_amplification_is_refused() -> None:
    """3,000 x 3,000 references in ~24 KB would decode into 9 million strings."""
    data = _shared_subtree_block(wrappers=3000, strings=3000)
    assert len(data) < 30_000
    with pytest.raises(
        DecodeError, match=r"event\.prepare\[\d+\]\.command: buffer references far more objects"
    ):
        codec.decode_block(data)
