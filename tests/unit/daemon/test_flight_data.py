"""FlightData messages encoded from an Arrow IPC file (``flight_data``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from coordinator.daemon.flight_data import file_messages, flight_data

pytestmark = pytest.mark.unit


def _table(rows: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "name": pa.array([f"name-{i % 7}" for i in range(rows)]),
        }
    )


def _written(path: Path, table: pa.Table, chunk: int) -> Path:
    with ipc.new_file(str(path), table.schema) as writer:
        for batch in table.to_batches(max_chunksize=chunk):
            writer.write_batch(batch)
    return path


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def _fields(data: bytes) -> dict[int, bytes]:
    """The length-delimited fields of a serialized protobuf message, by number."""
    fields, at = {}, 0
    while at < len(data):
        key, at = _varint(data, at)
        assert key & 7 == 2, "only length-delimited fields are written"
        size, at = _varint(data, at)
        fields[key >> 3] = data[at : at + size]
        at += size
    assert at == len(data)
    return fields


def test_the_file_streams_as_its_schema_then_its_batches(tmp_path: Path) -> None:
    table = _table(1000)
    messages = list(file_messages(_written(tmp_path / "r.arrow", table, 300), 1 << 20))
    assert [m.type for m in messages] == ["schema"] + ["record batch"] * 4
    schema = ipc.read_schema(messages[0])
    assert schema == table.schema
    batches = [ipc.read_record_batch(m, schema) for m in messages[1:]]
    assert pa.Table.from_batches(batches).equals(table)


def test_batches_over_the_bound_go_out_in_slices(tmp_path: Path) -> None:
    table = _table(10_000)
    bound = table.nbytes // 8
    messages = list(file_messages(_written(tmp_path / "r.arrow", table, 10_000), bound))
    assert len(messages) > 8
    assert all(m.body.size <= bound * 1.5 for m in messages[1:])
    schema = ipc.read_schema(messages[0])
    batches = [ipc.read_record_batch(m, schema) for m in messages[1:]]
    assert pa.Table.from_batches(batches).equals(table)


def test_flight_data_carries_the_header_and_the_body_byte_for_byte(tmp_path: Path) -> None:
    table = _table(200)
    schema_message, batch_message = file_messages(
        _written(tmp_path / "r.arrow", table, 200), 1 << 20
    )
    schema_fields = _fields(flight_data(schema_message))
    assert schema_fields == {2: schema_message.metadata.to_pybytes()}  # no body
    batch_fields = _fields(flight_data(batch_message))
    assert batch_fields == {
        2: batch_message.metadata.to_pybytes(),
        1000: batch_message.body.to_pybytes(),
    }


def test_a_file_that_is_not_arrow_is_refused(tmp_path: Path) -> None:
    (tmp_path / "r.arrow").write_bytes(b"PAR1 not arrow")
    with pytest.raises(ValueError, match=r"r\.arrow is not an Arrow IPC file"):
        list(file_messages(tmp_path / "r.arrow", 1 << 20))
