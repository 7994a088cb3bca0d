"""The web UI in a real browser: Debian's headless Chromium driven by Playwright (never a
downloaded browser) against one ``odf serve`` process, one browser for the module.

The workspace: a push root ``a`` (described, licensed, with an attachment), its derivative
``b``, and a root ``hostile`` whose description and records hold HTML, script tags and
control characters. Screenshots of each page go to ``$ODF_UI_SCREENSHOTS`` (``docs/ui`` when
refreshing the README's) or the test's temporary directory.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.client import HTTPResponse
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support.cli import odf, ok
from tests.support.daemon import Served, serving
from tests.support.datasets import derivative, polled, root
from tests.support.workspace import add, ingest, new_workspace

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOSTILE_TEXT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
HOSTILE_CSV = (
    "id,v\n"
    '1,"<script>window.__pwned = 3</script>"\n'
    '2,"<img src=x onerror=""window.__pwned = 4"">"\n'
    '3,"bell\x07 escape\x1b[31m red"\n'
)
DESCRIPTION = (
    "# Readings\n\nTemperatures of **the city**, hourly.\n\n"
    "[source](https://example.org/data) and [bad](javascript:window.__pwned=5)\n"
)


def _snapshot_a() -> str:
    return root(
        "a",
        ["id BIGINT", "v STRING"],
        events=[
            {"kind": "SetInfo", "description": DESCRIPTION, "keywords": ["weather", "city"]},
            {
                "kind": "SetLicense",
                "shortName": "CC0",
                "name": "Creative Commons Zero",
                "spdxId": "CC0-1.0",
                "websiteUrl": "https://creativecommons.org/publicdomain/zero/1.0/",
            },
            {
                "kind": "SetAttachments",
                "attachments": {
                    "kind": "Embedded",
                    "items": [
                        {
                            "path": "README.md",
                            "content": "## How\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
                        }
                    ],
                },
            },
        ],
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    ws = new_workspace(tmp_path_factory.mktemp("ui") / "ws")
    (ws / ".odf" / "config.yaml").write_text("daemon:\n  followLineage: false\n")
    hostile = root(
        "hostile",
        ["id BIGINT", "v STRING"],
        events=[
            {"kind": "SetInfo", "description": HOSTILE_TEXT + "\x1b[2J", "keywords": [HOSTILE_TEXT]}
        ],
    )
    (ws / "inbox").mkdir()
    add(
        ws,
        polled("p", str(ws / "inbox" / "*.csv"), ["city STRING", "population BIGINT"]),
        _snapshot_a(),
        derivative("b", "SELECT event_time, id, upper(v) AS v FROM a", ["a"]),
        hostile,
    )
    ingest(ws, "a", "id,v\n1,x\n2,y\n")
    ingest(ws, "hostile", HOSTILE_CSV)
    with serving(ws) as served:
        # the engine starts (tens of seconds on a loaded machine) while the other tests run
        warm = threading.Thread(target=_warm_up, args=(served,), daemon=True)
        warm.start()
        WARMING.append(warm)
        yield served


WARMING: list[threading.Thread] = []


def _warm_up(served: Served) -> None:
    base = f"http://{served.info['httpAddress']}"
    session = _login_cookie(base, served.token).split(";")[0]
    page = _request(base + "/ui/", headers={"Cookie": session}).read().decode()
    csrf = page.split('name="csrf-token" content="')[1].split('"')[0]
    headers = {"Cookie": session, "Origin": base, "X-CSRF-Token": csrf}
    _request(
        base + "/ui/api/query", data=b'{"sql": "SELECT 1 AS one"}', headers=headers, timeout=300
    )


@pytest.fixture(scope="module")
def base(served: Served) -> str:
    return f"http://{served.info['httpAddress']}"


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("ODF_UI_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.fail("no /usr/bin/chromium: run scripts/install-system.sh (make install)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: object, base: str, served: Served) -> Iterator[object]:
    """A logged-in page (its own browser context: its own cookies), dialogs recorded."""
    context = browser.new_context(viewport={"width": 1280, "height": 860}, accept_downloads=True)  # type: ignore[attr-defined]
    p = context.new_page()
    p.dialogs = []
    p.on("dialog", lambda d: (p.dialogs.append(d.message), d.dismiss()))
    p.goto(base + "/")
    assert p.url == base + "/ui/login"
    p.fill("input[name=token]", served.token)
    p.click("button[type=submit]")
    p.wait_for_url(base + "/ui/")
    try:
        yield p
    finally:
        context.close()


def _request(
    url: str,
    *,
    data: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30,
) -> HTTPResponse:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        return opener.open(request, timeout=timeout)  # type: ignore[no-any-return]
    except urllib.error.HTTPError as e:
        return e  # type: ignore[return-value]


def _login_cookie(base: str, token: str) -> str:
    r = _request(base + "/ui/login", data=f"token={token}".encode(), headers={"Origin": base})
    assert r.status == 303, r.read()
    return r.headers["Set-Cookie"]


def test_refusals_without_a_token_and_the_security_headers(base: str, served: Served) -> None:
    r = _request(base + "/ui/")
    assert (r.status, r.headers["Location"]) == (303, "/ui/login")
    assert _request(base + "/ui/api/datasets/a/summary").status == 401
    assert _request(base + "/ui/sql/download?sql=SELECT+1&format=csv").status == 303
    bad = _request(base + "/ui/login", data=b"token=nope", headers={"Origin": base})
    assert bad.status == 401 and b"not a token" in bad.read()
    cross = _request(
        base + "/ui/login",
        data=f"token={served.token}".encode(),
        headers={"Origin": "http://evil.example"},
    )
    assert cross.status == 403
    login = _request(base + "/ui/login")
    csp = login.headers["Content-Security-Policy"]
    for directive in (
        "default-src 'self'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "object-src 'none'",
    ):
        assert directive in csp
    assert "unsafe" not in csp
    assert login.headers["X-Content-Type-Options"] == "nosniff"
    assert login.headers["Referrer-Policy"] == "same-origin"
    assert login.headers["X-Frame-Options"] == "DENY"
    cookie = _login_cookie(base, served.token)
    for flag in ("HttpOnly", "SameSite=Strict", "Path=/ui/"):
        assert flag in cookie
    session = cookie.split(";")[0]
    listing = _request(base + "/ui/", headers={"Cookie": session})
    assert listing.status == 200 and listing.headers["Content-Security-Policy"] == csp
    csrf = listing.read().decode().split('name="csrf-token" content="')[1].split('"')[0]
    body = json.dumps({"dataset": "a"}).encode()
    json_headers = {"Cookie": session, "Content-Type": "application/json"}
    no_csrf = _request(base + "/ui/api/verify", data=body, headers={**json_headers, "Origin": base})
    assert no_csrf.status == 403
    other_site = {**json_headers, "Origin": "http://evil.example", "X-CSRF-Token": csrf}
    assert _request(base + "/ui/api/verify", data=body, headers=other_site).status == 403
    # a one-time link: asked with the token, good once
    link = _request(
        base + "/ui/api/link", data=b"", headers={"Authorization": f"Bearer {served.token}"}
    )
    path = json.loads(link.read())["path"]
    assert _request(base + path).status == 303
    assert _request(base + path).status == 401
    assert (
        _request(base + "/ui/api/link", data=b"", headers={"Authorization": "Bearer nope"}).status
        == 401
    )
    for script in ("/ui/static/ui.js", "/ui/static/ui.css"):
        static = _request(base + script)
        assert static.status == 200 and static.headers["X-Content-Type-Options"] == "nosniff"


def test_login_the_list_and_a_dataset_tabs(page: object, base: str, shots: Path) -> None:
    p = page
    rows = p.locator("table.datasets tbody tr")
    assert rows.count() == 4
    assert p.locator('tr[data-dataset="a"] [data-field="records"]').inner_text() == "2"
    p.screenshot(path=str(shots / "list.png"), full_page=True)
    p.fill("input[name=q]", "hos")
    p.click("form.search button")
    assert p.locator("table.datasets tbody tr").count() == 1
    p.goto(base + "/ui/?sort=records&desc=1")
    assert p.locator("table.datasets tbody tr").first.get_attribute("data-dataset") == "hostile"
    p.click('a[href="/ui/"] >> nth=1')  # the header's Datasets
    p.click('text="a"')
    p.wait_for_url(base + "/ui/datasets/a")
    assert p.locator(".description h1").inner_text() == "Readings"
    assert p.locator('.description a[href="https://example.org/data"]').count() == 1
    assert p.locator('a[href^="javascript:"]').count() == 0
    assert "Creative Commons Zero" in p.locator(".license").inner_text()
    assert p.locator(".attachment table td").all_inner_texts() == ["1", "2"]
    p.screenshot(path=str(shots / "dataset-overview.png"), full_page=True)
    p.click("nav.tabs >> text=Schema")
    assert "v" in p.locator("table.schema").inner_text()
    p.screenshot(path=str(shots / "dataset-schema.png"), full_page=True)
    p.click("nav.tabs >> text=Data")
    assert p.locator("table.data th").all_inner_texts()[:3] == ["offset", "op", "system_time"]
    assert p.locator("table.data tbody tr").count() == 2
    p.screenshot(path=str(shots / "dataset-data.png"), full_page=True)
    p.click("nav.tabs >> text=History")
    blocks = p.locator("article.block")
    assert blocks.first.locator("strong").inner_text() == "AddData"
    assert "logical hash" in blocks.first.locator("table.files").inner_text()
    first_block = blocks.last.locator(".hash").inner_text().removeprefix("block ")
    p.screenshot(path=str(shots / "dataset-history.png"), full_page=True)
    # the data as of the Seed: nothing yet
    p.goto(f"{base}/ui/datasets/a?tab=data&as_of={first_block[:16]}")
    assert p.locator("table.data tbody tr").count() == 0


def test_lineage_click_through(page: object, base: str, shots: Path) -> None:
    p = page
    p.goto(base + "/ui/datasets/b?tab=lineage")
    assert p.locator("svg.lineage g.node").count() == 2
    assert p.locator("svg.lineage g.current").get_attribute("data-name") == "b"
    p.screenshot(path=str(shots / "lineage.png"), full_page=True)
    p.click('svg.lineage g.node[data-name="a"]')
    p.wait_for_url(base + "/ui/datasets/a?tab=lineage")
    assert p.locator("svg.lineage g.current").get_attribute("data-name") == "a"
    p.click("header >> text=Lineage")  # the workspace's
    p.wait_for_url(base + "/ui/lineage")
    assert p.locator("svg.lineage g.node").count() == 4
    assert p.locator("svg.lineage path.edge").count() == 1
    p.screenshot(path=str(shots / "lineage-workspace.png"), full_page=True)
    p.goto(base + "/ui/datasets/b")
    assert "upper" in p.locator("pre.sql").inner_text()
    assert p.locator("pre.sql .kw").first.inner_text() == "SELECT"


def test_hostile_strings_are_shown_inert(page: object, base: str, shots: Path) -> None:
    p = page
    for tab in ("overview", "data", "history"):
        p.goto(f"{base}/ui/datasets/hostile?tab={tab}")
        assert p.evaluate("window.__pwned") is None
        assert p.locator("script").count() == 1  # ui.js alone
        assert p.locator("main img").count() == 0
    p.goto(base + "/ui/datasets/hostile?tab=data")
    cells = p.locator("table.data tbody td").all_inner_texts()
    assert "<script>window.__pwned = 3</script>" in cells
    assert any("bell\\x07 escape\\x1b[31m red" in c for c in cells)
    p.screenshot(path=str(shots / "hostile-data.png"), full_page=True)
    p.goto(base + "/ui/datasets/hostile")
    assert HOSTILE_TEXT in p.locator(".description").inner_text()
    assert p.locator(".keyword").inner_text() == HOSTILE_TEXT
    assert p.evaluate("window.__pwned") is None and p.dialogs == []


def test_a_live_update_after_an_ingest(page: object, served: Served, base: str) -> None:
    p = page
    history = p.context.new_page()
    history.goto(base + "/ui/datasets/a?tab=history")
    for shown in (p, history):
        shown.wait_for_selector("#live.on")
        shown.evaluate("window.__still_here = true")
    cell = p.locator('tr[data-dataset="a"] [data-field="records"]')
    before = int(cell.inner_text())
    top = int(history.locator("article.block .seq").first.inner_text().removeprefix("#"))
    (served.ws / "more.csv").write_text("id,v\n7,p\n8,q\n9,r\n")
    ok(served.ws, "ingest", "a", "more.csv")
    records = 'document.querySelector(\'tr[data-dataset="a"] [data-field="records"]\')'
    p.wait_for_function(f"{records}.textContent === '{before + 3}'")
    history.wait_for_selector("article.block.new")
    new = history.locator("article.block").first
    assert new.locator(".seq").inner_text() == f"#{top + 1}"
    assert new.locator("strong").inner_text() == "AddData"
    assert "logical hash" in new.locator("table.files").inner_text()
    for shown in (p, history):
        assert shown.evaluate("window.__still_here") is True  # no reload


def test_a_pull_with_progress_and_the_page_updated(page: object, served: Served, base: str) -> None:
    p = page
    (served.ws / "inbox" / "one.csv").write_text("city,population\nA,1\nB,2\n")
    p.goto(base + "/ui/datasets/p")
    p.wait_for_selector("#live.on")
    assert p.locator('.dataset-head [data-field="records"]').inner_text() == "0"
    p.click("button[data-action=pull]")
    p.wait_for_selector(".job[data-done]")
    lines = p.locator(".job-lines li").all_inner_texts()
    assert p.locator(".job").get_attribute("data-done") == "ok", lines
    assert lines[0] == "pulling p ..." and "p: 2 records ingested" in lines
    records = "document.querySelector('.dataset-head [data-field=\"records\"]')"
    p.wait_for_function(f"{records}.textContent === '2'")


def test_verify_with_progress(page: object, base: str, shots: Path) -> None:
    p = page
    p.goto(base + "/ui/datasets/a")
    p.wait_for_selector("#live.on")
    p.click("button[data-action=verify]")
    p.wait_for_selector(".job[data-done]")
    assert p.locator(".job").get_attribute("data-done") == "ok"
    lines = p.locator(".job-lines li").all_inner_texts()
    assert lines[0] == "verifying a ..." and lines[-1].endswith("checked: valid")
    assert p.locator('.dataset-head [data-field="verified"]').inner_text() == "verified"
    p.screenshot(path=str(shots / "verify.png"), full_page=True)
    p.goto(base + "/ui/")
    assert p.locator('tr[data-dataset="a"] [data-field="verified"]').inner_text() == "verified"


def test_a_sql_query_and_its_csv_download(page: object, base: str, shots: Path) -> None:
    p = page
    for warm in WARMING:
        warm.join(300)
    p.click("header >> text=SQL")
    p.wait_for_url(base + "/ui/sql")
    p.fill("#sql", "")
    p.locator("#sql").press_sequentially("SELECT id, v FROM hos")
    assert p.locator("#sql-suggest li").all_inner_texts() == ["hostile"]
    p.locator("#sql").press("Tab")
    p.locator("#sql").press_sequentially(" ORDER BY id")
    assert p.input_value("#sql") == "SELECT id, v FROM hostile ORDER BY id"
    p.click("#sql-form button[type=submit]")
    p.wait_for_selector("#sql-result table", timeout=120_000)
    assert p.locator("#sql-result td").nth(1).inner_text() == "<script>window.__pwned = 3</script>"
    assert p.evaluate("window.__pwned") is None
    assert p.locator("#sql-status").inner_text().startswith("3 rows")
    assert p.locator("#sql-result td").nth(5).inner_text() == "bell\\x07 escape\\x1b[31m red"
    p.screenshot(path=str(shots / "sql.png"), full_page=True)
    with p.expect_download() as download:
        p.click("#download-csv")
    text = Path(download.value.path()).read_text()
    assert text.splitlines()[0] == '"id","v"'
    assert len(text.splitlines()) == 4
    with p.expect_download() as download:
        p.click("#download-parquet")
    table = pq.read_table(download.value.path())
    assert table.column("v").to_pylist()[0] == "<script>window.__pwned = 3</script>"
    p.fill("#sql", "SELECT nope FROM hostile")
    p.click("#sql-form button[type=submit]")
    p.wait_for_selector("#sql-error:not([hidden])")
    error = p.locator("#sql-error").inner_text()
    assert "nope" in error and "^ line 1, column 8" in error, error


def test_odf_ui_starts_a_daemon_and_gives_a_one_time_link(tmp_path: Path) -> None:
    ws = new_workspace(tmp_path / "ws")
    config = ws / ".odf" / "config.yaml"
    config.write_text("daemon:\n  address: 127.0.0.1:0\n  httpAddress: 0.0.0.0:0\n")
    failed = odf(ws, "ui", "--no-browser")  # a daemon that cannot start: said in one line
    assert failed.returncode == 1 and not failed.stdout
    assert failed.stderr.splitlines()[-1].startswith(
        "error: the daemon exited with code 1 before serving"
    ), failed.stderr
    config.write_text("daemon:\n  address: 127.0.0.1:0\n  httpAddress: 127.0.0.1:0\n")
    result = odf(ws, "ui", "--no-browser")
    try:
        assert result.returncode == 0, result.stderr
        assert result.stderr.startswith("starting a daemon for this workspace")
        link = result.stdout.strip()
        info = json.loads((ws / ".odf" / "run" / "daemon.json").read_text())
        assert link.startswith(f"http://{info['httpAddress']}/ui/login/")
        first = _request(link)
        assert first.status == 303 and "HttpOnly" in first.headers["Set-Cookie"]
        assert _request(link).status == 401  # once
        # a daemon runs now: it is used; no browser could be opened: the link is printed
        again = odf(ws, "ui", env={"BROWSER": "false"})
        assert again.returncode == 0, again.stderr
        assert again.stderr.startswith("no browser could be opened")
        assert again.stdout.strip().startswith(f"http://{info['httpAddress']}/ui/login/")
        assert again.stdout.strip() != link
    finally:
        ok(ws, "daemon", "stop")
