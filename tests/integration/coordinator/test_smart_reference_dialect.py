"""The Smart Transfer Protocol in the reference's dialect, against a scripted reference peer
(``tests/support/reference_smart_peer.py``: kamu-node's server and kamu-cli's client replayed
message for message, from the wire facts of kamu-cli's source, BSL 1.1, nothing copied): our
client pulls from and pushes to the node, the reference's client pulls from and pushes to our
server; every text message is compared byte for byte with what the reference sends or expects,
and refusals arrive in the reference's forms (``InvalidHead``, ``InvalidInterval``, an
internal error in a close frame)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.odf.errors import OdfError
from coordinator.app.sharing import Sharing
from coordinator.dataset import Dataset
from coordinator.sharing.remote_refs import RemoteLocation
from coordinator.sharing.smart_codec import Dialect
from coordinator.sharing.smart_push_client import push_smart
from coordinator.sharing.transfer import Options, Outcome
from coordinator.sharing.trust import Trust
from coordinator.workspace import Workspace
from tests.support.reference_smart_peer import (
    INCOMPATIBLE,
    Layout,
    ReferenceClient,
    ReferenceNode,
    batch,
    object_file,
    objects_of,
    plan_of,
    reference_node,
    serde,
    transfer_url,
    unbatch,
)
from tests.support.smart_listener import TOKEN, Server, smart_listener
from tests.unit.coordinator.events import add_data_for, write_slice
from tests.unit.sharing.test_transfer import append_slices, files_of, source_dataset

NODE_TOKEN = "kamu-node-access-token"
FOREIGN = "f1620" + "ab" * 32


def oldest_first(layout: Layout) -> list[tuple[str, bytes]]:
    return list(reversed(layout.chain()))


def texts(transcript: list[tuple[str, str]], direction: str) -> list[str]:
    return [t for d, t in transcript if d == direction]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with smart_listener(Workspace.init(tmp_path / "server")) as found:
        yield found


# --- our client, the reference's node ------------------------------------------------------


def test_our_client_clones_and_updates_from_a_reference_node(tmp_path: Path) -> None:
    src = source_dataset(tmp_path / "node", 2)
    node = ReferenceNode(src.layout.root, token=NODE_TOKEN)
    ws = Workspace.init(tmp_path / "ws")
    options = Options(trust=Trust(token=NODE_TOKEN))
    with reference_node(node):
        first = Sharing(ws).pull_remote(node.url, options)
        clone = ws.open_dataset("cities")
        assert clone.head() == src.head()
        assert {f for f in files_of(clone) if not f.startswith("refs/")} <= files_of(src)
        blocks = oldest_first(node.layout)
        files = [object_file(k, h, size) for k, h, size, _ in objects_of(blocks)]
        assert texts(node.transcript, "received") == [
            '{"begin_after":null,"stop_at":null,"force_update_if_diverged":false}',
            "{}",
            serde({"object_files": files}),
        ]
        assert texts(node.transcript, "sent")[0] == serde(
            {"Ok": {"transfer_plan": plan_of(blocks)}}
        )
        # the object URLs' headers went with each download: the version and the token
        assert len(node.object_requests) == 2
        for headers in node.object_requests:
            assert headers["x-odf-smtp-version"] == "1"
            assert headers["Authorization"] == f"Bearer {NODE_TOKEN}"
        append_slices(src, 2, 1)
        node.transcript.clear()
        second = Sharing(ws).pull_remote(node.url, options)
        assert clone.head() == src.head()
    assert (first.result.blocks, second.result.blocks, second.result.objects) == (4, 1, 1)


def test_our_client_pushes_to_a_reference_node_with_its_progress_exchange(
    tmp_path: Path,
) -> None:
    src = source_dataset(tmp_path / "src", 2)
    node = ReferenceNode(tmp_path / "node", token=NODE_TOKEN)
    with reference_node(node):
        location = RemoteLocation(node.url)
        first = push_smart(src, location, NODE_TOKEN, Options(dialect="reference"))
        assert (first.outcome, first.blocks, first.objects) == (Outcome.UPDATED, 4, 2)
        assert node.layout.head() == str(src.head())
        assert files_of(Dataset(node.root)) >= {f for f in files_of(src) if "/" in f}
        blocks = oldest_first(node.layout)
        files = [object_file(k, h, size) for k, h, size, _ in objects_of(blocks)]
        received = texts(node.transcript, "received")
        request = {
            "current_head": None,
            "transfer_plan": plan_of(blocks),
            "force_update_if_diverged": False,
            "visibility_for_created_dataset": "Private",
        }
        assert received[0] == serde(request)
        assert unbatch(json.loads(received[1])["new_blocks"]) == dict(blocks)
        assert received[2] == serde({"object_files": files, "is_truncated": False})
        assert received[3] == '{"details":{"Running":{"uploaded_objects_count":2}}}'
        assert received[4:] == ['{"details":"Complete"}', "{}"]
        assert texts(node.transcript, "sent")[-1] == "{}"
        for headers in node.object_requests:  # the uploads carried the URLs' headers
            assert headers["x-odf-smtp-version"] == "1"
            assert headers["Content-Type"] == "application/octet-stream"

        append_slices(src, 2, 1)
        node.transcript.clear()
        second = push_smart(src, location, NODE_TOKEN, Options())  # auto: the reference's
        assert (second.blocks, second.objects) == (1, 1)
        assert node.layout.head() == str(src.head())
        assert json.loads(texts(node.transcript, "received")[0])["current_head"] == str(
            first.new_head
        )


@pytest.mark.parametrize(
    ("fail", "flow", "refusal"),
    [
        ("push-moved", "push", f"its head is f1620{'cd' * 32}, the push expected"),
        ("push-metadata", "push", "the server refused: Internal error"),
        ("pull-metadata", "pull", "the server refused: Internal error"),
    ],
)
def test_a_reference_nodes_refusals_reach_our_client_in_one_line(
    tmp_path: Path, fail: str, flow: str, refusal: str
) -> None:
    src = source_dataset(tmp_path / "src", 1)
    root = src.layout.root if flow == "pull" else tmp_path / "node"
    node = ReferenceNode(root, fail=fail)
    ws = Workspace.init(tmp_path / "ws")
    with reference_node(node), pytest.raises(OdfError) as e:
        if flow == "push":
            push_smart(src, RemoteLocation(node.url), "t", Options(dialect="reference"))
        else:
            Sharing(ws).pull_remote(node.url, Options(dialect="reference"))
    assert refusal in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert ws.list_datasets() == []
    if flow == "push":
        assert not (tmp_path / "node").exists()


def test_a_reference_node_refuses_our_client_without_its_token(tmp_path: Path) -> None:
    src = source_dataset(tmp_path / "node", 1)
    node = ReferenceNode(src.layout.root, token=NODE_TOKEN)
    ws = Workspace.init(tmp_path / "ws")
    with reference_node(node), pytest.raises(OdfError, match="HTTP 401"):
        Sharing(ws).pull_remote(node.url, Options())


# --- the reference's client, our server ----------------------------------------------------


def test_a_reference_client_pulls_from_our_server(tmp_path: Path, server: Server) -> None:
    src = source_dataset(tmp_path / "src", 2)
    push_smart(src, server.location, TOKEN, Options(dialect="spec"))
    client = ReferenceClient(f"http://{server.address}")
    blocks, objects = client.pull()
    chain = oldest_first(Layout(src.layout.root))
    assert blocks == dict(chain)
    assert objects == {
        f"{k}/{h}": (src.layout.root / k / h).read_bytes() for k, h, _, _ in objects_of(chain)
    }
    received = texts(client.transcript, "received")
    assert received[0] == serde({"Ok": {"transfer_plan": plan_of(chain)}})
    assert list(json.loads(received[1])["blocks"]) == [
        "num_blocks",
        "media_type",
        "encoding",
        "payload",
    ]
    headers = [("x-odf-smtp-version", "1")]
    strategies = [
        {
            "object_file": object_file(k, h, size),
            "pull_strategy": "HttpDownload",
            "download_from": transfer_url(f"http://{server.address}/cities/{k}/{h}", headers),
        }
        for k, h, size, _ in objects_of(chain)
    ]
    assert received[2] == serde({"object_transfer_strategies": strategies})

    # from a block on: only what follows it; from a block not in the chain: InvalidInterval
    client.transcript.clear()
    blocks, _ = client.pull(begin_after=chain[1][0])
    assert set(blocks) == {h for h, _ in chain[2:]}
    client.transcript.clear()
    assert client.pull(begin_after=FOREIGN) == ({}, {})
    invalid = {"head": str(src.head()), "tail": FOREIGN}
    assert texts(client.transcript, "received") == [serde({"Err": {"InvalidInterval": invalid}})]
    client.transcript.clear()
    blocks, _ = client.pull(begin_after=FOREIGN, force=True)  # the whole chain, as forced
    assert blocks == dict(chain)


def test_a_reference_client_pushes_to_our_server(tmp_path: Path, server: Server) -> None:
    src = source_dataset(tmp_path / "src", 2)
    layout = Layout(src.layout.root)
    client = ReferenceClient(f"http://{server.address}", token=TOKEN)
    assert client.push(layout, None) == {}
    pushed = server.ws.open_dataset("cities")
    assert pushed.head() == src.head() and server.commits == ["cities"]
    received = texts(client.transcript, "received")
    assert received[:2] == ['{"Ok":{}}', '{"Ok":{}}']
    (answer,) = json.loads(received[2])["Ok"]["object_transfer_strategies"][:1]
    assert list(answer) == ["object_file", "push_strategy", "upload_to"]
    assert answer["push_strategy"] == "HttpUpload"
    assert list(answer["upload_to"]) == ["url", "headers", "expires_at"]
    assert received[3] == "{}"  # DatasetPushCompleteConfirmed

    old = str(src.head())
    append_slices(src, 2, 1)
    client.transcript.clear()
    assert client.push(layout, old) == {}
    assert pushed.head() == src.head()

    # a head that is not the server's: InvalidHead, in the reference's own field naming
    append_slices(src, 3, 1)
    client.transcript.clear()
    refused = client.push(layout, old)
    moved = {"actual_head": old, "expected_head": str(pushed.head())}
    assert refused == {"Err": {"InvalidHead": moved}}
    assert texts(client.transcript, "received") == [serde(refused)]
    assert server.staging() == [] or all(not p.exists() for p in server.staging())


def test_a_reference_push_without_its_uploads_is_refused_as_a_string(
    tmp_path: Path, server: Server
) -> None:
    """The confirmation is an empty struct, which any object parses as: a refusal at the
    commit is a JSON string (the reference's client fails to parse it, showing it), then a
    close frame with code 1011."""
    src = source_dataset(tmp_path / "src", 1)
    client = ReferenceClient(f"http://{server.address}", token=TOKEN)
    chain = oldest_first(Layout(src.layout.root))
    with client._connect("push") as ws:
        request = {
            "current_head": None,
            "transfer_plan": plan_of(chain),
            "force_update_if_diverged": False,
            "visibility_for_created_dataset": "Private",
        }
        client.send(ws, request)
        assert client.recv(ws) == '{"Ok":{}}'
        client.send(ws, {"new_blocks": batch(chain)})
        assert client.recv(ws) == '{"Ok":{}}'
        files = [object_file(k, h, size) for k, h, size, _ in objects_of(chain)]
        client.send(ws, {"object_files": files, "is_truncated": False})
        client.recv(ws)
        client.send(ws, {"details": "Complete"})  # without uploading anything
        client.send(ws, {})
        refusal = json.loads(client.recv(ws))
        assert isinstance(refusal, str)
        assert refusal.startswith("refused: push of cities: 1 objects were not uploaded")
        with pytest.raises(Exception) as e:
            client.recv(ws)
    assert "1011" in str(e.value)
    assert server.ws.list_datasets() == []


def test_a_reference_client_with_another_version_gets_the_reference_answer(
    tmp_path: Path, server: Server
) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    push_smart(source_dataset(tmp_path / "src", 1), server.location, TOKEN, Options())
    headers = {"x-odf-smtp-version": "0", "Authorization": f"Bearer {TOKEN}"}
    for flow in ("pull", "push"):
        with pytest.raises(InvalidStatus) as e:
            connect(f"ws://{server.address}/cities/{flow}", additional_headers=headers, proxy=None)
        assert e.value.response.status_code == 400
        assert e.value.response.body.decode() == INCOMPATIBLE


def test_a_forced_reference_push_onto_a_diverged_head_replaces_it(
    tmp_path: Path, server: Server
) -> None:
    """The reference's forced push sends the whole chain and asks about every object of it:
    the blocks the server has are skipped, its objects answered SkipUpload, the server's own
    block after the common one replaced."""
    src = source_dataset(tmp_path / "src", 1)
    push_smart(src, server.location, TOKEN, Options())
    served = server.ws.open_dataset("cities")
    common = src.head()
    with served.staging_dir() as staging:  # the server went its own way
        f = write_slice(staging, 10, 10, name="theirs")
        served.commit(add_data_for(f, 9, 10, 10), data_file=f, expected_head=common)
    append_slices(src, 1, 1)
    client = ReferenceClient(f"http://{server.address}", token=TOKEN)
    theirs = str(served.head())
    refused = client.push(Layout(src.layout.root), theirs)  # not forced: the chains diverged
    assert "diverged" in refused["Err"]["Internal"]["error_message"]
    client.transcript.clear()
    assert client.push(Layout(src.layout.root), theirs, force=True) == {}
    assert served.head() == src.head()
    answer = json.loads(texts(client.transcript, "received")[2])["Ok"]
    pushes = [s["push_strategy"] for s in answer["object_transfer_strategies"]]
    assert pushes == ["SkipUpload", "HttpUpload"]  # the common block's data file, the new one


def test_an_auto_push_to_a_server_speaking_only_the_spec_dialect_falls_back_to_it(
    tmp_path: Path, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older ``odf serve`` reads every push request as the spec's: it refuses the
    reference's (no ``datasetId``) in the spec's form, and the client pushes again in it."""
    import coordinator.sharing.smart_push_server as push_server

    monkeypatch.setattr(push_server, "detect_push", lambda message: Dialect.SPEC)
    src = source_dataset(tmp_path / "src", 1)
    done = push_smart(src, server.location, TOKEN, Options())
    assert done.outcome is Outcome.UPDATED
    assert server.ws.open_dataset("cities").head() == src.head()
    with pytest.raises(OdfError, match="has no datasetId"):  # told to speak the reference's
        append_slices(src, 1, 1)
        push_smart(src, server.location, TOKEN, Options(dialect="reference"))
