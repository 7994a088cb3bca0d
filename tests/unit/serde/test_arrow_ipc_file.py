"""An empty Arrow IPC file built around a stored Schema flatbuffer (``empty_ipc_file``): what
pyarrow reads from it is what the full reader decodes from the stored bytes."""

from __future__ import annotations

import base64

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from common.odf.errors import DecodeError
from common.serde.arrow_ipc_file import empty_ipc_file
from common.serde.arrow_schema import decode_arrow_schema, encode_arrow_schema
from tests.unit.serde.test_arrow_schema import KAMU_SCHEMA, KAMU_SCHEMA_B64, TYPES


def read_back(data: bytes) -> pa.Schema:
    """The schema of an IPC file (pyarrow verifies its flatbuffers), which has no records."""
    reader = ipc.open_file(pa.BufferReader(data))
    assert reader.num_record_batches == 0
    assert reader.read_all().num_rows == 0
    stream = ipc.open_stream(pa.BufferReader(data[8:]))  # the file holds a whole stream
    assert stream.schema.equals(reader.schema, check_metadata=True)
    assert list(stream) == []
    return reader.schema


@pytest.mark.parametrize("name", sorted(TYPES))
def test_every_type_alone_and_nested_reads_back_as_stored(name: str) -> None:
    dtype = TYPES[name]
    schema = pa.schema(
        [
            pa.field("x", dtype),
            pa.field(
                "s", pa.struct([pa.field("a", pa.int32(), False), pa.field("l", pa.list_(dtype))])
            ),
        ]
    )
    stored = encode_arrow_schema(schema)
    assert read_back(empty_ipc_file(stored)).equals(
        decode_arrow_schema(stored), check_metadata=True
    )


def test_the_reference_bytes_of_kamu_cli() -> None:
    assert read_back(empty_ipc_file(base64.b64decode(KAMU_SCHEMA_B64))).equals(KAMU_SCHEMA)


def test_field_metadata_is_kept_schema_metadata_is_refused() -> None:
    field = pa.field("a", pa.int64(), metadata={"k": "v"})
    stored = encode_arrow_schema(pa.schema([field]))
    assert read_back(empty_ipc_file(stored)).field("a").metadata == {b"k": b"v"}
    with pytest.raises(ValueError, match="custom metadata"):
        empty_ipc_file(encode_arrow_schema(pa.schema([field], metadata={"m": "1"})))


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00" * 7, b"\xff" * 16, b"\x08\x00\x00\x00" + b"\x00" * 12],
)
def test_malformed_schema_bytes_are_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError, match="invalid Arrow schema flatbuffer"):
        empty_ipc_file(data)


def test_the_same_bytes_as_the_reference_flatbuffers_builder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import flatbuffers

    from common.serde import arrow_ipc_file

    stored = encode_arrow_schema(pa.schema([pa.field("d", pa.decimal128(20, 3)), *KAMU_SCHEMA]))
    ours = empty_ipc_file(stored)
    monkeypatch.setattr(arrow_ipc_file, "FastBuilder", flatbuffers.Builder)
    assert empty_ipc_file(stored) == ours
