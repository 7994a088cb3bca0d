"""The servicer's error mapping, with a stand-in backend (no JVM, no network)."""

from __future__ import annotations

import socket
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from common.engine_rpc import engine_pb2, rpcs
from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, TransformSql
from common.odf.identity import DatasetID
from common.serde import flatbuffers_codec as codec
from engine_spark.calls import Admission
from engine_spark.data_roots import DataRoots
from engine_spark.errors import InvalidQueryError
from engine_spark.server import (
    BackendSlot,
    EngineServer,
    EngineServicer,
    ServerBindError,
    ServerSettings,
)

REQUEST = ep.TransformRequest(
    dataset_id=DatasetID.new_seeded(b"x"),
    dataset_alias="x",
    system_time=datetime(2024, 1, 1, tzinfo=UTC),
    vocab=DatasetVocabulary(),
    transform=TransformSql(engine="spark", query="select 1"),
    query_inputs=(),
    next_offset=0,
    new_checkpoint_path="/out/checkpoint",
    new_data_path="/out/data",
)


class Backend:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def execute_transform(self, request: ep.TransformRequest) -> Any:
        if self.error:
            raise self.error
        return ep.TransformResponseSuccess()


class Context:
    """What the servicer uses of a gRPC call's context."""

    def add_callback(self, callback: Any) -> bool:
        return True

    def abort(self, code: Any, details: str) -> None:
        raise AssertionError(f"aborted: {code} {details}")


def servicer(backend: Any) -> EngineServicer:
    return EngineServicer(
        backend, data_roots=DataRoots.of(["/out"]), admission=Admission(max_queue=0)
    )


def call(servicer: EngineServicer, data: bytes) -> ep.TransformResponse:
    request = engine_pb2.TransformRequest(flatbuffer=data)
    messages = list(servicer.stream(rpcs.TRANSFORM, request, Context()))  # type: ignore[arg-type]
    assert len(messages) == 1
    return codec.TRANSFORM_RESPONSE.decode(messages[0].flatbuffer)


def test_each_outcome_is_one_terminal_message() -> None:
    data = codec.TRANSFORM_REQUEST.encode(REQUEST)
    ok = servicer(lambda: Backend())
    assert call(ok, data) == ep.TransformResponseSuccess()

    invalid = servicer(lambda: Backend(InvalidQueryError("no event_time")))
    assert call(invalid, data) == ep.TransformResponseInvalidQuery(message="no event_time")

    broken = servicer(lambda: Backend(KeyError("boom")))
    response = call(broken, data)
    assert isinstance(response, ep.TransformResponseInternalError)
    assert response.message == "KeyError: 'boom'"
    assert response.backtrace is not None and "KeyError" in response.backtrace

    garbage = call(ok, b"\x01\x02")
    assert isinstance(garbage, ep.TransformResponseInternalError)
    assert garbage.message.startswith("cannot decode the TransformRequest")


def test_a_backend_that_failed_to_start_answers_internal_error() -> None:
    slot = BackendSlot()
    slot.fail(RuntimeError("no java"))
    response = call(servicer(slot.get), codec.TRANSFORM_REQUEST.encode(REQUEST))
    assert isinstance(response, ep.TransformResponseInternalError)
    assert "the engine failed to start: RuntimeError: no java" in response.message


@pytest.mark.grpc
def test_a_port_in_use_is_a_one_line_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = EngineServer(ServerSettings(host="127.0.0.1", ports=(port,)), lambda: Backend())
        with pytest.raises(ServerBindError, match=f"cannot listen on 127.0.0.1:{port}"):
            server.start()


def test_a_path_outside_the_data_roots_is_refused_before_the_backend_runs() -> None:
    ran: list[ep.TransformRequest] = []

    class Recording(Backend):
        def execute_transform(self, request: ep.TransformRequest) -> Any:
            ran.append(request)
            return ep.TransformResponseSuccess()

    request = replace(REQUEST, new_data_path="/etc/cron.d/data")
    response = call(servicer(lambda: Recording()), codec.TRANSFORM_REQUEST.encode(request))
    assert isinstance(response, ep.TransformResponseInternalError)
    assert response.message == (
        "request refused: new_data_path /etc/cron.d/data is outside the engine's data roots: /out"
    )
    assert ran == []


def test_the_rpc_table_is_the_service_in_the_proto() -> None:
    service = engine_pb2.DESCRIPTOR.services_by_name["Engine"]
    assert service.full_name == rpcs.SERVICE
    declared = {
        m.name: (m.input_type.name, m.output_type.name, m.server_streaming, m.client_streaming)
        for m in service.methods
    }
    table = {
        rpc.name: (rpc.request_envelope.__name__, rpc.response_envelope.__name__, True, False)
        for rpc in rpcs.RPCS
    }
    assert table == declared
