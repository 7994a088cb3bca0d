"""The daemon's push endpoint (``daemon.smart_push.PushServer``) on a real HTTP server in
process, driven by the real client (``sharing.smart_push_client``) and by hand: the token is
required before anything happens, only the session's announced uploads are taken, hostile
uploads are refused with the dataset unchanged and the session's staging removed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from coordinator.daemon.smart_pull import MAX_MESSAGE_BYTES
from coordinator.sharing import smart_messages as msg
from coordinator.sharing import smart_push_messages as push_msg
from coordinator.sharing.errors import RemoteError
from coordinator.sharing.objects import ObjectKind
from coordinator.sharing.smart_codec import Dialect, ObjectFile, Phase, codec
from coordinator.sharing.smart_push_client import push_smart
from coordinator.sharing.transfer import Options, Outcome
from coordinator.workspace import Workspace
from tests.support.smart_listener import TOKEN, Server, smart_listener
from tests.unit.sharing.test_transfer import append_slices, files_of, source_dataset


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with smart_listener(Workspace.init(tmp_path / "server")) as found:
        yield found


def test_the_client_pushes_a_new_dataset_then_only_what_is_new(
    tmp_path: Path, server: Server
) -> None:
    src = source_dataset(tmp_path / "src", 2)
    first = push_smart(src, server.location, TOKEN, Options())
    assert (first.outcome, first.blocks, first.objects) == (Outcome.UPDATED, 4, 2)
    pushed = server.ws.open_dataset("cities")
    assert pushed.head() == src.head() and files_of(pushed) == files_of(src)
    append_slices(src, 2, 1)
    second = push_smart(src, server.location, TOKEN, Options())
    assert (second.blocks, second.objects, second.old_head) == (1, 1, first.new_head)
    assert pushed.head() == src.head() and server.commits == ["cities", "cities"]
    assert push_smart(src, server.location, TOKEN, Options()).outcome is Outcome.UP_TO_DATE
    assert server.staging() == []


@pytest.mark.parametrize("token", [None, "", "Bearer x", TOKEN + "x", TOKEN[:-1]])
def test_a_push_without_the_token_is_refused_before_anything(
    server: Server, token: str | None
) -> None:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    with pytest.raises(InvalidStatus) as e:
        connect(f"ws://{server.address}/cities/push", additional_headers=headers, proxy=None)
    assert e.value.response.status_code == 401
    assert server.staging() == [] and server.ws.list_datasets() == []


def test_the_client_reports_a_refused_token(tmp_path: Path, server: Server) -> None:
    src = source_dataset(tmp_path / "src", 1)
    with pytest.raises(RemoteError, match=r"refused the token \(HTTP 401\)"):
        push_smart(src, server.location, "wrong", Options())
    assert server.ws.list_datasets() == []


@pytest.mark.parametrize("dialect", ["spec", "reference"])
def test_hostile_uploads_are_refused_and_change_nothing(
    tmp_path: Path, server: Server, dialect: str
) -> None:
    speaking = codec(Dialect(dialect))
    src = source_dataset(tmp_path / "src", 1)
    push_smart(src, server.location, TOKEN, Options())
    served = server.ws.open_dataset("cities")
    base = src.head()
    append_slices(src, 1, 1)
    before = (served.head(), files_of(served))
    new = [(h, src.get_block_bytes(h)) for h, _ in src.iter_blocks() if h != base][:1]
    (data,) = [
        p for p in src.layout.data_dir.iterdir() if not (served.layout.data_dir / p.name).exists()
    ]
    h = push_msg.parse_hash(data.name, "data", "test")
    auth = {"Authorization": f"Bearer {TOKEN}", msg.VERSION_HEADER: msg.VERSION}
    with connect(
        f"ws://{server.address}/cities/push",
        additional_headers=auth,
        proxy=None,
        max_size=MAX_MESSAGE_BYTES,
    ) as ws:

        def ask(message: dict[str, Any], phase: Phase) -> dict[str, Any]:
            ws.send(json.dumps(message))
            return speaking.answer(json.loads(ws.recv(timeout=10)), phase, "test")

        size = push_msg.SizeEstimation(1, 1, len(new[0][1]), data.stat().st_size)
        request = speaking.push_request(push_msg.PushRequest(src.id, base, size))
        assert ask(request, Phase.PUSH_REQUEST) == {}
        assert ask(speaking.metadata(new, Phase.PUSH_METADATA), Phase.PUSH_METADATA) == {}
        asked = [ObjectFile(ObjectKind.DATA, h, data.stat().st_size)]
        reply = ask(speaking.object_files(asked, Phase.PUSH_OBJECTS), Phase.PUSH_OBJECTS)
        (strategy,) = speaking.read_strategies(reply, Phase.PUSH_OBJECTS, "test")
        assert strategy.target is not None
        url = strategy.target.url
        content = data.read_bytes()
        key = url.split("/")[-3]

        def put(target: str, body: object, **headers: str) -> requests.Response:
            return requests.put(target, data=body, headers=headers, timeout=10)

        assert put(url, content[:-1]).status_code == 400  # fewer bytes than its block names
        assert put(url, iter([content])).status_code == 411  # chunked
        other = f"http://{server.address}/cities/push/{'A' * 43}/data/{h}"
        assert put(other, content).status_code == 404  # another (no) session
        renamed = url.replace("/cities/push/", "/towns/push/")
        assert put(renamed, content).status_code == 404
        foreign = push_msg.parse_hash("f1620" + "ab" * 32, "h", "t")
        assert put(url.replace(str(h), str(foreign)), content).status_code == 409
        flipped = bytes([content[0] ^ 1]) + content[1:]
        refused = put(url, flipped)
        assert refused.status_code == 400 and "content was changed" in refused.text
        assert key in {p.name for p in server.staging()}
        done = speaking.uploads_done()
        if done is not None:
            ws.send(json.dumps(done))
        ws.send("{}")
        assert "1 objects were not uploaded" in ws.recv(timeout=10)
    assert (served.head(), files_of(served)) == before and server.commits == ["cities"]
    deadline = threading.Event()
    for _ in range(50):  # the session ends with the connection, in the server's thread
        if not server.staging():
            break
        deadline.wait(0.1)
    assert server.staging() == []
