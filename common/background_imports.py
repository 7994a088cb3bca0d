"""Modules imported in a background thread while the caller waits for something else.

A one-shot command spends most of its life waiting for a remote call (the engine's
transaction): the modules it needs only after the wait (pyarrow's Parquet reader, the hashing
code) load meanwhile instead of before or after it. The waiting thread blocks in I/O without
the GIL, so the imports take none of its time.

Safe with Python's per-module import locks as long as the caller starts the imports from a
function (not from a module body, which holds its module's lock): when it imports one of the
modules itself before the background thread is done, it waits for that module and gets the
same module object. An import that fails in the background is dropped there; the caller's own
import raises it where it is handled.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Sequence


def import_in_background(modules: Sequence[str]) -> threading.Thread | None:
    """Start importing those of ``modules`` not imported yet, in order, in a thread; the
    thread (``None``: nothing to import). The process waits for it at exit (an import is
    never cut short)."""
    missing = [name for name in modules if name not in sys.modules]
    if not missing:
        return None
    thread = threading.Thread(target=_import_all, args=(missing,), name="background-imports")
    thread.start()
    return thread


def _import_all(modules: Sequence[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # raised again by the caller's own import, where it is handled
            return
