"""The Flight SQL front's request bounds (``flight_front._Bounded``): messages pass through
until a call sends more messages or bytes than it may; then it stops with the reason."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pyarrow.flight as flight
import pytest

from coordinator.daemon.flight_front import (
    SERVICE,
    FlightFront,
    FrontLimits,
    ResultStream,
    _Bounded,
    _passed,
    _TooMuch,
)


def test_messages_within_the_bounds_pass_unchanged() -> None:
    sent = _Bounded(iter([b"a", b"bc"]), max_requests=2, max_bytes=3)
    assert list(sent) == [b"a", b"bc"]
    assert sent.refusal is None


@pytest.mark.parametrize(
    ("messages", "max_requests", "max_bytes", "reason"),
    [
        ([b"a", b"b", b"c"], 2, 100, "at most 2 request messages in this call"),
        ([b"abc", b"def"], 8, 5, "at most 5 request bytes in this call"),
    ],
)
def test_past_the_bounds_the_call_stops_with_the_reason(
    messages: list[bytes], max_requests: int, max_bytes: int, reason: str
) -> None:
    sent = _Bounded(iter(messages), max_requests, max_bytes)
    passed = []
    with pytest.raises(_TooMuch, match=reason):
        passed.extend(sent)
    assert sent.refusal == reason
    assert passed == messages[:-1]  # nothing past the bound is forwarded


def test_headers_of_http2_and_grpc_are_not_passed_on() -> None:
    given = [
        ("authorization", "Bearer t"),
        ("user-agent", "x"),
        ("grpc-status", "0"),
        ("x-arrow-status-bin", b"\x01"),
        (":path", "/"),
    ]
    assert _passed(given) == (("authorization", "Bearer t"), ("x-arrow-status-bin", b"\x01"))
    assert _passed(None) == ()


class _OneResult:
    """A server behind that has one result: two messages for any ticket."""

    def open_result(
        self, ticket: bytes, authorization: str | bytes, active: Callable[[], bool]
    ) -> ResultStream | None:
        return ResultStream((), iter([b"\x12\x01a", b"\x12\x01b"]))


def _ticket() -> bytes:
    return b"\x0a\x01t"  # Ticket{ticket: "t"}


def test_a_do_get_whose_request_never_ends_is_stopped_at_the_call_timeout(
    tmp_path: Path,
) -> None:
    limits = FrontLimits(1 << 10, 1 << 10, max_calls=1, call_timeout=1.0)
    front = FlightFront("127.0.0.1:0", tmp_path / "none.sock", None, limits, _OneResult())
    never_ends = threading.Event()

    def slow() -> Iterator[bytes]:
        yield _ticket()
        never_ends.wait(30)  # the ticket sent, the request side never closed

    try:
        with grpc.insecure_channel(f"127.0.0.1:{front.port}") as channel:
            do_get = channel.stream_stream(f"{SERVICE}DoGet", None, None)
            assert list(do_get(iter([_ticket()]), timeout=10)) == [b"\x12\x01a", b"\x12\x01b"]
            started = time.monotonic()
            with pytest.raises(grpc.RpcError) as refused:
                list(do_get(slow(), timeout=10))
            assert refused.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert "did not arrive within 1 s" in (refused.value.details() or "")
            assert time.monotonic() - started < 5
            # the slot it held is free again
            assert list(do_get(iter([_ticket()]), timeout=10)) == [b"\x12\x01a", b"\x12\x01b"]
    finally:
        never_ends.set()
        front.stop(0)


class _FailingResult:
    """A server behind whose result fails after its first message (a cancel or a timeout
    noticed while streaming); ``closed`` is set when the stream's generator is finished."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def open_result(
        self, ticket: bytes, authorization: str | bytes, active: Callable[[], bool]
    ) -> ResultStream | None:
        def messages() -> Iterator[bytes]:
            try:
                yield b"\x12\x01a"
                raise flight.FlightTimedOutError("the result took longer than 1 s to read")
            finally:
                self.closed.set()

        return ResultStream((), messages())


def test_a_result_read_ahead_that_fails_ends_the_call_with_its_reason(tmp_path: Path) -> None:
    limits = FrontLimits(1 << 10, 1 << 10, max_calls=1, call_timeout=10.0)
    result = _FailingResult()
    front = FlightFront("127.0.0.1:0", tmp_path / "none.sock", None, limits, result)
    got: list[bytes] = []
    try:
        with grpc.insecure_channel(f"127.0.0.1:{front.port}") as channel:
            do_get = channel.stream_stream(f"{SERVICE}DoGet", None, None)
            with pytest.raises(grpc.RpcError) as failed:
                got.extend(do_get(iter([_ticket()]), timeout=10))
    finally:
        front.stop(0)
    assert got == [b"\x12\x01a"]
    assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "took longer than 1 s" in (failed.value.details() or "")
    assert result.closed.wait(5)
