"""The memory pool of the ingest pipeline's large, short-lived buffers.

An ingest streams: every CSV segment is parsed into new buffers, and every row group's
encoder builds new pages and dictionary tables, each freed a moment later, often on another
thread. pyarrow's default allocator (mimalloc) gives such large blocks fresh pages each time
and hands them back to the system when they are freed, so the kernel zeroes new pages again
and again: measured, 18-28% of an ingest's CPU time went to zeroing pages. The system
allocator keeps freed blocks for the next ones, so the CSV parser and the Parquet writer take
their buffers from it (a buffer is freed by the pool it came from, whoever frees it).
"""

from __future__ import annotations

import pyarrow as pa


def pipeline_pool() -> pa.MemoryPool:
    """The pool of the CSV parser's and the Parquet writer's buffers during an ingest."""
    return pa.system_memory_pool()
