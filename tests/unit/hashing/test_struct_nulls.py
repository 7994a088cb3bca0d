"""How struct nulls reach leaf columns: the reference's per-batch OR rule, reproduced over
kamu's 10,000-row batches whatever batches we are given."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from common.hashing import LogicalHasher, logical_hash
from common.hashing.reader_plan import REFERENCE_BATCH_ROWS
from common.odf.errors import ValidationError

from .reference_model import reference_digest
from .test_logical_vectors import INT32, expected, name


def struct_table(
    a: pa.Array, struct_valid: list[bool] | np.ndarray, extra: pa.Array | None = None
) -> pa.Table:
    children = [a] if extra is None else [a, extra]
    names = ["a"] if extra is None else ["a", "b"]
    mask = pa.array(~np.asarray(struct_valid, dtype=bool))
    return pa.table({"s": pa.StructArray.from_arrays(children, names=names, mask=mask)})


def test_child_without_nulls_takes_the_struct_nulls() -> None:
    """Only the struct has nulls: its null rows hash as null, whatever the child holds."""
    base = struct_table(pa.array([1, 2, 3], pa.int32()), [True, False, True])
    other = struct_table(pa.array([1, 99, 3], pa.int32()), [True, False, True])
    assert logical_hash(base) == logical_hash(other)
    assert logical_hash(base).digest == reference_digest(base)


def test_both_with_nulls_are_combined_with_or() -> None:
    """Struct and child both have nulls: a row is valid if either says so (the quirk)."""
    base = struct_table(pa.array([1, 2, None], pa.int32()), [True, False, True])
    other = struct_table(pa.array([1, 99, None], pa.int32()), [True, False, True])
    # Row 1 is a null struct with a valid child: the child's value is hashed.
    assert logical_hash(base) != logical_hash(other)
    assert logical_hash(base).digest == reference_digest(base)
    # Row 2 is a valid struct with a null child: hashed as valid (the slot's zero bytes).
    names = name("s") + name("a", 1)
    stream = INT32 + (1).to_bytes(4, "little") + (2).to_bytes(4, "little") + bytes(4)
    assert logical_hash(base).digest == expected(names, stream)


@pytest.mark.parametrize("child", ["int", "utf8", "bool", "list"])
def test_windows_of_the_reference_reader(child: str) -> None:
    """Across 10,000-row windows, whatever the batches: same as the reference reading the
    rows in batches of 10,000."""
    rows = 2 * REFERENCE_BATCH_ROWS + 5_000
    rng = np.random.default_rng(7)
    index = np.arange(rows)
    # Struct nulls in windows 0 and 2, child nulls in windows 1 and 2.
    struct_valid = ~((index % 97 == 0) & (index // REFERENCE_BATCH_ROWS != 1))
    child_null = (index % 89 == 0) & (index >= REFERENCE_BATCH_ROWS)
    # Null slots hold zeros: under the quirk the reference reads them, we hash zeros.
    values = np.where(child_null, 0, rng.integers(0, 1000, rows))
    arrays = {
        "int": pa.array(values, pa.int64(), mask=child_null),
        "utf8": pa.array(values.astype(str), pa.string(), mask=child_null),
        "bool": pa.array(values % 2 == 1, mask=child_null),
        "list": pa.ListArray.from_arrays(
            pa.array(np.arange(rows + 1, dtype=np.int32)),
            pa.array(values),
            mask=pa.array(child_null),
        ),
    }
    table = struct_table(arrays[child], struct_valid, extra=pa.array(values % 7, pa.int8()))
    expected = reference_digest(table, batch_rows=REFERENCE_BATCH_ROWS)
    # The windows matter: the reference reading everything as one batch differs.
    assert reference_digest(table, batch_rows=rows) != expected
    assert logical_hash(table).digest == expected
    for batch_rows in (3_333, 10_001, 65_536):
        batches = table.to_batches(max_chunksize=batch_rows)
        assert logical_hash(batches).digest == expected


def test_a_window_split_across_batches_is_decided_as_a_whole() -> None:
    """Struct nulls in a later batch of the same window still combine with the child's."""
    table = struct_table(pa.array([None] * 11, pa.int16()), [True] + [False] * 10)
    expected = reference_digest(table)
    assert logical_hash(table).digest == expected
    assert (
        logical_hash([table.slice(0, 1).to_batches()[0], *table.slice(1).to_batches()]).digest
        == expected
    )


def test_no_rows_can_be_added_after_the_digest() -> None:
    table = struct_table(pa.array([1], pa.int16()), [True])
    hasher = LogicalHasher(table.schema)
    hasher.update(table.to_batches()[0])
    first = hasher.digest()
    assert hasher.digest() == first
    with pytest.raises(ValidationError, match="finished"):
        hasher.update(table.to_batches()[0])
