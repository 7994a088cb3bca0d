"""The memory pool of the ingest pipeline's large, short-lived buffers.

An ingest streams: every CSV segment is parsed into new buffers, and every row group's
encoder builds new pages and dictionary tables, each freed a moment later, often on another
thread. pyarrow's default allocator (mimalloc) gives such large blocks fresh pages each time
and hands them back to the system when they are freed, so the kernel zeroes new pages again
and again: measured (perf), 18-28% of an ingest's CPU time went to zeroing pages. jemalloc
reuses freed blocks (about 10% less CPU for the whole ingest, measured) and keeps the peak
memory flat on files of any size; the system allocator saves as much CPU but its per-thread
arenas grew the peak on a 2.2 GB file by half (495 MiB against 420 with jemalloc), so it is
not used. A buffer is freed by the pool it came from, whoever frees it.
"""

from __future__ import annotations

import functools

import pyarrow as pa


@functools.cache
def pipeline_pool() -> pa.MemoryPool:
    """The pool of the CSV parser's and the Parquet writer's buffers during an ingest:
    jemalloc, or pyarrow's default where pyarrow was built without it."""
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:
        return pa.default_memory_pool()
