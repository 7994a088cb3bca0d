"""A small real pipeline on disk without an engine: a root dataset and a derivative one.

Every data file is real Parquet with its real physical and logical hash, every checkpoint a
real file, and every block is committed through ``Dataset.commit_events`` (so the chain
rules hold); the derivative's ``ExecuteTransform`` events reference the root's blocks as a
real transaction would. Tests then damage the stored bytes and look at what verify finds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from common.hashing import logical_hash_parquet, physical_hash_file
from common.odf.events import AddData, ExecuteTransform, SetTransform
from common.odf.fragments import (
    Checkpoint,
    DatasetKind,
    DataSlice,
    ExecuteTransformInput,
    OffsetInterval,
    SqlQueryStep,
    TransformInput,
    TransformSql,
)
from common.odf.identity import DatasetID
from common.odf.multihash import Multihash
from coordinator.dataset import CommitItem, Dataset
from coordinator.workspace import Workspace
from tests.unit.coordinator.events import at, seed, set_schema, write_slice

QUERY = "SELECT event_time, city, population FROM root"


def data_slice(path: Path, start: int, count: int) -> DataSlice:
    return DataSlice(
        logical_hash=logical_hash_parquet(path),
        physical_hash=physical_hash_file(path),
        offset_interval=OffsetInterval(start=start, end=start + count - 1),
        size=path.stat().st_size,
    )


def checkpoint_file(directory: Path, text: str) -> tuple[Path, Checkpoint]:
    path = directory / "checkpoint"
    path.write_text(text)
    return path, Checkpoint(physical_hash=physical_hash_file(path), size=path.stat().st_size)


@dataclass
class Pipeline:
    ws: Workspace
    root: Dataset
    derived: Dataset
    root_blocks: list[Multihash]
    """Seed, SetDataSchema, AddData 0..4, AddData 5..9 (with a checkpoint)."""
    derived_blocks: list[Multihash]
    """Seed, SetTransform, SetDataSchema, ExecuteTransform 0..4, ExecuteTransform 5..9."""


def build_pipeline(tmp_path: Path) -> Pipeline:
    ws = Workspace.init(tmp_path)
    root = Dataset(ws.datasets_dir / "root")
    root_blocks = root.commit_events(
        [seed(b"root"), set_schema()], expected_head=None, system_time=at(0)
    )
    for i, (start, count) in enumerate(((0, 5), (5, 5))):
        root_blocks.append(_add_data(root, start, count, with_checkpoint=i == 1, hours=i + 1))
    derived = Dataset(ws.datasets_dir / "derived")
    transform = SetTransform(
        inputs=(TransformInput(dataset_ref=root.id.to_did(), alias="root"),),
        transform=TransformSql(engine="spark", version="v1", queries=(SqlQueryStep(query=QUERY),)),
    )
    derived_blocks = derived.commit_events(
        [seed(b"derived", DatasetKind.DERIVATIVE), transform, set_schema()],
        expected_head=None,
        system_time=at(0),
    )
    previous: Multihash | None = None
    for i, (start, count) in enumerate(((0, 5), (5, 5))):
        block = root_blocks[2 + i]
        derived_blocks.append(
            _execute(derived, root.id, previous, block, start, count, hours=i + 1)
        )
        previous = block
    return Pipeline(ws, root, derived, root_blocks, derived_blocks)


def _add_data(
    ds: Dataset, start: int, count: int, *, with_checkpoint: bool, hours: int
) -> Multihash:
    state = ds.state()
    with ds.staging_dir() as staging:
        path = write_slice(staging, start, count)
        cp_path, cp = (
            checkpoint_file(staging, f"root state {start}") if with_checkpoint else (None, None)
        )
        event = AddData(
            prev_offset=state.last_offset,
            new_data=data_slice(path, start, count),
            new_checkpoint=cp,
            new_watermark=at(hours),
        )
        return _commit(ds, CommitItem(event, data_file=path, checkpoint_file=cp_path), hours)


def _execute(
    ds: Dataset,
    input_id: DatasetID,
    prev_input_block: Multihash | None,
    input_block: Multihash,
    start: int,
    count: int,
    *,
    hours: int,
) -> Multihash:
    state = ds.state()
    with ds.staging_dir() as staging:
        path = write_slice(staging, start, count)
        cp_path, cp = checkpoint_file(staging, f"derived state {start}")
        event = ExecuteTransform(
            query_inputs=(
                ExecuteTransformInput(
                    dataset_id=input_id,
                    prev_block_hash=prev_input_block,
                    new_block_hash=input_block,
                    prev_offset=None if start == 0 else start - 1,
                    new_offset=start + count - 1,
                ),
            ),
            prev_checkpoint=state.last_checkpoint,
            prev_offset=state.last_offset,
            new_data=data_slice(path, start, count),
            new_checkpoint=cp,
            new_watermark=at(hours),
        )
        return _commit(ds, CommitItem(event, data_file=path, checkpoint_file=cp_path), hours)


def _commit(ds: Dataset, item: CommitItem, hours: int) -> Multihash:
    head = ds.state().head
    return ds.commit_events([item], expected_head=head, system_time=at(hours))[-1]
