"""The engine client's stream handling against a real gRPC server that answers as scripted.

The real engine always sends exactly one terminal message; these cases are what other engines
(or a crashing one) do: Progress first, an empty stream, bytes that are no FlatBuffers, a
gRPC status instead of a message, or no server at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest

from common.engine_rpc import engine_pb2, engine_pb2_grpc
from common.odf import engine_protocol as ep
from common.odf.fragments import DatasetVocabulary, OffsetInterval, SqlQueryStep, TransformSql
from common.odf.identity import DatasetID
from common.serde.flatbuffers_codec import TRANSFORM_RESPONSE
from coordinator.engine import (
    EngineClient,
    EngineError,
    EngineInternalError,
    EngineInvalidQueryError,
    EngineUnavailableError,
)

pytestmark = pytest.mark.grpc

SUCCESS = ep.TransformResponseSuccess(
    new_offset_interval=OffsetInterval(start=0, end=4),
    new_watermark=datetime(2024, 1, 1, tzinfo=UTC),
)
REQUEST = ep.TransformRequest(
    dataset_id=DatasetID.new_seeded(b"out"),
    dataset_alias="out",
    system_time=datetime(2024, 1, 2, tzinfo=UTC),
    vocab=DatasetVocabulary(),
    transform=TransformSql(engine="spark", queries=(SqlQueryStep(query="select 1"),)),
    query_inputs=(),
    next_offset=0,
    new_checkpoint_path="/tmp/cp",
    new_data_path="/tmp/data",
)


class ScriptedEngine(engine_pb2_grpc.EngineServicer):
    def __init__(self) -> None:
        self.script: list[bytes] = []
        self.abort: grpc.StatusCode | None = None

    def ExecuteTransform(
        self, request: engine_pb2.TransformRequest, context: grpc.ServicerContext
    ) -> Iterator[engine_pb2.TransformResponse]:
        for message in self.script:
            yield engine_pb2.TransformResponse(flatbuffer=message)
        if self.abort is not None:
            context.abort(self.abort, "the engine went away")


@pytest.fixture
def scripted(tmp_path: Path) -> Iterator[tuple[ScriptedEngine, EngineClient]]:
    servicer = ScriptedEngine()
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    engine_pb2_grpc.add_EngineServicer_to_server(servicer, server)
    socket = tmp_path / "engine.sock"
    server.add_insecure_port(f"unix:{socket}")
    server.start()
    try:
        with EngineClient(f"unix:{socket}") as client:
            yield servicer, client
    finally:
        server.stop(grace=0)


def test_progress_is_skipped_and_success_returned(
    scripted: tuple[ScriptedEngine, EngineClient],
) -> None:
    engine, client = scripted
    progress = TRANSFORM_RESPONSE.encode(ep.TransformResponseProgress())
    engine.script = [progress, progress, TRANSFORM_RESPONSE.encode(SUCCESS)]
    assert client.execute_transform(REQUEST) == SUCCESS


def test_first_terminal_message_wins(scripted: tuple[ScriptedEngine, EngineClient]) -> None:
    engine, client = scripted
    invalid = ep.TransformResponseInvalidQuery(message="no such column: x")
    engine.script = [TRANSFORM_RESPONSE.encode(invalid), TRANSFORM_RESPONSE.encode(SUCCESS)]
    with pytest.raises(EngineInvalidQueryError) as info:
        client.execute_transform(REQUEST)
    assert info.value.detail == "no such column: x"
    assert str(info.value) == "invalid query: no such column: x"


def test_internal_error_keeps_the_backtrace(scripted: tuple[ScriptedEngine, EngineClient]) -> None:
    engine, client = scripted
    error = ep.TransformResponseInternalError(message="boom", backtrace="at line 1")
    engine.script = [TRANSFORM_RESPONSE.encode(error)]
    with pytest.raises(EngineInternalError, match="engine error: boom") as info:
        client.execute_transform(REQUEST)
    assert info.value.backtrace == "at line 1"


@pytest.mark.parametrize(
    ("script", "abort", "message"),
    [
        ([], None, "did not transmit Success or Error"),
        ([b"\x01\x02"], None, "undecodable response"),
        ([], grpc.StatusCode.UNAVAILABLE, "UNAVAILABLE: the engine went away"),
    ],
)
def test_broken_streams_are_engine_errors(
    scripted: tuple[ScriptedEngine, EngineClient],
    script: list[bytes],
    abort: grpc.StatusCode | None,
    message: str,
) -> None:
    engine, client = scripted
    engine.script, engine.abort = script, abort
    with pytest.raises(EngineError, match=message):
        client.execute_transform(REQUEST)


def test_readiness_gives_up_when_the_engine_is_gone(tmp_path: Path) -> None:
    with EngineClient(f"unix:{tmp_path / 'missing.sock'}", description="test engine") as client:
        with pytest.raises(EngineUnavailableError, match="test engine exited with code 3"):
            client.wait_until_ready(30, failed=lambda: "exited with code 3")
        with pytest.raises(EngineUnavailableError, match="did not become ready within 1 s"):
            client.wait_until_ready(1)
