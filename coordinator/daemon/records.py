"""Records and schemas on the daemon's wire (``proto/coordinator.proto``): Arrow IPC streams.

Light to import (the generated messages only; pyarrow in the functions): it is all that a thin
client's query (``odf sql``, ``odf tail``) needs besides gRPC, so that its request leaves
before anything else loads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from coordinator.daemon.grpc_generated import coordinator_pb2 as pb

if TYPE_CHECKING:
    import pyarrow as pa

    from coordinator.query import QueryResult

BATCH_ROWS = 64 * 1024
"""Rows per ``Records`` message (each message stays well under gRPC's 4 MiB default)."""


def schema_bytes(schema: pa.Schema | None) -> bytes:
    """A schema as an Arrow IPC stream with no batches (empty for none)."""
    if schema is None:
        return b""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema):
        pass
    return bytes(sink.getvalue().to_pybytes())


def from_schema_bytes(data: bytes) -> pa.Schema | None:
    if not data:
        return None
    import pyarrow as pa

    return pa.ipc.open_stream(data).schema


def records_messages(table: pa.Table, num_records: int) -> Iterator[pb.Records]:
    """``table`` as ``Records`` messages (the schema always sent), then the total."""
    import pyarrow as pa

    batches = table.to_batches(max_chunksize=BATCH_ROWS) or [
        pa.RecordBatch.from_pylist([], schema=table.schema)
    ]
    for batch in batches:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_batch(batch)
        yield pb.Records(arrow_ipc=sink.getvalue().to_pybytes())
    yield pb.Records(end=pb.RecordsEnd(num_records=num_records))


def from_records_messages(messages: Iterable[pb.Records]) -> QueryResult:
    import pyarrow as pa

    from coordinator.query import QueryResult

    schema: pa.Schema | None = None
    batches: list[pa.RecordBatch] = []
    total = 0
    for message in messages:
        if message.HasField("end"):
            total = message.end.num_records
            continue
        reader = pa.ipc.open_stream(message.arrow_ipc)
        schema = reader.schema
        batches.extend(reader)
    table = pa.Table.from_batches(batches, schema=schema if schema is not None else pa.schema([]))
    return QueryResult(table, total)
