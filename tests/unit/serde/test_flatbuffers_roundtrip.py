"""Property tests: every model type survives encode/decode, for both manifest versions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.odf import engine_protocol as ep
from common.odf import unions
from common.odf.block import MetadataBlock
from common.serde import flatbuffers_codec as codec
from tests.support import strategies as ods

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PER_VARIANT = settings(SETTINGS, max_examples=max(1, settings().max_examples // 5))
"""Each of the ~40 event-type and version pairs: a fifth of the profile's examples (20 by
default, 200 with ``HYPOTHESIS_PROFILE=thorough``); the family is the unit tier's costliest."""


@pytest.mark.parametrize("variant", unions.variants("MetadataEvent"), ids=lambda v: v.__name__)
@pytest.mark.parametrize("version", [2, 3])
@PER_VARIANT
@given(data=st.data())
def test_every_event_type_round_trips(variant: type, version: int, data: st.DataObject) -> None:
    block = data.draw(ods.metadata_blocks(event=ods.model(variant)))
    manifest = codec.encode_block(block, version=version)
    decoded = codec.decode_block(manifest)
    assert decoded == block
    # Our own output is a fixed point: decoding and re-encoding gives the same bytes.
    assert codec.encode_block(decoded, version=version) == manifest


@SETTINGS
@given(block=ods.metadata_blocks())
def test_versions_differ_only_in_layout(block: MetadataBlock) -> None:
    v2, v3 = codec.encode_block(block, version=2), codec.encode_block(block, version=3)
    assert codec.read_manifest(v2)[0] == 2
    assert codec.read_manifest(v3)[0] == 3
    assert codec.decode_block(v2) == codec.decode_block(v3) == block
    assert codec.block_hash(v2) != codec.block_hash(v3)


@SETTINGS
@given(when=ods.offset_datetimes(), block=ods.metadata_blocks())
def test_timestamps_are_stored_in_utc(when: Any, block: MetadataBlock) -> None:
    shifted = MetadataBlock(
        system_time=when,
        prev_block_hash=block.prev_block_hash,
        sequence_number=block.sequence_number,
        event=block.event,
    )
    decoded = codec.decode_block(codec.encode_block(shifted))
    assert decoded.system_time == when
    assert decoded.system_time.utcoffset() is not None
    assert decoded.system_time.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    utc = MetadataBlock(
        system_time=when.astimezone(decoded.system_time.tzinfo),
        prev_block_hash=block.prev_block_hash,
        sequence_number=block.sequence_number,
        event=block.event,
    )
    assert codec.encode_block(utc) == codec.encode_block(shifted)


MESSAGES: list[tuple[str, Any, Callable[[Any], bytes], Callable[[bytes], Any]]] = [
    (
        "TransformRequest",
        ods.model(ep.TransformRequest),
        codec.TRANSFORM_REQUEST.encode,
        codec.TRANSFORM_REQUEST.decode,
    ),
    (
        "TransformResponse",
        ods.union_values("TransformResponse"),
        codec.TRANSFORM_RESPONSE.encode,
        codec.TRANSFORM_RESPONSE.decode,
    ),
    (
        "RawQueryRequest",
        ods.model(ep.RawQueryRequest),
        codec.RAW_QUERY_REQUEST.encode,
        codec.RAW_QUERY_REQUEST.decode,
    ),
    (
        "RawQueryResponse",
        ods.union_values("RawQueryResponse"),
        codec.RAW_QUERY_RESPONSE.encode,
        codec.RAW_QUERY_RESPONSE.decode,
    ),
    (
        "ValidateQueryRequest",
        ods.model(ep.ValidateQueryRequest),
        codec.VALIDATE_QUERY_REQUEST.encode,
        codec.VALIDATE_QUERY_REQUEST.decode,
    ),
    (
        "ValidateQueryResponse",
        ods.union_values("ValidateQueryResponse"),
        codec.VALIDATE_QUERY_RESPONSE.encode,
        codec.VALIDATE_QUERY_RESPONSE.decode,
    ),
    (
        "SplitTransformRequest",
        ods.model(ep.SplitTransformRequest),
        codec.SPLIT_TRANSFORM_REQUEST.encode,
        codec.SPLIT_TRANSFORM_REQUEST.decode,
    ),
    (
        "SplitTransformResponse",
        ods.union_values("SplitTransformResponse"),
        codec.SPLIT_TRANSFORM_RESPONSE.encode,
        codec.SPLIT_TRANSFORM_RESPONSE.decode,
    ),
    (
        "HashDataFilesRequest",
        ods.model(ep.HashDataFilesRequest),
        codec.HASH_DATA_FILES_REQUEST.encode,
        codec.HASH_DATA_FILES_REQUEST.decode,
    ),
    (
        "HashDataFilesResponse",
        ods.union_values("HashDataFilesResponse"),
        codec.HASH_DATA_FILES_RESPONSE.encode,
        codec.HASH_DATA_FILES_RESPONSE.decode,
    ),
    (
        "MigrateQueryRequest",
        ods.model(ep.MigrateQueryRequest),
        codec.MIGRATE_QUERY_REQUEST.encode,
        codec.MIGRATE_QUERY_REQUEST.decode,
    ),
    (
        "MigrateQueryResponse",
        ods.union_values("MigrateQueryResponse"),
        codec.MIGRATE_QUERY_RESPONSE.encode,
        codec.MIGRATE_QUERY_RESPONSE.decode,
    ),
    (
        "QueryRequest",
        ods.model(ep.QueryRequest),
        codec.QUERY_REQUEST.encode,
        codec.QUERY_REQUEST.decode,
    ),
    (
        "QueryResponse",
        ods.union_values("QueryResponse"),
        codec.QUERY_RESPONSE.encode,
        codec.QUERY_RESPONSE.decode,
    ),
]


@pytest.mark.parametrize(
    ("strategy", "encode", "decode"), [m[1:] for m in MESSAGES], ids=[m[0] for m in MESSAGES]
)
@SETTINGS
@given(data=st.data())
def test_engine_messages_round_trip(
    strategy: Any, encode: Callable[[Any], bytes], decode: Callable[[bytes], Any], data: Any
) -> None:
    message = data.draw(strategy)
    encoded = encode(message)
    assert decode(encoded) == message
    assert encode(decode(encoded)) == encoded


def test_responses_are_wrapped_in_a_root_table() -> None:
    """TransformResponseRoot{value}: slot 0 is the union type, slot 1 the value."""
    from common.serde import fb_reader

    buf = codec.TRANSFORM_RESPONSE.encode(ep.TransformResponseInvalidQuery(message="boom"))
    root = fb_reader.Table(buf, int.from_bytes(buf[:4], "little"), "TransformResponseRoot")
    assert buf[root.field(4, 1)] == 3  # InvalidQuery is the third variant
    assert fb_reader.read_string(buf, fb_reader.Table(buf, root.deref(6), "x").deref(4)) == "boom"
