"""The Flight SQL front's request bounds (``flight_front._Bounded``): messages pass through
until a call sends more messages or bytes than it may; then it stops with the reason."""

from __future__ import annotations

import pytest

from coordinator.daemon.flight_front import _Bounded, _passed, _TooMuch


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
