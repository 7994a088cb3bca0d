"""``odf verify`` through the CLI on a real pipeline, clean and after each kind of tampering.

One workspace is built once for the module (a root dataset with pushed data and a derivative
pulled through the embedded engine, in two transactions), then copied for every case, so the
Spark work is shared: tampering cases run ``--integrity`` (no engine); the clean workspace and
one forged derivative are replayed with the pinned embedded engine.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from common.hashing import logical_hash_parquet, physical_hash_file
from common.odf.events import AddData, ExecuteTransform
from common.odf.multihash import Multihash
from common.serde.flatbuffers_codec import block_hash, decode_block, encode_block
from coordinator.dataset import Dataset
from coordinator.engine.version import embedded_engine_version
from coordinator.workspace import Workspace
from tests.support.cli import odf, ok
from tests.support.datasets import derivative, root
from tests.support.workspace import add, dataset, ingest, new_workspace

pytestmark = pytest.mark.e2e


CITIES = root(
    "cities", ["event_time TIMESTAMP", "city STRING", "population BIGINT"], source="default"
)
BIG_CITIES = derivative(
    "big-cities",
    "SELECT event_time, city, population * 10 AS population_x10 FROM cities"
    " WHERE population > 1000",
    ["cities"],
)

BATCHES = (
    "event_time,city,population\n"
    "2024-01-01T00:00:00Z,A,500\n2024-01-02T00:00:00Z,B,5000\n2024-01-03T00:00:00Z,C,7000\n",
    "event_time,city,population\n2024-01-04T00:00:00Z,D,9000\n2024-01-05T00:00:00Z,E,50\n",
)


@dataclass(frozen=True)
class Built:
    path: Path
    root_blocks: list[Multihash]
    """Oldest first."""
    derived_blocks: list[Multihash]


def blocks_of(ds: Dataset) -> list[Multihash]:
    return [h for h, _ in ds.iter_blocks()][::-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    ws = new_workspace(tmp_path_factory.mktemp("verify") / "ws")
    # At most three input records per transaction: each ingested batch is one transaction.
    (ws / ".odf" / "config.yaml").write_text("transform:\n  maxInputRecords: 3\n")
    add(ws, CITIES, BIG_CITIES)
    for i, batch in enumerate(BATCHES):
        ingest(ws, "cities", batch, file=f"batch{i}.csv")
    ok(ws, "pull", "big-cities")
    workspace = Workspace(ws)
    root, derived = workspace.open_dataset("cities"), workspace.open_dataset("big-cities")
    built = Built(ws, blocks_of(root), blocks_of(derived))
    transactions = [b for b in built.derived_blocks if _is(derived, b, ExecuteTransform)]
    assert len(transactions) == 2, "expected one transaction per ingested batch"
    return built


def _is(ds: Dataset, block: Multihash, kind: type) -> bool:
    return isinstance(ds.get_block(block).event, kind)


def copy_of(built: Built, tmp_path: Path) -> Path:
    target = tmp_path / "ws"
    shutil.copytree(built.path, target, symlinks=True)
    return target


def event_of(ds: Dataset, block: Multihash) -> AddData | ExecuteTransform:
    event = ds.get_block(block).event
    assert isinstance(event, AddData | ExecuteTransform)
    return event


def test_a_clean_workspace_verifies_with_replay(built: Built, tmp_path: Path) -> None:
    ws = copy_of(built, tmp_path)
    out = ok(ws, "verify", "--recursive", "big-cities")
    rows = [line.split() for line in out.splitlines()[1:] if line.startswith("big-cities ")]
    assert [r[:2] for r in rows] == [["big-cities", str(i)] for i in (3, 4)]
    assert [r[3:7] for r in rows] == [
        ["ExecuteTransform", "0..1", "ok", "ok"],
        ["ExecuteTransform", "2..2", "ok", "ok"],
    ]
    assert "cities: ok (5 blocks, 2 transactions, 0 replayed)" in out
    # It says which engine replayed: the provider and the version the transform is pinned to.
    pinned = embedded_engine_version()
    assert (
        f"big-cities: ok (5 blocks, 2 transactions, 2 replayed), with engine embedded {pinned}"
        in out
    )
    doc = json.loads(ok(ws, "verify", "--integrity", "-o", "json", "big-cities"))
    assert doc[0]["ok"] is True and doc[0]["replayed"] is False
    assert {t["engine"] for t in doc[0]["transactions"]} == {None}


def flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _data_byte(ws: Path, b: Built) -> tuple[str, Multihash, str]:
    ds = dataset(ws, "cities")
    event = event_of(ds, b.root_blocks[4])
    assert event.new_data is not None
    flip_middle_byte(ds.data_path(event.new_data.physical_hash))
    return "cities", b.root_blocks[4], "not to the physical hash the block records"


def _edited_block(ws: Path, b: Built) -> tuple[str, Multihash, str]:
    ds = dataset(ws, "big-cities")
    name = b.derived_blocks[3]
    path = ds.layout.block_path(name)
    block = decode_block(path.read_bytes())
    assert isinstance(block.event, ExecuteTransform) and block.event.new_watermark is not None
    later = block.event.new_watermark.replace(year=2099)
    path.write_bytes(encode_block(replace(block, event=replace(block.event, new_watermark=later))))
    return "big-cities", name, "its bytes hash to"


def _deleted_data_file(ws: Path, b: Built) -> tuple[str, Multihash, str]:
    ds = dataset(ws, "big-cities")
    event = event_of(ds, b.derived_blocks[4])
    assert event.new_data is not None
    ds.data_path(event.new_data.physical_hash).unlink()
    return "big-cities", b.derived_blocks[4], "(offsets 2..2) is missing"


def _changed_checkpoint(ws: Path, b: Built) -> tuple[str, Multihash, str]:
    ds = dataset(ws, "big-cities")
    event = event_of(ds, b.derived_blocks[3])
    assert event.new_checkpoint is not None
    path = ds.checkpoint_path(event.new_checkpoint.physical_hash)
    path.write_bytes(path.read_bytes().replace(b"2024", b"2023"))
    return "big-cities", b.derived_blocks[3], "checkpoints/"


TAMPERINGS: dict[str, Callable[[Path, Built], tuple[str, Multihash, str]]] = {
    "changed byte in a data file": _data_byte,
    "edited block": _edited_block,
    "deleted data file": _deleted_data_file,
    "changed checkpoint": _changed_checkpoint,
}


@pytest.mark.parametrize("case", list(TAMPERINGS))
def test_tampering_fails_naming_the_block(built: Built, tmp_path: Path, case: str) -> None:
    ws = copy_of(built, tmp_path)
    name, block, what = TAMPERINGS[case](ws, built)
    result = odf(ws, "verify", "--integrity", "--recursive", "big-cities")
    assert result.returncode == 1, result.stdout
    mismatches = [line for line in result.stderr.splitlines() if line.startswith("mismatch:")]
    assert mismatches, result.stderr
    first = mismatches[0]
    sequence = built.root_blocks.index(block) if name == "cities" else None
    if sequence is None:
        sequence = built.derived_blocks.index(block)
    assert first.startswith(f"mismatch: {name}: block {sequence} ({block}): "), first
    assert what in first
    assert result.stderr.splitlines()[-1].startswith("error: verification failed:")


def test_a_swapped_head_fails_naming_the_hidden_block(built: Built, tmp_path: Path) -> None:
    """``refs/head`` moved back one block: the last ingest disappears from the root."""
    ws = copy_of(built, tmp_path)
    root = dataset(ws, "cities")
    root.layout.head_ref_path.write_text(built.root_blocks[3].to_multibase())
    result = odf(ws, "verify", "--integrity", "-r", "big-cities")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0] == (
        f"mismatch: cities: refs/head: names block 3 ({built.root_blocks[3]}), but block 4"
        f" ({built.root_blocks[4]}) in blocks/ follows it: the head was moved back, hiding it"
    )
    # The transaction that read the hidden block is named too.
    assert lines[1].startswith(f"mismatch: big-cities: block 4 ({built.derived_blocks[4]}):")


def test_a_head_swapped_with_another_datasets(built: Built, tmp_path: Path) -> None:
    ws = copy_of(built, tmp_path)
    root, derived = dataset(ws, "cities"), dataset(ws, "big-cities")
    a, b = root.layout.head_ref_path, derived.layout.head_ref_path
    head_a, head_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(head_b)
    b.write_bytes(head_a)
    result = odf(ws, "verify", "--integrity", "cities", "big-cities")
    assert result.returncode == 1
    assert result.stderr.splitlines()[:2] == [
        f"mismatch: cities: refs/head: names block {built.derived_blocks[-1]}, which is not in"
        " blocks/",
        f"mismatch: big-cities: refs/head: names block {built.root_blocks[-1]}, which is not in"
        " blocks/",
    ]


def forge_last_transaction(ws: Path, b: Built) -> Multihash:
    """Change the derivative's last records and rewrite its metadata consistently.

    The data file gets other values, its block is re-encoded with the new hashes and size and
    stored under its new hash, and ``refs/head`` points at it: every stored byte agrees, so
    only running the transaction again can tell.
    """
    ds = dataset(ws, "big-cities")
    name = b.derived_blocks[-1]
    block = ds.get_block(name)
    event = block.event
    assert isinstance(event, ExecuteTransform) and event.new_data is not None
    old = ds.data_path(event.new_data.physical_hash)
    table = pq.read_table(old)
    column = table.schema.get_field_index("population_x10")
    forged = table.set_column(
        column, table.field(column), pc.add(table.column(column), pa.scalar(1, pa.int64()))
    )
    new = ds.layout.data_dir / "forged"
    pq.write_table(forged, new)
    new_data = replace(
        event.new_data,
        logical_hash=logical_hash_parquet(new),
        physical_hash=physical_hash_file(new),
        size=new.stat().st_size,
    )
    new.rename(ds.data_path(new_data.physical_hash))
    old.unlink()
    data = encode_block(replace(block, event=replace(event, new_data=new_data)))
    forged_name = block_hash(data)
    ds.layout.block_path(forged_name).write_bytes(data)
    ds.layout.block_path(name).unlink()
    ds.layout.head_ref_path.write_text(forged_name.to_multibase())
    return forged_name


def test_a_consistent_forgery_passes_integrity_and_fails_replay(
    built: Built, tmp_path: Path
) -> None:
    ws = copy_of(built, tmp_path)
    forged = forge_last_transaction(ws, built)
    ok(ws, "verify", "--integrity", "big-cities")
    result = odf(ws, "verify", "big-cities")
    assert result.returncode == 1, result.stdout
    (mismatch,) = [line for line in result.stderr.splitlines() if line.startswith("mismatch:")]
    assert mismatch.startswith(
        f"mismatch: big-cities: block 4 ({forged}): replay differs: newData.logicalHash:"
    )
    assert "the records differ" in mismatch
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("big-cities ")]
    assert [r[5:7] for r in rows] == [["ok", "ok"], ["ok", "FAILED"]]
