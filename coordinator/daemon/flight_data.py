"""Flight's ``FlightData`` messages, encoded straight from an Arrow IPC file.

A query's result is an Arrow IPC file (the engine's output). ``DoGet`` answers with a stream
of ``FlightData`` messages, each one IPC message: the ``data_header`` is the message's
FlatBuffers metadata and ``data_body`` its body, byte for byte as the file holds them (the
schema first, then the record batches; Flight.proto). Encoding them here, from the file, lets
the Flight SQL front (``flight_front``) answer ``DoGet`` itself instead of relaying what
pyarrow's server would send: one hop and several copies less per byte
(``bench/bench_flight_sql.py``).

A record batch whose body is larger than ``max_body_bytes`` goes out as zero-copy slices of at
most about that size (gRPC clients refuse messages over 16 MiB by default: ADBC, Go and Java).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

_HEADER_KEY = b"\x12"
"""``data_header``: field 2, length-delimited."""
_BODY_KEY = b"\xc2\x3e"
"""``data_body``: field 1000, length-delimited."""
_FILE_MAGIC = b"ARROW1"
_STREAM_START = 8
"""The IPC file's magic and its padding come before the stream of messages."""


def flight_data(message: pa.ipc.Message) -> bytes:
    """``message`` as a serialized ``FlightData``."""
    metadata, body = message.metadata, message.body
    parts: list[bytes | pa.Buffer] = [_HEADER_KEY, _varint(metadata.size), metadata]
    if body is not None and body.size:
        parts += [_BODY_KEY, _varint(body.size), body]
    return b"".join(parts)


def file_messages(path: Path, max_body_bytes: int) -> Iterator[pa.ipc.Message]:
    """The IPC messages of the Arrow IPC file at ``path``, schema first, read one at a time
    (the file is never read whole); batches with bodies over ``max_body_bytes`` in slices."""
    with pa.OSFile(str(path), "rb") as source:
        if source.read(len(_FILE_MAGIC)) != _FILE_MAGIC:
            raise ValueError(f"{path.name} is not an Arrow IPC file")
        source.seek(_STREAM_START)
        reader = ipc.MessageReader.open_stream(source)
        schema: pa.Schema | None = None
        while True:
            try:
                message = reader.read_next_message()
            except StopIteration:
                return
            if schema is None:
                schema = ipc.read_schema(message)
                yield message
            elif message.type == "record batch" and message.body.size > max_body_bytes:
                yield from _sliced(ipc.read_record_batch(message, schema), max_body_bytes)
            else:
                yield message


def _sliced(batch: pa.RecordBatch, max_bytes: int) -> Iterator[pa.ipc.Message]:
    rows = max(1, batch.num_rows * max_bytes // max(batch.nbytes, 1))
    for start in range(0, batch.num_rows, rows):
        yield ipc.read_message(batch.slice(start, rows).serialize())


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
