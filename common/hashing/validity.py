"""Validity masks of Arrow arrays, and how a struct's nulls reach its leaf columns.

A mask is a numpy ``bool`` array with ``True`` for valid rows, or ``None`` when every row is
valid (the reference treats a validity bitmap without nulls like no bitmap at all).

The reference flattens structs into their leaf columns and hands each leaf the struct's
validity combined with its own by ``maybe_combine_null_buffers``. That function, quirks
included, is what decides which rows of a leaf hash as null:

- if only one side has nulls (within the batch) it is used as is;
- if both have nulls, the bitmaps are combined with a bitwise **OR** of validity, so a row is
  valid when *either* the parent or the child is valid.

Because "has nulls" is evaluated per record batch, the result depends on batch boundaries.
kamu computes stored logical hashes reading Parquet with arrow-rs in batches of 10,000 rows
(``reader_plan``). We evaluate the rule over those same batches of the row stream, whatever
batches we are given, which reproduces the reference and keeps our hash independent of
batching.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

Mask = npt.NDArray[np.bool_] | None
Starts = npt.NDArray[np.int64]


def unpack_bits(buffer: pa.Buffer, offset: int, length: int) -> npt.NDArray[np.bool_]:
    """``length`` bits of an Arrow (LSB-first) bitmap starting at bit ``offset``."""
    start = offset // 8
    stop = (offset + length + 7) // 8
    raw = np.frombuffer(buffer, dtype=np.uint8, count=stop - start, offset=start)
    shift = offset % 8
    bits = np.unpackbits(raw, bitorder="little", count=shift + length)
    return bits[shift:].view(np.bool_)


def pack_bits(mask: npt.NDArray[np.bool_]) -> pa.Buffer:
    """An Arrow bitmap (offset 0) of ``mask``."""
    return pa.py_buffer(np.packbits(mask, bitorder="little"))


def own_validity(array: pa.Array) -> Mask:
    """The array's own validity; a ``null``-typed array is entirely null."""
    if array.null_count == 0:
        return None
    if pa.types.is_null(array.type):
        return np.zeros(len(array), dtype=np.bool_)
    return unpack_bits(array.buffers()[0], array.offset, len(array))


def normalized(mask: Mask) -> Mask:
    return None if mask is None or bool(mask.all()) else mask


def combine_with_parent(parent: Mask, own: Mask, batch_starts: Starts) -> Mask:
    """The reference's ``maybe_combine_null_buffers(parent, own)`` over reference batches.

    ``batch_starts`` are the indexes within the masks where a reference batch begins (the
    first one 0, see ``ReaderPlan.batch_starts``).
    """
    if parent is None:
        return own
    if own is None:
        return parent
    both = _window_flags(~parent, batch_starts) & _window_flags(~own, batch_starts)
    rows_in_both = _expand(both, len(parent), batch_starts)
    combined = np.where(rows_in_both, parent | own, parent & own)
    return normalized(combined)


def _window_flags(nulls: npt.NDArray[np.bool_], starts: Starts) -> npt.NDArray[np.bool_]:
    """Per reference batch: does it contain any null?"""
    if len(nulls) == 0:
        return np.zeros(0, dtype=np.bool_)
    return np.logical_or.reduceat(nulls, starts)


def _expand(flags: npt.NDArray[np.bool_], length: int, starts: Starts) -> npt.NDArray[np.bool_]:
    if length == 0:
        return np.zeros(0, dtype=np.bool_)
    sizes = np.diff(np.append(starts, length))
    return np.repeat(flags, sizes)
