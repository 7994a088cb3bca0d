"""``odf verify`` of a data file whose struct fields are null inside non-null rows: the
logical hash the reference records (arrow-rs's reader, the DataFusion oracle) passes, and a
hash computed otherwise is reported with the reason, not as different records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from common.hashing import logical_hash, physical_hash_file
from common.odf.fragments import DataSlice, OffsetInterval
from common.odf.multihash import ARROW0_SHA3_256, Multihash
from coordinator.verify.files import data_file_facts, data_slice_problems
from tests.unit.hashing.arrow_rs_oracle import reference_hash

ROWS = 3_000


def write_data_file(root: Path) -> tuple[Multihash, int]:
    rng = np.random.default_rng(21)
    zip_code = pa.array(rng.integers(10_000, 99_999, ROWS), pa.int32(), mask=rng.random(ROWS) < 0.3)
    place = pa.StructArray.from_arrays(
        [zip_code], names=["zip"], mask=pa.array(rng.random(ROWS) < 0.1)
    )
    table = pa.table({"offset": pa.array(np.arange(ROWS), pa.int64()), "place": place})
    staged = root / "staged.parquet"
    pq.write_table(table, staged, data_page_size=1024)  # one row group: one batch, any cut
    physical = physical_hash_file(staged)
    (root / "data").mkdir()
    staged.rename(root / "data" / str(physical))
    return physical, (root / "data" / str(physical)).stat().st_size


def block_slice(logical: Multihash, physical: Multihash, size: int) -> DataSlice:
    return DataSlice(
        logical_hash=logical,
        physical_hash=physical,
        offset_interval=OffsetInterval(start=0, end=ROWS - 1),
        size=size,
    )


def test_the_hash_the_reference_records_verifies(tmp_path: Path) -> None:
    physical, size = write_data_file(tmp_path)
    path = tmp_path / "data" / str(physical)
    recorded = Multihash(ARROW0_SHA3_256, reference_hash(path))
    facts = data_file_facts(tmp_path, physical)
    assert facts.exposed_slots > 0
    assert data_slice_problems(block_slice(recorded, physical, size), facts, None) == []


def test_a_hash_of_those_slots_computed_otherwise_is_explained(tmp_path: Path) -> None:
    physical, size = write_data_file(tmp_path)
    path = tmp_path / "data" / str(physical)
    zeros = logical_hash(pq.read_table(path))  # in memory: the slots as zero values
    facts = data_file_facts(tmp_path, physical)
    [message] = data_slice_problems(block_slice(zeros, physical, size), facts, None)
    assert "although it is the very file the block names" in message
    assert f"{facts.exposed_slots} null slots of struct fields inside non-null rows" in message
    assert "records differ" not in message


def test_another_file_is_still_other_records(tmp_path: Path) -> None:
    physical, size = write_data_file(tmp_path)
    other = Multihash(physical.code, bytes(32))
    facts = data_file_facts(tmp_path, physical)
    recorded = Multihash(ARROW0_SHA3_256, bytes(32))
    messages = data_slice_problems(block_slice(recorded, other, size), facts, None)
    assert any(m.endswith("its records differ") for m in messages)
