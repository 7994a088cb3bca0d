"""Work run in another thread, for tests of what waits for what."""

from __future__ import annotations

import threading
from collections.abc import Callable


def raised_in_a_thread(work: Callable[[], object], error: type[BaseException]) -> list[str]:
    """Run ``work`` in another thread, to its end; what it raised (of type ``error``), as text."""
    raised: list[str] = []

    def run() -> None:
        try:
            work()
        except error as e:
            raised.append(str(e))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the work did not finish"
    return raised
