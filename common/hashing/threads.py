"""The threads that hash: SHA3 updates (``hashlib``) and Arrow's decoding and kernels release
the GIL, so independent hashes (columns, fields, a file's bytes) run on every core."""

from __future__ import annotations

import concurrent.futures
import functools
import os


@functools.cache
def hash_pool() -> concurrent.futures.ThreadPoolExecutor:
    """One thread per core, at most four; shared by every hash in the process."""
    workers = min(4, os.cpu_count() or 1)
    return concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="hash")
