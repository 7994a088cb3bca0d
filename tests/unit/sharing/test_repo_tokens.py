"""A repository's token kept in ``.odf/repos.json`` (mode 0600) and found for the URLs inside
that repository only; ``Sharing`` sends it to a smart server when no other token is given."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from common.odf.errors import OdfError
from coordinator.app.sharing import Sharing
from coordinator.sharing.remote_refs import RemoteLocation
from coordinator.sharing.repos import RepoRegistry
from coordinator.sharing.transfer import Options, Outcome
from coordinator.workspace import Workspace
from tests.support.smart_listener import TOKEN, smart_listener
from tests.unit.sharing.test_transfer import source_dataset


def test_tokens_are_kept_with_mode_0600_and_found_by_url(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    repos = RepoRegistry(ws)
    repos.add("plain", "odf+http://host:4885")
    repos.add("node", "odf+https://node.example:443/acme", "node-token")
    repos.add("deeper", "odf+https://node.example:443/acme/team", "team-token")
    assert stat.S_IMODE(repos.path.stat().st_mode) == 0o600
    found = repos.token_for
    assert found(RemoteLocation("odf+https://node.example:443/acme/cities")) == "node-token"
    assert found(RemoteLocation("odf+https://node.example:443/acme/team/x")) == "team-token"
    assert found(RemoteLocation("odf+https://node.example:443/acmex/cities")) is None
    assert found(RemoteLocation("odf+http://host:4885/cities")) is None
    repos.delete("node")
    assert found(RemoteLocation("odf+https://node.example:443/acme/cities")) is None
    assert set(map(str, repos.all())) == {"plain", "deeper"}
    assert "node-token" not in repos.path.read_text()


def test_a_damaged_token_is_a_clear_error(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    repos = RepoRegistry(ws)
    repos.path.write_text('{"repos": {"a": "odf+http://h:1"}, "tokens": {"a": 5}}')
    with pytest.raises(OdfError, match=r"repos\.json: the token of 'a' is not one"):
        repos.token_for(RemoteLocation("odf+http://h:1/x"))


def test_a_push_through_a_repository_sends_its_token(tmp_path: Path) -> None:
    client = Workspace.init(tmp_path / "client")
    source_dataset(client.datasets_dir / "cities", 1)
    with smart_listener(Workspace.init(tmp_path / "server")) as server:
        RepoRegistry(client).add("daemon", f"odf+http://{server.address}", TOKEN)
        done = Sharing(client).push("cities", Options(), to="daemon/cities")
        assert done.result.outcome is Outcome.UPDATED
        assert server.ws.open_dataset("cities").head() == client.open_dataset("cities").head()
        pulled = Workspace.init(tmp_path / "pulled")
        RepoRegistry(pulled).add("daemon", f"odf+http://{server.address}", TOKEN)
        assert Sharing(pulled).pull_remote("daemon/cities", Options()).cloned
