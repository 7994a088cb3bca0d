"""A clone is a replica: nothing of its publisher's code runs here, by any path, until the
user detaches it and trusts the exact commands its polling source runs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from common.odf.identity import DatasetID
from coordinator.dataset import Dataset
from tests.support.cli import fails, odf, ok
from tests.support.datasets import derivative, root

pytestmark = pytest.mark.e2e


def source(data: Path, marker: Path) -> str:
    """A root whose polling source pipes its file through a shell command of the publisher's
    (it would leave ``marker`` behind)."""
    return f"""kind: DatasetSnapshot
version: 1
content:
  name: src
  kind: Root
  metadata:
  - kind: SetPollingSource
    fetch:
      kind: FilesGlob
      path: {data}
    prepare:
    - kind: Pipe
      command: [sh, -c, "touch {marker}; cat"]
    read:
      kind: NdJson
      schema: ["event_time TIMESTAMP", "v STRING"]
    merge:
      kind: Append
"""


@pytest.fixture(scope="module")
def replica(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(the subscriber's workspace, the marker the publisher's command would create, the
    repository): ``src`` cloned from the publisher, ``mine`` a local derivative over it."""
    base = tmp_path_factory.mktemp("replica")
    marker = base / "publisher-code-ran"
    data = base / "data.ndjson"
    data.write_text('{"event_time": "2024-01-01T00:00:00Z", "v": "a"}\n')
    publisher = base / "publisher"
    publisher.mkdir()
    ok(publisher, "init")
    (publisher / "src.yaml").write_text(source(data, marker))
    ok(publisher, "add", "src.yaml")
    ok(publisher, "push", "src", "--to", f"file://{base}/repo/src")
    subscriber = base / "subscriber"
    subscriber.mkdir()
    ok(subscriber, "init")
    ok(subscriber, "pull", f"file://{base}/repo/src")
    (subscriber / "mine.yaml").write_text(derivative("mine", "SELECT * FROM src", ["src"]))
    ok(subscriber, "add", "mine.yaml")
    assert not marker.exists()
    return subscriber, marker, base / "repo"


def head(ws: Path, name: str) -> str:
    return str(Dataset(ws / ".odf" / "datasets" / name).head())


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["pull", "-r", "mine"], id="pull-recursive-of-a-dependent"),
        pytest.param(["pull", "--all"], id="pull-all"),
        pytest.param(["pull", "mine", "--recursive"], id="recursive-after-the-name"),
        pytest.param(["pull", "--all", "--no-daemon"], id="pull-all-no-daemon"),
    ],
)
def test_no_pull_runs_a_clones_polling_source(
    replica: tuple[Path, Path, Path], args: list[str]
) -> None:
    ws, marker, _ = replica
    before = head(ws, "src")
    result = ok(ws, *args)
    assert not marker.exists(), result
    assert head(ws, "src") == before


def test_the_dependents_pull_says_why_the_clone_was_not_run(
    replica: tuple[Path, Path, Path],
) -> None:
    ws, marker, repo = replica
    out = ok(ws, "pull", "-r", "mine")
    assert f"src: a clone of file://{repo}/src: not run here" in out
    assert not marker.exists()


@pytest.mark.parametrize(
    ("args", "action"),
    [
        pytest.param(
            ["set-transform", "src", "--query", "SELECT 1"],
            "changing its transform",
            id="set-transform",
        ),
        pytest.param(["compact", "src", "--hard"], "compacting it", id="compact"),
    ],
)
def test_a_clones_code_is_not_rewritten_here(
    replica: tuple[Path, Path, Path], args: list[str], action: str
) -> None:
    ws, marker, repo = replica
    before = head(ws, "src")
    error = fails(ws, *args, only_line=True)
    assert error == (
        f"error: dataset 'src' is a clone of file://{repo}/src: {action} is refused here (its"
        " source and transform are its publisher's, synced by odf pull src);"
        " `odf detach src` makes it local"
    )
    assert head(ws, "src") == before and not marker.exists()


def test_detached_the_source_runs_only_once_its_commands_are_trusted(
    tmp_path: Path, replica: tuple[Path, Path, Path]
) -> None:
    _, marker, repo = replica
    ws = tmp_path / "own"
    ws.mkdir()
    ok(ws, "init")
    ok(ws, "pull", f"file://{repo}/src")
    out = ok(ws, "detach", "src")
    assert f"src: detached from file://{repo}/src" in out
    before = head(ws, "src")
    error = fails(ws, "pull", "src", only_line=True)
    assert "runs 1 command(s) here; review them with `odf trust src`" in error
    assert head(ws, "src") == before and not marker.exists()
    refused = fails(ws, "trust", "src", only_line=True)
    assert refused.endswith("not trusted: confirm on a terminal, or give --yes")
    shown = ok(ws, "trust", "src", "--yes")
    assert f"pipe sh -c 'touch {marker}; cat'" in shown
    ok(ws, "pull", "src")
    assert marker.exists()
    marker.unlink()
    assert head(ws, "src") != before


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DatasetID]:
    """A repository holding a root ``a`` and ``b``, a derivative of it with one transaction;
    (the repository, a's id)."""
    base = tmp_path_factory.mktemp("published")
    ws = base / "publisher"
    ws.mkdir()
    ok(ws, "init")
    (ws / "a.yaml").write_text(root("a", ["event_time TIMESTAMP", "v STRING"], read="NdJson"))
    (ws / "b.yaml").write_text(derivative("b", "SELECT event_time, upper(v) AS v FROM a", ["a"]))
    ok(ws, "add", "a.yaml", "b.yaml")
    (ws / "a.ndjson").write_text('{"event_time": "2024-01-01T00:00:00Z", "v": "x"}\n')
    ok(ws, "ingest", "a", str(ws / "a.ndjson"))
    ok(ws, "pull", "b")
    for name in ("a", "b"):
        ok(ws, "push", name, "--to", f"file://{base}/repo/{name}")
    a_id = Dataset(ws / ".odf" / "datasets" / "a").state().id
    assert a_id is not None
    return base / "repo", a_id


def test_a_derivatives_clone_without_its_inputs_verifies_incomplete_then_pulls_them(
    tmp_path: Path, published: tuple[Path, DatasetID]
) -> None:
    """A clone of a derivative pulled alone: verify checks what it can, names the absent
    input and how to get it (exit 3); lineage shows the clone and the external input;
    ``--with-inputs`` clones the input from the same repository, checked to be the one the
    chain names; then the clone verifies, replayed."""
    repo, a_id = published
    ws = tmp_path / "reader"
    ws.mkdir()
    ok(ws, "init")
    ok(ws, "pull", f"file://{repo}/b")

    result = odf(ws, "verify", "b")
    assert result.returncode == 3, result.stderr
    assert "b: INCOMPLETE (" in result.stdout
    assert "1 input not in this workspace" in result.stdout
    assert "mismatch" not in result.stderr
    assert result.stderr.strip() == (
        f"incomplete: b: inputs not in this workspace: a ({a_id.to_did()}); their links"
        " were not checked and no transaction was replayed;"
        f" `odf pull file://{repo}/b --with-inputs` clones them from where b came"
    )
    tree = ok(ws, "inspect", "lineage")
    assert tree.splitlines() == [
        "a (not in this workspace)",
        f"└── b (Derivative, clone of file://{repo}/b)",
    ]

    out = ok(ws, "pull", f"file://{repo}/b", "--with-inputs")
    assert f"a: cloned from file://{repo}/a" in out
    assert Dataset(ws / ".odf" / "datasets" / "a").state().id == a_id
    verified = ok(ws, "verify", "b")
    assert re.search(r"^b: ok \(\d+ blocks, 1 transaction, 1 replayed\)", verified, re.M), verified


def test_with_inputs_refuses_a_sibling_that_is_another_dataset(
    tmp_path: Path, published: tuple[Path, DatasetID]
) -> None:
    repo, _ = published
    other = tmp_path / "other-repo"
    shutil.copytree(repo / "b", other / "b")
    impostor = tmp_path / "impostor"
    impostor.mkdir()
    ok(impostor, "init")
    (impostor / "a.yaml").write_text(root("a", ["event_time TIMESTAMP", "v STRING"]))
    ok(impostor, "add", "a.yaml")
    ok(impostor, "push", "a", "--to", f"file://{other}/a")
    ws = tmp_path / "reader"
    ws.mkdir()
    ok(ws, "init")
    error = fails(ws, "pull", f"file://{other}/b", "--with-inputs", only_line=True)
    assert error.startswith(f"error: file://{other}/b: file://{other}/a is dataset did:odf:")
    assert error.endswith("it was expected to be: nothing cloned")
    assert not (ws / ".odf" / "datasets" / "a").exists()
    assert (ws / ".odf" / "datasets" / "b").exists()  # the clone itself stays
