"""The web UI's pure parts: escaping by default, safe Markdown, SQL highlighting, the lineage
layout, sessions, one-time links and the cross-site checks."""

from __future__ import annotations

import contextlib
import threading
import time
from http import HTTPStatus
from pathlib import Path

import pytest

from coordinator.app import Application
from coordinator.ui.html import Html, escape, join, render
from coordinator.ui.lineage_svg import layered, lineage_svg
from coordinator.ui.markdown import render_markdown
from coordinator.ui.pages import highlight_sql, size_text
from coordinator.ui.server import MAX_JOBS, Reply, WebUi, query_error
from coordinator.ui.sessions import Sessions, csrf_ok, same_origin
from coordinator.workspace import Workspace

HOSTILE = "<script>alert(1)</script>\"'&\x1b[31m\x07"


def test_render_escapes_every_value_but_html_built_here() -> None:
    out = render('<p title="$t">$x</p>$safe', t=HOSTILE, x=HOSTILE, safe=Html("<br>"))
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert "&quot;" in out and "&#x27;" in out and "&amp;" in out
    assert "\\x1b[31m\\x07" in out and "\x1b" not in out
    assert out.endswith("<br>")
    assert join(["<a>", Html("<b>")], ", ") == "&lt;a&gt;, <b>"
    assert escape(None) == ""


def test_markdown_shows_html_as_text_and_drops_unsafe_links_and_images() -> None:
    out = render_markdown(
        "# T\n\n<script>x()</script> [ok](https://a.example/p) [js](javascript:x())"
        " [data](data:text/html,x) ![img](https://a.example/i.png)\n"
    )
    assert "<h1>T</h1>" in out
    assert "&lt;script&gt;" in out and "<script>" not in out
    assert '<a href="https://a.example/p">ok</a>' in out
    assert "javascript:" not in out.split("[js]")[0] and 'href="javascript' not in out
    assert 'href="data:' not in out and "<img" not in out


def test_sql_highlighting_escapes_and_marks_keywords() -> None:
    out = highlight_sql("SELECT '<b>' AS x -- </pre>\nFROM t WHERE n > 1")
    assert '<span class="kw">SELECT</span>' in out
    assert '<span class="string">&#x27;&lt;b&gt;&#x27;</span>' in out
    assert '<span class="comment">-- &lt;/pre&gt;</span>' in out
    assert '&gt; <span class="number">1</span>' in out


def test_lineage_layers_inputs_left_and_escapes_names() -> None:
    ups = {"c": ["a", "b"], "b": ["a"], "a": []}
    assert layered(["a", "b", "c"], lambda n: ups[n]) == {"a": 0, "b": 1, "c": 2}
    cyclic = {"x": ["y"], "y": ["x"]}
    assert set(layered(["x", "y"], lambda n: cyclic[n])) == {"x", "y"}
    svg = lineage_svg(
        [("a", "Root"), ("<x>", "external")],
        [("<x>", "a")],
        current="a",
        link=lambda n: "/ui/datasets/a" if n == "a" else None,
    )
    assert "&lt;x&gt;" in svg and "<x>" not in svg
    assert svg.count("<a ") == 1 and 'class="node kind-root current"' in svg
    assert svg.count('class="edge"') == 1


def test_sizes() -> None:
    assert [size_text(n) for n in (None, 5, 2048, 5 << 20)] == ["", "5 B", "2.0 KiB", "5.0 MiB"]


TOKENS = {"Bearer good": 3, "Bearer reader": 1}


def test_sessions_login_links_and_revocation() -> None:
    tokens = dict(TOKENS)
    sessions = Sessions(tokens.get, secure=True)
    assert sessions.login("bad") is None
    session = sessions.login("good")
    assert session is not None
    cookie = sessions.cookie(session)
    for flag in ("HttpOnly", "SameSite=Strict", "Secure", "Path=/ui/"):
        assert flag in cookie
    found = sessions.find(f"other=1; {cookie.split(';')[0]}")
    assert found is not None and found[1] == 3
    assert sessions.find("odf_ui=forged") is None
    code = sessions.issue_link("Bearer reader")
    assert code is not None and sessions.issue_link("Bearer nope") is None
    redeemed = sessions.redeem(code)
    assert redeemed is not None and sessions.redeem(code) is None  # once
    assert sessions.find(sessions.cookie(redeemed).split(";")[0]) == (redeemed, 1)
    del tokens["Bearer good"]  # revoked: its sessions end
    assert sessions.find(cookie.split(";")[0]) is None
    sessions.end(redeemed)
    assert sessions.find(sessions.cookie(redeemed).split(";")[0]) is None
    assert "Max-Age=0" in sessions.cookie(None)


def test_csrf_and_origin_checks() -> None:
    session = Sessions(TOKENS.get, secure=False).login("good")
    assert session is not None
    assert csrf_ok(session, session.csrf)
    assert not csrf_ok(session, None) and not csrf_ok(session, session.csrf + "x")
    host = "127.0.0.1:8080"
    assert same_origin("http://127.0.0.1:8080", None, host, "http")
    assert same_origin(None, "http://127.0.0.1:8080/ui/sql", host, "http")
    assert same_origin("null", "http://127.0.0.1:8080/ui/", host, "http")


@pytest.mark.parametrize(
    ("origin", "referer", "host", "scheme"),
    [
        ("http://evil.example", None, "127.0.0.1:8080", "http"),
        ("https://127.0.0.1:8080", None, "127.0.0.1:8080", "http"),
        (None, None, "127.0.0.1:8080", "http"),
        ("null", None, "127.0.0.1:8080", "http"),
        ("http://127.0.0.1:8080", None, None, "http"),
        ("http://127.0.0.1:8080.evil.example", None, "127.0.0.1:8080", "http"),
    ],
)
def test_cross_site_requests_are_refused(
    origin: str | None, referer: str | None, host: str | None, scheme: str
) -> None:
    assert not same_origin(origin, referer, host, scheme)


@pytest.mark.parametrize(
    ("message", "where"),
    [
        ("[PARSE_SYNTAX_ERROR] Syntax error at or near 'FORM'.(line 1, pos 9)", (1, 9)),
        ("[X] nope; line 2 pos 7;", (2, 7)),
        ("mismatched input at line 3:4", (3, 4)),
        ("[UNRESOLVED_COLUMN] ... with name `nope` cannot be resolved. Did you mean", (2, 12)),
        ("[TABLE_OR_VIEW_NOT_FOUND] The table or view `nowhere` cannot be found.", (3, 5)),
        ("dataset 'x' not found", None),
    ],
)
def test_query_errors_carry_their_position(message: str, where: tuple[int, int] | None) -> None:
    sql = "SELECT id,\n  nope_not, nope\nFROM nowhere"
    error = query_error(message, sql)
    assert error["error"] == message
    assert (error["line"], error["column"]) == where if where else "line" not in error


def test_jobs_are_bounded(tmp_path: Path) -> None:
    ui = WebUi(Application(Workspace.init(tmp_path)), None, TOKENS.get, secure=False)  # type: ignore[arg-type]
    release = threading.Event()
    ran = []
    try:
        for i in range(MAX_JOBS):
            ui._run_job(f"job-{i}", release.wait)
        with pytest.raises(Reply) as refused:
            ui._run_job("one-too-many", lambda: ran.append(1))
        assert refused.value.status == HTTPStatus.TOO_MANY_REQUESTS and not ran
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while not ran:  # the slots come back as the jobs end
        with contextlib.suppress(Reply):
            ui._run_job("later", lambda: ran.append(1))
        assert time.monotonic() < deadline
        time.sleep(0.01)
    ui.stop()
