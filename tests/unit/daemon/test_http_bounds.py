"""The pure parts of the daemon's HTTP listener: connection caps and body deadlines."""

from __future__ import annotations

from coordinator.daemon.http_listener import MIN_BODY_RATE, ConnectionCap, HttpBounds


def test_the_cap_admits_per_client_and_in_all() -> None:
    cap = ConnectionCap(total=3, per_client=2)
    assert cap.admit("a") and cap.admit("a")
    assert not cap.admit("a")  # a's own cap
    assert cap.admit("b")
    assert not cap.admit("c")  # the total cap
    cap.release("a")
    assert cap.admit("c")
    for client in ("a", "b", "c"):
        cap.release(client)
    assert cap.open == {}


def test_a_body_may_take_its_timeout_plus_its_size_at_the_minimum_rate() -> None:
    bounds = HttpBounds(body_timeout=60.0)
    assert bounds.body_deadline(0) == 60.0
    assert bounds.body_deadline(10 * MIN_BODY_RATE) == 70.0
