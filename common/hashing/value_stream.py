"""The byte stream a leaf column feeds its hasher (arrow-digest ``ArrayDigestV0::update``).

Row by row, in order:

- a null row is one ``0x00`` byte;
- fixed-size values (integers, floats, decimals, dates, times, timestamps) are their
  little-endian bytes;
- booleans are one byte, ``0x01`` for false and ``0x02`` for true;
- binary and utf8 values are their length as ``u64`` LE, then their bytes;
- lists are their number of items as ``u64`` LE, then each item by these rules (items use only
  their own validity);
- every row of a ``null``-typed column is null.

A row the reference treats as valid although the array marks it null (a struct quirk, see
``validity``) is hashed from the slot's contents, as the reference does. Records read from a
Parquet file get the contents arrow-rs's reader leaves there (``with_rows_from``, see
``reader_plan``); otherwise, for binary, utf8 and lists the offsets define them, and a
fixed-size or boolean slot (memory Arrow leaves undefined) is a *blank* row hashed as the
zero value (zero bytes, false).

Nothing loops over values in Python: fixed-size values are hashed straight from the Arrow
buffer, and the length-prefixed layout of variable-size values is built by Arrow compute
kernels and numpy over whole offset/data buffers.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from common.arrow_values import binary_scalar
from common.hashing.data_types import Layout, leaf_layout
from common.hashing.validity import Mask, own_validity, pack_bits, unpack_bits

Update = Callable[[memoryview], object]

Offsets = npt.NDArray[np.int32] | npt.NDArray[np.int64]

U64_BYTES = 8
_NULL_MARKER = b"\x00"
_ZERO_PREFIX = b"\x00" * U64_BYTES
_MAX_INT32_OFFSET = 2**31 - 1
_BOOL_FALSE = 1

# Rows encoded per step: bounds the memory of intermediates and keeps them in cache.
CHUNK_ROWS = 1 << 16
# A column with nulls is hashed run by run (runs of valid rows straight from the buffer)
# when it has at most this many runs per row; otherwise null markers are put in place.
_MAX_RUNS_PER_ROW = 1 / 64


@dataclass(frozen=True, slots=True)
class Rows:
    """Encoded rows: row ``i`` is ``data[offsets[i]:offsets[i + 1]]``."""

    offsets: Offsets
    data: npt.NDArray[np.uint8]

    def stream(self) -> npt.NDArray[np.uint8]:
        return self.data[self.offsets[0] : self.offsets[-1]]


def emit_values(array: pa.Array, valid: Mask, blank: Mask, update: Update) -> None:
    """Feed the rows of a dictionary-decoded leaf ``array`` to ``update``.

    ``valid`` marks the rows that are not null (``None``: all), ``blank`` the valid rows to
    hash as the zero value of the type (used only by fixed-size and boolean columns).
    """
    layout = leaf_layout(array.type)
    if layout.layout is Layout.FIXED and valid is None and blank is None:
        update(_fixed_values(array, layout.width).data)  # straight from the Arrow buffer
        return
    for start in range(0, len(array), CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, len(array))
        _emit_chunk(
            array.slice(start, stop - start),
            None if valid is None else valid[start:stop],
            None if blank is None else blank[start:stop],
            update,
        )


def emit_dictionary(array: pa.DictionaryArray, update: Update) -> None:
    """Feed the rows of a dictionary array that only has its own validity (not under a
    struct) to ``update``: the bytes of ``emit_values`` over its decoded values, made by
    encoding each dictionary entry once and gathering the rows from the entries, without
    decoding the values first (for variable-size values, whose decoding costs most)."""
    entries = encode_rows(array.dictionary)
    offsets = entries.offsets.astype(np.int64, copy=False)
    encoded = pa.Array.from_buffers(
        pa.large_binary(),
        len(array.dictionary),
        [None, pa.py_buffer(offsets), pa.py_buffer(entries.data)],
    )
    marker = binary_scalar(_NULL_MARKER, pa.large_binary())
    for start in range(0, len(array), CHUNK_ROWS):
        rows = encoded.take(array.indices.slice(start, CHUNK_ROWS))
        if rows.null_count:
            rows = pc.fill_null(rows, marker)
        update(_rows_of(rows).stream().data)


def _emit_chunk(array: pa.Array, valid: Mask, blank: Mask, update: Update) -> None:
    layout = leaf_layout(array.type)
    if layout.layout is Layout.FIXED:
        _emit_fixed(array, layout.width, valid, blank, update)
    elif layout.layout is Layout.NULL:
        update(memoryview(bytes(len(array))))
    elif layout.layout is Layout.BOOL:
        update(_bool_bytes(array, valid, blank).data)
    else:
        _emit_variable(array, layout.layout, valid, update)


def encode_rows(array: pa.Array) -> Rows:
    """Each row's bytes, for the items of a list: own validity, no blanks."""
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    n = len(array)
    valid = own_validity(array)
    layout = leaf_layout(array.type)
    if layout.layout is Layout.FIXED:
        return _fixed_rows(array, layout.width, valid)
    if layout.layout is Layout.NULL:
        return Rows(np.arange(n + 1, dtype=np.int64), np.zeros(n, dtype=np.uint8))
    if layout.layout is Layout.BOOL:
        return Rows(np.arange(n + 1, dtype=np.int64), _bool_bytes(array, valid, None))
    return _variable_rows(array, layout.layout, valid)


def _few_run_edges(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.intp] | None:
    """Where runs of equal values start (after the first), if there are few runs."""
    edges = np.flatnonzero(mask[1:] != mask[:-1]) + 1
    return edges if len(edges) <= len(mask) * _MAX_RUNS_PER_ROW + 2 else None


def _runs(edges: npt.NDArray[np.intp], length: int) -> Iterator[tuple[int, int]]:
    return itertools.pairwise([0, *edges.tolist(), length])


def _present(valid: Mask, blank: Mask) -> Mask:
    """Rows whose value is read from the array."""
    if blank is None:
        return valid
    return ~blank if valid is None else valid & ~blank


def with_rows_from(
    array: pa.Array, source: npt.NDArray[np.int64], blank: npt.NDArray[np.bool_]
) -> pa.Array:
    """``array`` with each ``blank`` row made valid and holding what arrow-rs's reader leaves
    in its slot: the value of row ``source[i]``, or the zero value where it is -1.

    Variable-size slots (binary, utf8, lists) are always left empty by arrow-rs (it fills
    the offsets of null rows), so they hold the empty value whatever ``source`` says.
    """
    n = len(array)
    if leaf_layout(array.type).layout in (Layout.BINARY, Layout.LIST) and not (
        pa.types.is_fixed_size_binary(array.type)
    ):
        if _all_empty(array, blank):
            return array  # what pyarrow's reader leaves too: nothing to change
        source = np.where(blank, -1, source)
    index = np.where(source < 0, n, source)
    extended = pa.concat_arrays([array, _zero_value(array.type)])
    return extended.take(pa.array(index, pa.int64()))


def _all_empty(array: pa.Array, rows: npt.NDArray[np.bool_]) -> bool:
    """Are these slots of a variable-size array empty (by its offsets)?"""
    t = pa.types
    if t.is_string_view(array.type) or t.is_binary_view(array.type):
        return False
    if t.is_fixed_size_list(array.type):
        return bool(array.type.list_size == 0)
    offsets = _offsets(array, array.buffers()[1])
    return not bool(np.diff(offsets)[rows].any())


def _zero_value(data_type: pa.DataType) -> pa.Array:
    """One valid row of the type's zero value (zero bytes; empty for variable sizes)."""
    t = pa.types
    layout = leaf_layout(data_type)
    if layout.layout is Layout.FIXED:
        return pa.Array.from_buffers(data_type, 1, [None, pa.py_buffer(bytes(layout.width))])
    if layout.layout is Layout.BOOL:
        return pa.Array.from_buffers(data_type, 1, [None, pa.py_buffer(b"\x00")])
    if t.is_fixed_size_binary(data_type):
        zero = pa.py_buffer(bytes(data_type.byte_width))
        return pa.Array.from_buffers(data_type, 1, [None, zero])
    if layout.layout is Layout.LIST:
        return pa.array([[]], data_type)
    if layout.layout is Layout.NULL:
        return pa.nulls(1, data_type)
    return pa.array([b""], pa.binary()).cast(data_type)


# -- fixed-size values ------------------------------------------------------------------


def _fixed_values(array: pa.Array, width: int) -> npt.NDArray[np.uint8]:
    n = len(array)
    if n == 0:
        return np.zeros(0, dtype=np.uint8)
    buffer = array.buffers()[1]
    return np.frombuffer(buffer, dtype=np.uint8, count=n * width, offset=array.offset * width)


def _emit_fixed(array: pa.Array, width: int, valid: Mask, blank: Mask, update: Update) -> None:
    values = _fixed_values(array, width)
    present = _present(valid, blank)
    if present is None:
        update(values.data)
        return
    edges = _few_run_edges(present)
    if edges is None:
        update(_fixed_with_absent(values, width, present, blank).stream().data)
    else:
        _emit_fixed_runs(values, width, present, blank, edges, update)


def _emit_fixed_runs(
    values: npt.NDArray[np.uint8],
    width: int,
    present: npt.NDArray[np.bool_],
    blank: Mask,
    edges: npt.NDArray[np.intp],
    update: Update,
) -> None:
    """Few runs of absent rows: hash the present runs straight from the buffer."""
    for start, stop in _runs(edges, len(present)):
        if present[start]:
            update(values[start * width : stop * width].data)
        else:
            blanks = 0 if blank is None else int(np.count_nonzero(blank[start:stop]))
            nulls = stop - start - blanks
            update(memoryview(bytes(nulls + blanks * width)))


def _fixed_rows(array: pa.Array, width: int, valid: Mask) -> Rows:
    values = _fixed_values(array, width)
    if valid is None:
        n = len(array)
        return Rows(np.arange(0, (n + 1) * width, width, dtype=np.int64), values)
    return _fixed_with_absent(values, width, valid, None)


def _fixed_with_absent(
    values: npt.NDArray[np.uint8], width: int, present: npt.NDArray[np.bool_], blank: Mask
) -> Rows:
    n = len(present)
    as_binary = pa.Array.from_buffers(
        pa.binary(width), n, [pack_bits(present), pa.py_buffer(values)]
    ).cast(_binary_type(n * width))
    return _rows_of(_fill_absent(as_binary, present, blank, width))


def _binary_type(total_bytes: int) -> pa.DataType:
    """``binary`` (32-bit offsets, less to write) when ``total_bytes`` fits."""
    return pa.binary() if total_bytes <= _MAX_INT32_OFFSET else pa.large_binary()


# -- booleans ---------------------------------------------------------------------------


def _bool_bytes(array: pa.Array, valid: Mask, blank: Mask) -> npt.NDArray[np.uint8]:
    n = len(array)
    if n == 0:
        return np.zeros(0, dtype=np.uint8)
    out = unpack_bits(array.buffers()[1], array.offset, n).view(np.uint8) + np.uint8(1)
    if blank is not None:
        out[blank] = _BOOL_FALSE
    if valid is not None:
        out[~valid] = 0
    return out


# -- variable-size values: binary, utf8 and lists ---------------------------------------


def _variable_rows(array: pa.Array, layout: Layout, valid: Mask) -> Rows:
    return _with_null_markers(_prefixed_rows(array, layout, valid), valid)


def _emit_variable(array: pa.Array, layout: Layout, valid: Mask, update: Update) -> None:
    rows = _prefixed_rows(array, layout, valid)
    edges = None if valid is None else _few_run_edges(valid)
    if valid is None or edges is None:
        update(_with_null_markers(rows, valid).stream().data)
        return
    for start, stop in _runs(edges, len(valid)):
        if valid[start]:
            update(rows.data[rows.offsets[start] : rows.offsets[stop]].data)
        else:
            update(memoryview(bytes(stop - start)))


def _prefixed_rows(array: pa.Array, layout: Layout, valid: Mask) -> Rows:
    if len(array) == 0:
        return Rows(np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint8))
    if layout is Layout.LIST:
        return _prefixed(*_list_segments(array), valid)
    return _prefixed(*_binary_segments(array), valid)


def _binary_segments(array: pa.Array) -> tuple[Offsets, pa.Buffer, Offsets]:
    """Offsets into a data buffer of each value, and the value lengths."""
    t = pa.types
    n = len(array)
    if t.is_string_view(array.type):
        array = array.cast(pa.large_string())
    elif t.is_binary_view(array.type):
        array = array.cast(pa.large_binary())
    buffers = array.buffers()
    if t.is_fixed_size_binary(array.type):
        width = array.type.byte_width
        offsets = (np.arange(n + 1, dtype=np.int64) + array.offset) * width
        data = buffers[1]
    else:
        offsets = _offsets(array, buffers[1])
        data = buffers[2]
    return offsets, data if data is not None else pa.py_buffer(b""), np.diff(offsets)


def _list_segments(array: pa.Array) -> tuple[Offsets, pa.Buffer, Offsets]:
    """Each list's segment of its items' encoded rows, and the item counts."""
    n = len(array)
    if pa.types.is_fixed_size_list(array.type):
        size = array.type.list_size
        offsets = (np.arange(n + 1, dtype=np.int64) + array.offset) * size
    else:
        offsets = _offsets(array, array.buffers()[1])
    first = int(offsets[0])
    items = encode_rows(array.values.slice(first, int(offsets[-1]) - first))
    segments: Offsets = items.offsets[offsets - first]
    return segments, pa.py_buffer(items.data), np.diff(offsets)


def _offsets(array: pa.Array, buffer: pa.Buffer) -> Offsets:
    t = pa.types
    large = t.is_large_binary(array.type) or t.is_large_string(array.type)
    count = len(array) + 1
    if large or t.is_large_list(array.type):
        return np.frombuffer(buffer, dtype=np.int64, count=count, offset=array.offset * 8)
    return np.frombuffer(buffer, dtype=np.int32, count=count, offset=array.offset * 4)


def _prefixed(offsets: Offsets, data: pa.Buffer, prefixes: Offsets, valid: Mask) -> Rows:
    """Rows of ``u64 prefix ‖ segment`` for valid rows; null rows are empty."""
    n = len(prefixes)
    bitmap = None if valid is None else pack_bits(valid)
    # The output is at most the segments' end plus the prefixes: small enough for int32?
    binary_type = _binary_type(int(offsets[-1]) + U64_BYTES * n)
    if binary_type == pa.large_binary():
        offsets = offsets.astype(np.int64, copy=False)
    else:
        offsets = offsets.astype(np.int32, copy=False)
    segments = pa.Array.from_buffers(binary_type, n, [bitmap, pa.py_buffer(offsets), data])
    # Arrow inserts 8 zero bytes in front of every valid value (null slots come out empty,
    # whatever their offsets say), then we write the prefixes into those bytes in place.
    prefixed = pc.binary_replace_slice(segments, start=0, stop=0, replacement=_ZERO_PREFIX)
    rows = _rows_of(prefixed)
    starts = rows.offsets[:-1]
    if valid is not None:
        starts, prefixes = starts[valid], prefixes[valid]
    _write_u64_le(rows.data, starts, prefixes)
    return rows


def _with_null_markers(rows: Rows, valid: Mask) -> Rows:
    """``rows`` (null rows empty) with a null marker in each null row."""
    if valid is None:
        return rows
    binary_type = pa.large_binary() if rows.offsets.dtype == np.int64 else pa.binary()
    buffers = [pack_bits(valid), pa.py_buffer(rows.offsets), pa.py_buffer(rows.data)]
    with_nulls = pa.Array.from_buffers(binary_type, len(valid), buffers)
    return _rows_of(_fill_absent(with_nulls, valid, None, 0))


def _write_u64_le(data: npt.NDArray[np.uint8], positions: Offsets, values: Offsets) -> None:
    """Write non-negative ``values`` as u64 LE at ``positions`` over zero bytes (only the
    bytes that can be non-zero)."""
    if len(values) == 0:
        return
    significant = (int(values.max()).bit_length() + 7) // 8
    for k in range(significant):
        data[positions + k] = (values >> (8 * k)).astype(np.uint8)


def _fill_absent(
    array: pa.Array, present: npt.NDArray[np.bool_], blank: Mask, blank_width: int
) -> pa.Array:
    """Replace the null slots of ``array``: a null marker, or ``blank_width`` zero bytes."""
    if blank is None:
        return pc.fill_null(array, binary_scalar(_NULL_MARKER, array.type))
    lengths = np.where(present, 0, np.where(blank, blank_width, 1))
    dtype = np.int64 if array.type == pa.large_binary() else np.int32
    offsets = np.zeros(len(lengths) + 1, dtype=dtype)
    np.cumsum(lengths, out=offsets[1:])
    zeros = pa.py_buffer(np.zeros(int(offsets[-1]), dtype=np.uint8))
    fill = pa.Array.from_buffers(array.type, len(lengths), [None, pa.py_buffer(offsets), zeros])
    return pc.coalesce(array, fill)


def _rows_of(array: pa.Array) -> Rows:
    """The rows of a null-free binary array, with a writable view of its data."""
    _, offsets_buffer, data_buffer = array.buffers()
    offsets = _offsets(array, offsets_buffer)
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else None
    if data is None or len(data) == 0:
        data = np.zeros(0, dtype=np.uint8)
    elif not data.flags.writeable:
        data = data.copy()
    return Rows(offsets, data)
