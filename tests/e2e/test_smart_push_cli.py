"""``odf push NAME --to odf+http://HOST:PORT/NAME``: the Smart Transfer Protocol's push flow
between real processes, into workspace A served by a real ``odf serve``, from workspace B that
cloned from it. Authenticated with A's daemon's token; a push without it or with a wrong one,
a push onto a head that moved (refused, then ``--force``d through a repository alias) and a
tampered data file
are refused with A's dataset exactly as it was.
"""

from __future__ import annotations

import stat
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_sharing_cli import (
    flip_byte,
    head,
    ingest,
    moved,
    new_objects,
    publisher,
    snapshot,
    workspace,
)
from tests.support.cli import fails, odf, ok
from tests.support.daemon import Served, serving

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def served_a(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Workspace A (dataset ``cities``, one ingest) served by its daemon."""
    a = publisher(tmp_path_factory.mktemp("smart-push") / "a")
    with serving(a) as served:
        yield served


def test_push_to_a_daemon_with_its_token(served_a: Served, tmp_path: Path) -> None:
    a_ds = served_a.ws / ".odf/datasets/cities"
    url = f"odf+http://{served_a.info['httpAddress']}/cities"
    token_file = served_a.ws / ".odf/run/token"
    b = workspace(tmp_path / "b")
    b_ds = b / ".odf/datasets/cities"
    ok(b, "pull", url)
    ingest(b, 2)

    # without the token, with a wrong one: refused, A unchanged
    before = snapshot(a_ds)
    assert "needs its token" in fails(b, "push", "cities", "--to", url)
    wrong = {"ODF_TOKEN": "not-the-token"}
    assert "refused the token (HTTP 401)" in fails(b, "push", "cities", "--to", url, env=wrong)
    assert snapshot(a_ds) == before

    # with the token: only the new block and its data file go; A's daemon serves the new head
    out = ok(b, "push", "cities", "--to", url, "--token-file", str(token_file))
    assert "cities: pushed to" in out and moved(out) == (1, 1), out
    assert snapshot(a_ds) == snapshot(b_ds)
    http = f"http://{served_a.info['httpAddress']}"
    with urllib.request.urlopen(f"{http}/cities/refs/head", timeout=10) as r:
        assert r.read().decode().strip() == head(b_ds)
    token = {"ODF_TOKEN": served_a.token}
    assert "up to date" in ok(b, "push", "cities", env=token)

    # A moved since (an ingest through its daemon), B too: refused naming both heads and the
    # last common block
    common = head(b_ds)
    ingest(served_a.ws, 3)
    ingest(b, 4)
    before = snapshot(a_ds)
    error = fails(b, "push", "cities", env=token)
    assert "diverged" in error and head(a_ds) in error and head(b_ds) in error, error
    assert common in error
    assert snapshot(a_ds) == before

    # --force (through a repository alias) with B's new data file changed after its block
    # named it: the server refuses its bytes, A unchanged, no staging left
    ok(b, "repo", "add", "daemon-a", f"odf+http://{served_a.info['httpAddress']}")
    (tampered,) = new_objects(a_ds, b_ds, "data")
    flip_byte(tampered)
    force = ("push", "cities", "--to", "daemon-a/cities", "--force")
    error = fails(b, *force, env=token)
    assert "physical hash" in error and "content was changed" in error, error
    assert snapshot(a_ds) == before
    assert not any((served_a.ws / ".odf/run/push").iterdir())

    # the file restored: the forced push replaces A's block, A then at B's head
    flip_byte(tampered)
    out = ok(b, *force, env=token)
    assert moved(out) == (1, 1) and snapshot(a_ds) == snapshot(b_ds)
    assert "cities: ok" in ok(served_a.ws, "verify", "cities")


@pytest.mark.parametrize("dialect", ["reference", "spec"])
def test_two_daemons_round_trip_in_each_dialect(
    served_a: Served, served_b: Served, tmp_path: Path, dialect: str
) -> None:
    """A's dataset pulled by C in ``dialect``, pushed by C into B's daemon, pulled back from
    B by D, updated and pushed again: every copy at A's head (D's update then at B's),
    ``-v`` naming the dialect."""
    a_ds = served_a.ws / ".odf/datasets/cities"
    a_url = f"odf+http://{served_a.info['httpAddress']}/cities"
    b_url = f"odf+http://{served_b.info['httpAddress']}/cities"
    speak = ("--smart-dialect", dialect)
    b_token = {"ODF_TOKEN": served_b.token}
    c = workspace(tmp_path / "c")
    pulled = odf(c, "-v", "pull", a_url, *speak)
    assert pulled.returncode == 0, pulled.stderr
    assert "smart.dialect" in pulled.stderr and f"dialect={dialect}" in pulled.stderr
    pushed = odf(c, "-v", "push", "cities", "--to", b_url, *speak, env=b_token)
    assert pushed.returncode == 0, pushed.stderr
    assert f"dialect={dialect}" in pushed.stderr
    b_ds = served_b.ws / ".odf/datasets/cities"
    assert head(b_ds) == head(a_ds)
    d = workspace(tmp_path / "d")
    ok(d, "pull", b_url, *speak)
    assert snapshot(d / ".odf/datasets/cities") == snapshot(a_ds)
    ingest(d, 7)  # pushed through a repository that keeps B's token (no ODF_TOKEN)
    b_http = served_b.info["httpAddress"]
    token_file = str(served_b.ws / ".odf/run/token")
    ok(d, "repo", "add", "b", f"odf+http://{b_http}", "--token-file", token_file)
    assert stat.S_IMODE((d / ".odf/repos.json").stat().st_mode) == 0o600
    out = ok(d, "push", "cities", "--to", "b/cities", *speak)
    assert moved(out) == (1, 1) and head(b_ds) == head(d / ".odf/datasets/cities")
    # kamu-cli's `login` checks a stored token here
    validate = urllib.request.Request(
        f"http://{b_http}/platform/token/validate",
        headers={"Authorization": f"Bearer {served_b.token}"},
    )
    with urllib.request.urlopen(validate, timeout=10) as r:
        assert r.status == 200
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://{b_http}/platform/token/validate", timeout=10)
    assert e.value.code == 401


@pytest.fixture
def served_b(tmp_path: Path) -> Iterator[Served]:
    """Workspace B, empty, served by its daemon (one per dialect: a workspace holds a
    dataset id once)."""
    b = workspace(tmp_path / "b")
    with serving(b) as served:
        yield served
