"""The scheduler's lineage never picks a clone: a replica changes only by syncing."""

from __future__ import annotations

from pathlib import Path

import pytest

from common.odf.events import SetPollingSource
from common.odf.fragments import EnvVar, FetchStepContainer, MergeStrategyAppend, ReadStepNdJson
from common.serde.yaml_codec import load_snapshots
from coordinator.daemon.scheduler import _dependents
from coordinator.dataset.provenance import (
    RunRefused,
    check_may_run,
    check_source_trusted,
    provenance,
    record_detached,
    record_trusted,
    source_commands,
)
from coordinator.sharing.remote_refs import parse_location
from coordinator.sharing.repos import forget_pull, remember
from coordinator.workspace import Workspace
from tests.support.datasets import derivative, root


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    ws = Workspace.init(tmp_path / "ws")
    text = "\n---\n".join(
        [
            root("src", ["event_time TIMESTAMP", "v STRING"], read="NdJson"),
            derivative("cloned", "SELECT * FROM src", ["src"]),
            derivative("local", "SELECT * FROM src", ["src"]),
        ]
    )
    for snapshot in load_snapshots(text):
        ws.create_dataset(snapshot)
    remote = parse_location("https://example.org/cloned", where="test")
    remember(ws.open_dataset("cloned").layout, pull=remote)
    return ws


def test_new_and_moved_dependents_leave_clones_out(ws: Workspace) -> None:
    datasets = ws.list_datasets()
    assert _dependents(datasets, moved={"src"}, new=set()) == ["local"]
    assert _dependents(datasets, moved=set(), new={"cloned", "local"}) == ["local"]


def test_one_place_refuses_what_a_clone_would_run(ws: Workspace) -> None:
    layout = ws.open_dataset("cloned").layout
    with pytest.raises(
        RunRefused,
        match=r"^dataset 'cloned' is a clone of https://example.org/cloned: running its transform"
        r" is refused here",
    ):
        check_may_run(layout, "cloned", "running its transform")
    check_may_run(ws.open_dataset("local").layout, "local", "running its transform")
    forget_pull(layout)  # what odf detach does, with record_detached
    check_may_run(layout, "cloned", "running its transform")


def test_commands_written_elsewhere_run_only_as_trusted(ws: Workspace) -> None:
    (source,) = [
        e
        for s in load_snapshots(
            """kind: DatasetSnapshot
version: 1
content:
  name: p
  kind: Root
  metadata:
  - kind: SetPollingSource
    fetch: {kind: Container, image: "evil:1", args: ["--all", "a b"], env: [{name: TOKEN}]}
    prepare: [{kind: Pipe, command: [sh, -c, "rm -rf ~"]}, {kind: Decompress, format: Gzip}]
    read: {kind: NdJson, schema: ["event_time TIMESTAMP"]}
    merge: {kind: Append}
"""
        )
        for e in s.metadata
    ]
    commands = source_commands(source)  # type: ignore[arg-type]
    assert commands == [
        "container evil:1 args --all 'a b' env TOKEN",
        "pipe sh -c 'rm -rf ~'",
    ]
    layout = ws.open_dataset("src").layout
    check_source_trusted(layout, "src", source)  # type: ignore[arg-type]  # authored here
    record_detached(layout, "https://example.org/src")
    with pytest.raises(
        RunRefused, match=r"runs 2 command\(s\) here; review them with `odf trust src`$"
    ):
        check_source_trusted(layout, "src", source)  # type: ignore[arg-type]
    record_trusted(layout, commands[:1])
    with pytest.raises(RunRefused, match=r"\(they changed since they were trusted\)"):
        check_source_trusted(layout, "src", source)  # type: ignore[arg-type]
    record_trusted(layout, commands)
    check_source_trusted(layout, "src", source)  # type: ignore[arg-type]
    assert provenance(layout).written_at == "https://example.org/src"


def test_a_changed_container_env_value_needs_trust_again(ws: Workspace) -> None:
    def source(value: str) -> SetPollingSource:
        return SetPollingSource(
            fetch=FetchStepContainer(
                image="img:1", env=(EnvVar(name="MODE", value=value), EnvVar(name="TOKEN"))
            ),
            read=ReadStepNdJson(schema=("event_time TIMESTAMP",)),
            merge=MergeStrategyAppend(),
        )

    trusted = source_commands(source("safe"))
    assert trusted == ["container img:1 env MODE=safe TOKEN"]
    assert source_commands(source("a b")) == ["container img:1 env 'MODE=a b' TOKEN"]
    layout = ws.open_dataset("src").layout
    record_detached(layout, "https://example.org/src")
    record_trusted(layout, trusted)
    check_source_trusted(layout, "src", source("safe"))
    with pytest.raises(RunRefused, match=r"\(they changed since they were trusted\)"):
        check_source_trusted(layout, "src", source("rm -rf ~"))
