"""Flight SQL sessions: the ``as_of`` option validated, set, unset and forgotten, and the
session cookie read from a call's headers."""

from __future__ import annotations

from coordinator.daemon.flight_session import AS_OF, MAX_SESSIONS, SessionMiddleware, Sessions
from coordinator.daemon.flight_sql_generated import flight_sql_pb2 as fsql

Errors = fsql.SetSessionOptionsResult


def request(**values: fsql.SessionOptionValue) -> fsql.SetSessionOptionsRequest:
    message = fsql.SetSessionOptionsRequest()
    for name, value in values.items():
        message.session_options[name].CopyFrom(value)
    return message


def test_as_of_set_refused_unset_and_closed() -> None:
    sessions = Sessions()
    when = fsql.SessionOptionValue(string_value="2024-05-01T00:00:00Z")
    assert not sessions.set("s1", request(as_of=when)).errors
    assert sessions.as_of("s1") == "2024-05-01T00:00:00Z" and sessions.as_of("s2") is None
    block = fsql.SessionOptionValue(string_value="f1220" + "ab" * 32)
    assert not sessions.set("s1", request(as_of=block)).errors
    refused = sessions.set(
        "s1",
        request(
            as_of=fsql.SessionOptionValue(string_value="yesterday; DROP"),
            colour=fsql.SessionOptionValue(string_value="red"),
        ),
    )
    assert refused.errors[AS_OF].value == Errors.INVALID_VALUE
    assert refused.errors["colour"].value == Errors.INVALID_NAME
    assert sessions.set("s1", request(as_of=fsql.SessionOptionValue(bool_value=True))).errors
    assert sessions.as_of("s1") == "f1220" + "ab" * 32  # the refused values changed nothing
    assert not sessions.set("s1", request(as_of=fsql.SessionOptionValue())).errors
    assert sessions.options("s1") == {}
    assert sessions.close("s1") and not sessions.close("s1") and not sessions.close(None)


def test_sessions_are_bounded() -> None:
    sessions = Sessions()
    for i in range(MAX_SESSIONS + 1):
        sessions.set(f"s{i}", request())
    assert not sessions.close("s0") and sessions.close(f"s{MAX_SESSIONS}")


def test_cookie_names_the_session_or_a_new_one_is_offered() -> None:
    factory = SessionMiddleware()
    call = factory.start_call(None, {"cookie": ["a=1; arrow_flight_session_id=abc"]})
    assert call.session == "abc" and call.sending_headers() == {}
    fresh = factory.start_call(None, {})
    assert fresh.session is None and fresh.offered and len(fresh.offered) == 32
    assert fresh.sending_headers() == {
        "set-cookie": f"arrow_flight_session_id={fresh.offered}; HttpOnly"
    }
