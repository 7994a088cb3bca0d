"""Watermarks: per input, then for the output (pure functions).

An input's watermark is the newest of its explicit watermarks in this request and the one
carried in the previous checkpoint; watermarks never move back. The output watermark is the
minimum over the inputs that have one (an input that never had a watermark does not hold the
output back, as in the DataFusion engine, rather than failing as the reference Spark engine
does), and never less than the previous output watermark, because the coordinator rejects a
watermark that decreases.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from common.odf.fragments import Watermark


def input_watermark(explicit: Iterable[Watermark], previous: datetime | None) -> datetime | None:
    """The newest of ``previous`` and every explicit watermark's event time."""
    candidates = [w.event_time for w in explicit]
    if previous is not None:
        candidates.append(previous)
    return max(candidates, default=None)


def output_watermark(
    inputs: Iterable[datetime | None], previous: datetime | None
) -> datetime | None:
    """Minimum over inputs with a watermark, clamped so it never goes below ``previous``."""
    known = [w for w in inputs if w is not None]
    current = min(known, default=None)
    if current is None:
        return previous
    if previous is not None and previous > current:
        return previous
    return current
