"""One read of a Parquet data file gives the same facts as reading it for each separately."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from common.hashing import (
    LogicalHasher,
    digest_data_file,
    logical_hash,
    logical_hash_parquet,
    physical_hash_file,
)
from common.hashing.logical import hash_parquet_records
from common.hashing.parquet_records import (
    field_leaf_columns,
    parquet_reader_plan,
    reads_as_dictionary,
)
from common.odf.errors import DecodeError, NotFoundError, ValidationError
from common.odf.multihash import Multihash


def test_digest_matches_the_separate_hashes(tmp_path: Path) -> None:
    path = tmp_path / "slice"
    table = pa.table(
        {
            "offset": pa.array(range(200_000), pa.int64()),
            "name": pa.array([f"n{i % 97}" if i % 11 else None for i in range(200_000)]),
        }
    )
    pq.write_table(table, path, row_group_size=50_000)
    digest = digest_data_file(path)
    assert digest.physical_hash == physical_hash_file(path)
    assert digest.logical_hash == logical_hash_parquet(path)
    assert digest.records == 200_000
    assert digest.size == path.stat().st_size
    assert digest.schema == table.schema and digest.schema.metadata is None


def test_bad_files_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no such file"):
        digest_data_file(tmp_path / "missing")
    with pytest.raises(ValidationError, match="not a regular file"):
        digest_data_file(tmp_path)
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"PAR1 certainly not parquet PAR1")
    with pytest.raises(DecodeError, match=r"garbage.*not a readable Parquet file"):
        digest_data_file(garbage)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(DecodeError, match="not a readable Parquet file"):
        digest_data_file(empty)


def _hashed_by_batches(path: Path) -> Multihash:
    """The records read batch by batch, every field at once (what the fields read apart
    must reproduce)."""
    parquet = pq.ParquetFile(path)
    hasher = LogicalHasher(parquet.schema_arrow, parquet_reader_plan(parquet))
    for batch in parquet.iter_batches(batch_size=4_099):
        hasher.update(batch)
    return hasher.multihash()


def test_fields_read_apart_hash_as_batches_of_every_field(tmp_path: Path) -> None:
    """Top-level fields decoded and hashed each on its own (structs with nulls in both
    levels across reference batches and row groups, lists, strings with nulls): the same
    hash as the whole records read batch by batch, the same count and schema."""
    rows = 23_457
    rng = np.random.default_rng(11)
    ints = pa.array(rng.integers(0, 1000, rows), mask=rng.random(rows) < 0.3)
    names = pc.cast(ints, pa.string())
    inner = pa.StructArray.from_arrays(
        [ints, names], names=["n", "s"], mask=pa.array(rng.random(rows) < 0.1)
    )
    place = pa.StructArray.from_arrays(
        [names, inner], names=["name", "inner"], mask=pa.array(rng.random(rows) < 0.1)
    )
    lists = pa.array([list(range(i % 4)) if i % 13 else None for i in range(rows)])
    table = pa.table(
        {"offset": pa.array(np.arange(rows)), "place": place, "tags": lists, "name": names}
    )
    path = tmp_path / "slice"
    pq.write_table(table, path, row_group_size=7_000, data_page_size=512)
    assert field_leaf_columns(pq.ParquetFile(path)) == [[0], [1, 2, 3], [4], [5]]
    digest = digest_data_file(path)
    assert digest.logical_hash == _hashed_by_batches(path)
    assert digest.records == rows and digest.schema == table.schema
    assert hash_parquet_records(path).exposed_slots > 0  # the struct quirk is exercised


def test_neighbouring_fields_of_one_name_are_read_batch_by_batch(tmp_path: Path) -> None:
    """Fields that cannot be told apart by their leaf columns: the whole records are read
    batch by batch, with the same hash."""
    a, b = pa.array(np.arange(30_000)), pa.array(np.arange(30_000) % 7)
    table = pa.Table.from_arrays([a, b, a], names=["a", "a", "b"])
    path = tmp_path / "slice"
    pq.write_table(table, path, row_group_size=10_000)
    assert field_leaf_columns(pq.ParquetFile(path)) is None
    assert digest_data_file(path).logical_hash == logical_hash(table) == _hashed_by_batches(path)


def test_a_corrupt_column_chunk_is_refused_by_name(tmp_path: Path) -> None:
    """Damaged pages in the middle of the file: one clean error naming the file, raised
    after every thread has let go of the mapped bytes."""
    path = tmp_path / "slice"
    table = pa.table({"a": pa.array(np.arange(100_000)), "b": pa.array(np.arange(100_000) * 3)})
    pq.write_table(table, path, compression="snappy")
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4096] = bytes(range(256)) * 16
    path.write_bytes(bytes(data))
    with pytest.raises(DecodeError, match=r"slice.*not a readable Parquet file"):
        digest_data_file(path)


def test_fields_fed_unequal_rows_do_not_make_a_hash() -> None:
    hasher = LogicalHasher(pa.schema([("a", pa.int64()), ("b", pa.int64())]))
    hasher.fields[0].update(pa.array([1, 2, 3]))
    hasher.fields[1].update(pa.array([1, 2]))
    with pytest.raises(ValidationError, match="different numbers of rows"):
        hasher.digest()
    with pytest.raises(ValidationError, match=r"field 'a' of type int64 cannot hash.*string"):
        LogicalHasher(pa.schema([("a", pa.int64())])).fields[0].update(pa.array(["x"]))


def test_dictionary_arrays_hash_as_their_values() -> None:
    """Dictionary-coded strings and binaries are hashed from their encoded entries (null
    indices, a null entry, more rows than one chunk), numbers by their decoded values: the
    same hash as the decoded records."""
    rows = 70_001
    indices = pa.array(np.arange(rows) % 5, pa.int32(), mask=np.arange(rows) % 11 == 0)
    words = pa.array(["", "a", None, "ccc", "long " * 20])
    numbers = pa.array([7, None, 9, 10, 11], pa.int64())
    table = pa.table(
        {
            "s": pa.DictionaryArray.from_arrays(indices, words),
            "b": pa.DictionaryArray.from_arrays(indices, words.cast(pa.binary())),
            "n": pa.DictionaryArray.from_arrays(indices, numbers),
        }
    )
    decoded = pa.table({name: table[name].combine_chunks().dictionary_decode() for name in "sbn"})
    assert logical_hash(table) == logical_hash(decoded)
    assert logical_hash(table.slice(3, 1_000)) == logical_hash(decoded.slice(3, 1_000))


def test_dictionary_coded_string_pages_are_read_as_a_dictionary(tmp_path: Path) -> None:
    rows = 150_000
    index = np.arange(rows)
    cities = pc.cast(pa.array(index % 300, mask=index % 13 == 0), pa.string())
    unique = pc.cast(pa.array(index * 7919), pa.string())  # too many: plain pages
    table = pa.table({"city": cities, "id": unique})
    path = tmp_path / "slice"
    pq.write_table(table, path, row_group_size=40_000)
    parquet = pq.ParquetFile(path)
    groups = field_leaf_columns(parquet)
    assert groups is not None
    assert [
        reads_as_dictionary(parquet, f, g) for f, g in zip(table.schema, groups, strict=True)
    ] == [True, False]
    assert digest_data_file(path).logical_hash == _hashed_by_batches(path) == logical_hash(table)
