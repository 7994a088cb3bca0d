"""Watermarks: per input, then for the output, and the lateness rule (pure functions).

The two rules every runner applies (``engine_spark/README.md``, semantics):

* lateness (``is_late``): a watermark T promises no more events with event time *less than*
  T, so a record is late only when its event time is less than its input's watermark when
  it arrives; a record exactly at the watermark is on time.
* output watermark (``output_watermark``): the greatest T such that no later output can have
  an event time below T, computed exactly from the inputs' watermarks and the query's
  ``lag`` (how far behind its inputs' watermark an output row may still be emitted: a
  window labelled by its start lags by its width, an interval join by its bound), with no
  engine margin added.

An input's watermark is the newest of its explicit watermarks in this request and the one
carried in the previous checkpoint; watermarks never move back. The output watermark is the
minimum over the inputs that have one (an input that never had a watermark does not hold the
output back, as in the DataFusion engine, rather than failing as the reference Spark engine
does), and never less than the previous output watermark, because the coordinator rejects a
watermark that decreases.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from common.odf.fragments import Watermark

_R_co = TypeVar("_R_co", covariant=True)


class _Comparable(Protocol[_R_co]):
    def __lt__(self, other: Any, /) -> _R_co: ...


def is_late(event_time: _Comparable[_R_co], watermark: Any) -> _R_co:
    """The lateness rule: an event time less than the watermark (the one place it is
    stated). ``event_time`` and ``watermark`` are ``datetime``s, Spark ``Column``s or a
    pyarrow compute ``Expression`` and scalar; the result is a bool, a Column or an
    Expression (a null event time is neither late nor on time: a filter drops it)."""
    return event_time.__lt__(watermark)


def input_watermark(explicit: Iterable[Watermark], previous: datetime | None) -> datetime | None:
    """The newest of ``previous`` and every explicit watermark's event time."""
    candidates = [w.event_time for w in explicit]
    if previous is not None:
        candidates.append(previous)
    return max(candidates, default=None)


def output_watermark(
    inputs: Iterable[datetime | None], previous: datetime | None, lag: timedelta = timedelta(0)
) -> datetime | None:
    """Minimum over inputs with a watermark less ``lag``, clamped so it never goes below
    ``previous``."""
    known = [w - lag for w in inputs if w is not None]
    current = min(known, default=None)
    if current is None:
        return previous
    if previous is not None and previous > current:
        return previous
    return current
