"""A real gRPC proxy in front of an engine that breaks one rule of the engine contract at a
time: the negative controls of the conformance kit (each breakage must be caught by a case).

It decodes each request and response with the project's codecs, changes one thing, and
re-encodes it; output files are rewritten in place (it sees the engine's paths, so the engine
behind it must share this machine's files: the embedded engine).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent import futures
from enum import StrEnum
from pathlib import Path
from typing import Any

import grpc
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from common.engine_rpc.rpcs import RPCS, SERVICE, EngineRpc
from common.odf import engine_protocol as ep
from common.odf.fragments import OffsetInterval


class Breakage(StrEnum):
    NONE = "none"
    SHIFT_OFFSETS = "shift-offsets"
    """Output offsets (and the interval) one past next_offset."""
    DROP_WATERMARK = "drop-watermark"
    """No output watermark, ever."""
    APPENDS_FOR_RETRACTIONS = "appends-for-retractions"
    """Every output record written as an append (op 0)."""
    LOSE_STATE = "lose-state"
    """The previous checkpoint is never handed to the engine."""
    MISCLASSIFY_INVALID_QUERY = "misclassify-invalid-query"
    """InvalidQuery answered as InternalError."""


class BreakingProxy:
    """Serves the engine service on a loopback port, forwarding to ``upstream``."""

    def __init__(self, upstream: str, breakage: Breakage) -> None:
        self.breakage = breakage
        self._channel = grpc.insecure_channel(upstream)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        handlers = {rpc.name: self._handler(rpc) for rpc in RPCS}
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, handlers),)
        )
        self.port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> BreakingProxy:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=1)
        self._channel.close()

    def _handler(self, rpc: EngineRpc[Any, Any]) -> grpc.RpcMethodHandler[Any, Any]:
        def handle(envelope: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            request = self._request(rpc.decode_request(envelope.flatbuffer))
            call = self._channel.unary_stream(
                rpc.path,
                request_serializer=rpc.request_envelope.SerializeToString,
                response_deserializer=rpc.response_envelope.FromString,
            )
            for message in call(rpc.request_envelope(flatbuffer=rpc.encode_request(request))):
                response = self._response(request, rpc.decode_response(message.flatbuffer))
                yield rpc.response_envelope(flatbuffer=rpc.encode_response(response))

        return grpc.unary_stream_rpc_method_handler(
            handle,
            request_deserializer=rpc.request_envelope.FromString,
            response_serializer=rpc.response_envelope.SerializeToString,
        )

    def _request(self, request: Any) -> Any:
        if self.breakage is Breakage.LOSE_STATE and isinstance(request, ep.TransformRequest):
            return dataclasses.replace(request, prev_checkpoint_path=None)
        return request

    def _response(self, request: Any, response: Any) -> Any:
        b = self.breakage
        if b is Breakage.MISCLASSIFY_INVALID_QUERY:
            if isinstance(response, ep.TransformResponseInvalidQuery):
                return ep.TransformResponseInternalError(message=response.message)
            if isinstance(response, ep.RawQueryResponseInvalidQuery):
                return ep.RawQueryResponseInternalError(message=response.message)
            if isinstance(response, ep.ValidateQueryResponseInvalidQuery):
                return ep.ValidateQueryResponseInternalError(message=response.message)
        if not isinstance(response, ep.TransformResponseSuccess):
            return response
        if b is Breakage.DROP_WATERMARK:
            return dataclasses.replace(response, new_watermark=None)
        interval = response.new_offset_interval
        if interval is None:
            return response
        path = Path(request.new_data_path)
        if b is Breakage.SHIFT_OFFSETS:
            _rewrite(path, "offset", lambda c: pc.add(c, 1))
            return dataclasses.replace(
                response,
                new_offset_interval=OffsetInterval(start=interval.start + 1, end=interval.end + 1),
            )
        if b is Breakage.APPENDS_FOR_RETRACTIONS:
            _rewrite(path, "op", lambda c: pc.multiply(c, 0))
        return response


def _rewrite(path: Path, column: str, change: Any) -> None:
    table = pq.read_table(path)
    i = table.column_names.index(column)
    new = change(table.column(i)).cast(table.schema.field(i).type)
    pq.write_table(table.set_column(i, table.schema.field(i), pa.chunked_array(new)), path)
