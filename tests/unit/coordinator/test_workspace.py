"""The workspace: finding it, creating datasets from snapshots, keys, lookups, deletion."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from common.odf.errors import NotFoundError, OdfError, ValidationError
from common.odf.events import AddData, AddPushSource, SetInfo, SetTransform
from common.odf.fragments import (
    DatasetKind,
    MergeStrategyAppend,
    ReadStepCsv,
    SqlQueryStep,
    TransformInput,
    TransformSql,
)
from common.odf.keys import dataset_id_of_private_key
from common.odf.snapshot import DatasetSnapshot
from coordinator.dataset import AlreadyExistsError, DatasetNotFoundError
from coordinator.workspace import Workspace
from tests.unit.coordinator.events import at


def root(name: str = "com.example.root") -> DatasetSnapshot:
    return DatasetSnapshot(
        name=name, kind=DatasetKind.ROOT, metadata=(SetInfo(description="a root"),)
    )


def derivative(name: str, *inputs: str, alias: str | None = None) -> DatasetSnapshot:
    transform = SetTransform(
        inputs=tuple(TransformInput(dataset_ref=i, alias=alias) for i in inputs),
        transform=TransformSql(engine="spark", query="select * from x"),
    )
    return DatasetSnapshot(name=name, kind=DatasetKind.DERIVATIVE, metadata=(transform,))


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace.init(tmp_path)


def test_find_walks_up_from_a_subdirectory(ws: Workspace, tmp_path: Path) -> None:
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    assert Workspace.find(sub).root == ws.root
    with pytest.raises(NotFoundError, match=r"not inside an odf workspace \(run `odf init`\)"):
        Workspace.find(tmp_path.parent)


def test_init_twice(ws: Workspace) -> None:
    with pytest.raises(AlreadyExistsError):
        Workspace.init(ws.root)
    assert Workspace.init(ws.root, exist_ok=True).root == ws.root


def test_create_dataset_with_a_fresh_identity(ws: Workspace) -> None:
    ds = ws.create_dataset(root(), system_time=at(0))
    blocks = list(ds.iter_blocks())
    assert [type(b.event).__name__ for _, b in reversed(blocks)] == ["Seed", "SetInfo"]
    assert all(b.system_time == at(0) for _, b in blocks)
    key = ws.key_path(ds)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(ws.keys_dir.stat().st_mode) == 0o700
    assert dataset_id_of_private_key(key.read_bytes()) == ds.id
    other = ws.create_dataset(root("com.example.other"))
    assert other.id != ds.id
    assert ds.layout.root == ws.datasets_dir / "com.example.root"


def test_names_are_case_insensitive(ws: Workspace) -> None:
    ds = ws.create_dataset(root("Com.Example.Root"))
    assert ws.open_dataset("com.example.root").layout.root == ds.layout.root
    assert ws.open_dataset(ds.id.to_did()).alias == "Com.Example.Root"
    with pytest.raises(AlreadyExistsError, match="already exists"):
        ws.create_dataset(root("COM.EXAMPLE.ROOT"))
    assert [d.alias for d in ws.list_datasets()] == ["Com.Example.Root"]


@pytest.mark.parametrize(
    ("name", "message"),
    [("bad name", "name: "), ("a..b", "name: "), ("acc/name", "account names are not supported")],
)
def test_bad_names_are_refused(ws: Workspace, name: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ws.create_dataset(root(name))
    assert ws.list_datasets() == []


def test_unknown_dataset(ws: Workspace) -> None:
    with pytest.raises(DatasetNotFoundError, match="dataset 'nope' not found"):
        ws.open_dataset("nope")
    with pytest.raises(DatasetNotFoundError):
        ws.open_dataset("did:odf:fed01" + "00" * 32)


def test_derivative_inputs_are_resolved_and_queries_normalized(ws: Workspace) -> None:
    src = ws.create_dataset(root())
    ds = ws.create_dataset(derivative("com.example.deriv", "com.example.root"))
    transform = ds.state().transform
    assert transform is not None
    assert transform.inputs == (
        TransformInput(dataset_ref=src.id.to_did(), alias="com.example.root"),
    )
    assert transform.transform.query is None
    assert transform.transform.queries == (SqlQueryStep(query="select * from x"),)


def test_unknown_input_names_the_field(ws: Workspace) -> None:
    with pytest.raises(
        ValidationError,
        match=r"^metadata\[0\].inputs\[0\].datasetRef: input dataset 'missing' not found",
    ):
        ws.create_dataset(derivative("com.example.deriv", "missing"))
    assert ws.list_datasets() == []
    assert not any(ws.keys_dir.iterdir())


def test_snapshot_cannot_hold_data_events(ws: Workspace) -> None:
    snapshot = DatasetSnapshot(
        name="x", kind=DatasetKind.ROOT, metadata=(AddData(new_watermark=at(0)),)
    )
    with pytest.raises(ValidationError, match=r"metadata\[0\]: AddData events cannot appear"):
        ws.create_dataset(snapshot)


def test_delete_refuses_while_used_as_input(ws: Workspace) -> None:
    src = ws.create_dataset(root())
    ws.create_dataset(derivative("com.example.deriv", "com.example.root"))
    with pytest.raises(OdfError, match=r"is an input of com\.example\.deriv"):
        ws.delete_dataset("com.example.root")
    ws.delete_dataset("com.example.deriv")
    key = ws.key_path(src)
    ws.delete_dataset("COM.example.root")
    assert ws.list_datasets() == []
    assert not key.exists()
    assert [p.name for p in ws.datasets_dir.iterdir()] == []


def test_chain_rule_errors_name_the_snapshot_event(ws: Workspace) -> None:
    bad = AddPushSource(source_name="s", read=ReadStepCsv(), merge=MergeStrategyAppend())
    snapshot = DatasetSnapshot(
        name="x", kind=DatasetKind.ROOT, metadata=(SetInfo(description="d"), bad)
    )
    with pytest.raises(ValidationError, match=r"^metadata\[1\] \(AddPushSource.read.schema\)"):
        ws.create_dataset(snapshot)
    assert ws.list_datasets() == []
