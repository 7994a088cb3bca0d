"""The struct-null quirk against arrow-rs itself: DataFusion reads the file.

For a struct column with null fields inside non-null struct rows, the reference hashes those
slots as values (arrow-digest's OR of validities) and arrow-rs's Parquet reader decides what
they hold (``common.hashing.reader_plan``). The ``datafusion`` package reads Parquet with
arrow-rs and hands its batches to pyarrow through the C data interface, leftover slots
included, so the literal model of arrow-digest over those batches is the reference's hash
(``arrow_rs_oracle``). DataFusion's scan cuts batches at row groups where kamu's reader spans
them: the hash under test is computed with the same cut (``batches_cut_at_row_groups``).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from common.hashing import LogicalHasher, logical_hash_parquet
from common.hashing.reader_plan import ReaderPlan

from .arrow_rs_oracle import arrow_rs_batches, reference_hash


def our_hash(path: Path, *, cut_at_row_groups: bool, reads_known: bool = True) -> bytes:
    file = pq.ParquetFile(path)
    groups = tuple(file.metadata.row_group(i).num_rows for i in range(file.num_row_groups))
    plan = ReaderPlan(
        groups if reads_known else None,
        batches_cut_at_row_groups=cut_at_row_groups,
    )
    hasher = LogicalHasher(file.schema_arrow, plan)
    for batch in file.iter_batches(batch_size=4_099):
        hasher.update(batch)
    return hasher.digest()


# -- hostile files ------------------------------------------------------------------------


def _column(rng: np.random.Generator, kind: str, rows: int, null_p: float) -> pa.Array:
    mask = rng.random(rows) < null_p
    ints = rng.integers(-(2**40), 2**40, rows)
    values: Any
    if kind == "int64":
        values, data_type = ints, pa.int64()
    elif kind in ("int32", "int16", "int8", "uint32"):
        data_type = getattr(pa, kind)()
        info = np.iinfo(np.dtype(kind))
        values = rng.integers(info.min, info.max, rows, endpoint=True)
    elif kind == "float32":
        values, data_type = rng.normal(size=rows).astype(np.float32), pa.float32()
    elif kind == "float64":
        values, data_type = rng.normal(size=rows), pa.float64()
    elif kind == "bool":
        values, data_type = rng.random(rows) < 0.5, pa.bool_()
    elif kind == "string":
        values, data_type = [f"s{v % 37}" for v in ints], pa.string()  # dictionary pages
    elif kind == "binary":
        values, data_type = [bytes(int(v) % 5) + b"x" for v in ints], pa.binary()
    elif kind.startswith("timestamp"):
        unit = kind.split("_")[1]
        values, data_type = np.abs(ints), pa.timestamp(unit, tz="UTC")
    elif kind == "date32":
        values, data_type = (np.abs(ints) % 40_000).astype(np.int32), pa.date32()
    elif kind.startswith("decimal"):
        precision = int(kind.removeprefix("decimal"))
        values = [Decimal(int(v) % 10**7) / 100 for v in ints]
        data_type = pa.decimal128(precision, 2)
    elif kind == "fixed_binary":
        values, data_type = [int(v % 2**24).to_bytes(3, "little") for v in ints], pa.binary(3)
    elif kind == "list":
        lists = [list(range(int(v) % 4)) for v in ints]
        return pa.array([None if m else v for v, m in zip(lists, mask, strict=True)])
    else:
        raise AssertionError(kind)
    if isinstance(values, np.ndarray) and data_type.id != pa.bool_().id:
        if pa.types.is_temporal(data_type):
            storage = pa.int64() if values.dtype == np.int64 else pa.int32()
            return pa.array(values, storage, mask=mask).cast(data_type)
        return pa.array(values, data_type, mask=mask)
    return pa.array(list(values), data_type, mask=mask)


KINDS = [
    "int64",
    "int32",
    "int16",
    "int8",
    "uint32",
    "float32",
    "float64",
    "bool",
    "string",
    "binary",
    "timestamp_ms",
    "timestamp_us",
    "timestamp_ns",
    "date32",
    "decimal9",
    "decimal18",
    "decimal30",
    "fixed_binary",
    "list",
]


def write_struct_file(
    path: Path,
    rng: np.random.Generator,
    *,
    rows: int,
    kinds: list[str],
    struct_null_p: float,
    field_null_p: float,
    row_group_rows: int,
    decimals_as_integers: bool = False,
) -> None:
    fields = [_column(rng, k, rows, field_null_p) for k in kinds]
    names = [f"f_{k}" for k in kinds]
    inner = pa.StructArray.from_arrays(
        [_column(rng, "int64", rows, field_null_p), fields[0]],
        ["deep", "again"],
        mask=pa.array(rng.random(rows) < struct_null_p),
    )
    struct = pa.StructArray.from_arrays(
        [*fields, inner], [*names, "inner"], mask=pa.array(rng.random(rows) < struct_null_p)
    )
    table = pa.table({"offset": pa.array(np.arange(rows), pa.int64()), "s": struct})
    pq.write_table(
        table,
        path,
        row_group_size=row_group_rows,
        data_page_size=512,
        store_decimal_as_integer=decimals_as_integers,
    )


# -- the tests ----------------------------------------------------------------------------


@pytest.mark.parametrize("decimals_as_integers", [False, True])
def test_every_type_across_batches_row_groups_and_pages(
    tmp_path: Path, decimals_as_integers: bool
) -> None:
    """Row groups of 7,000 rows (not a multiple of the batch), pages of a few hundred
    bytes, three batches: the leftovers of every type, as arrow-rs leaves them."""
    path = tmp_path / "data.parquet"
    rng = np.random.default_rng(13)
    write_struct_file(
        path,
        rng,
        rows=23_457,
        # Decimals as INT32/INT64: only they change; every type otherwise.
        kinds=["int64", "decimal9", "decimal18", "decimal30"] if decimals_as_integers else KINDS,
        struct_null_p=0.1,
        field_null_p=0.3,
        row_group_rows=7_000,
        decimals_as_integers=decimals_as_integers,
    )
    # The oracle's batches are those the plan says (cut at row groups).
    plan = ReaderPlan((7_000, 7_000, 7_000, 2_457), batches_cut_at_row_groups=True)
    sizes = np.diff(np.append(plan.batch_starts(0, 23_457), 23_457)).tolist()
    assert [b.num_rows for b in arrow_rs_batches(path)] == sizes == [7_000] * 3 + [2_457]
    expected = reference_hash(path)
    assert our_hash(path, cut_at_row_groups=True) == expected
    # The quirk is exercised: hashing those slots as zeros would differ.
    assert our_hash(path, cut_at_row_groups=True, reads_known=False) != expected


@pytest.mark.parametrize("seed", range(6))
def test_random_files(tmp_path: Path, seed: int) -> None:
    """Seeded random shapes: sizes, row groups, null densities (none, all, some)."""
    rng = np.random.default_rng(100 + seed)
    path = tmp_path / "data.parquet"
    rows = int(rng.integers(1, 12_000))
    kinds = list(rng.choice(KINDS, size=4, replace=False))
    write_struct_file(
        path,
        rng,
        rows=rows,
        kinds=kinds,
        struct_null_p=float(rng.choice([0.0, 0.05, 0.5, 1.0])),
        field_null_p=float(rng.choice([0.0, 0.02, 0.4, 1.0])),
        row_group_rows=int(rng.integers(1, rows + 1)),
    )
    assert our_hash(path, cut_at_row_groups=True) == reference_hash(path)


def test_required_field_in_a_nullable_struct(tmp_path: Path) -> None:
    """A non-nullable field has no validity of its own in either reader (pyarrow and
    arrow-rs give it none under a null struct): the struct's nulls apply, no leftovers."""
    rows = 12_345
    rng = np.random.default_rng(5)
    field = pa.field("v", pa.int64(), nullable=False)
    struct = pa.StructArray.from_arrays(
        [pa.array(rng.integers(0, 1000, rows), pa.int64())],
        fields=[field],
        mask=pa.array(rng.random(rows) < 0.2),
    )
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"s": struct}), path, row_group_size=4_000, data_page_size=256)
    assert pq.read_table(path).column("s").chunk(0).field(0).null_count == 0
    assert our_hash(path, cut_at_row_groups=True) == reference_hash(path)


def test_files_whose_batches_do_not_depend_on_the_cut(tmp_path: Path) -> None:
    """Row groups of a multiple of the batch size: kamu's reader and DataFusion's scan cut
    the same batches, so the hash ``odf`` computes is the oracle's."""
    path = tmp_path / "data.parquet"
    write_struct_file(
        path,
        np.random.default_rng(3),
        rows=25_001,
        kinds=["int64", "bool", "string", "timestamp_ms", "decimal30"],
        struct_null_p=0.1,
        field_null_p=0.2,
        row_group_rows=20_000,
    )
    expected = reference_hash(path)
    assert logical_hash_parquet(path).digest == expected
    assert our_hash(path, cut_at_row_groups=False) == expected


def test_the_other_fixed_size_types(tmp_path: Path) -> None:
    """Types kamu's writer rarely produces, each converted by arrow-rs after the read
    (widened, narrowed, or re-united): their leftovers are still the j-th value."""
    rows = 5_000
    rng = np.random.default_rng(17)
    ints = rng.integers(0, 2**31 - 1, rows)
    columns = {
        "u8": pa.array(ints % 200, pa.uint8()),
        "u16": pa.array(ints % 60_000, pa.uint16()),
        "u64": pa.array(ints, pa.uint64()),
        "f16": pa.array((ints % 100).astype(np.float16), pa.float16()),
        "ts_s": pa.array(ints, pa.int64()).cast(pa.timestamp("s")),
        "ts_ns": pa.array(ints, pa.int64()).cast(pa.timestamp("ns", "Europe/Berlin")),
        "t32": pa.array(ints % 86_400, pa.int32()).cast(pa.time32("s")),
        "t64": pa.array(ints, pa.int64()).cast(pa.time64("ns")),
        "d256": pa.array([Decimal(int(x)) for x in ints], pa.decimal256(45, 0)),
        "large": pa.array([str(x) for x in ints], pa.large_string()),
    }
    fields = [
        pa.array(c.to_pylist(), c.type, mask=rng.random(rows) < 0.3) for c in columns.values()
    ]
    struct = pa.StructArray.from_arrays(
        fields, list(columns), mask=pa.array(rng.random(rows) < 0.1)
    )
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"s": struct}), path, row_group_size=1_700, data_page_size=300)
    expected = reference_hash(path)
    assert our_hash(path, cut_at_row_groups=True) == expected
    assert our_hash(path, cut_at_row_groups=True, reads_known=False) != expected


def test_the_same_records_in_other_row_groups_hash_otherwise(tmp_path: Path) -> None:
    """With exposed slots the reference's hash depends on the file's row groups (the reads),
    not only on its records: two layouts, two hashes, each the reference's."""
    rng = np.random.default_rng(29)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_struct_file(
        a,
        rng,
        rows=6_000,
        kinds=["int64"],
        struct_null_p=0.1,
        field_null_p=0.3,
        row_group_rows=6_000,
    )
    pq.write_table(pq.read_table(a), b, row_group_size=1_000)
    assert pq.read_table(a).equals(pq.read_table(b))
    hash_a, hash_b = reference_hash(a), reference_hash(b)
    assert hash_a != hash_b
    assert (our_hash(a, cut_at_row_groups=True), our_hash(b, cut_at_row_groups=True)) == (
        hash_a,
        hash_b,
    )
