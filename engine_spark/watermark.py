"""Watermarks: per input, then for the output, and the lateness rule (pure functions).

The two rules every runner applies (``engine_spark/README.md``, semantics):

* lateness (``is_late``): a watermark T promises no more events with event time *less than*
  T, so a record is late only when its event time is less than its input's watermark when
  it arrives; a record exactly at the watermark is on time.
* output watermark (``output_watermark``): the greatest T such that no later output can have
  an event time below T, computed exactly from the inputs' watermarks and the query's
  ``lag`` (how far behind its inputs' watermark an output row may still be emitted: an
  interval join lags by its bound; a window aggregation by what ``window_bound`` says, which
  depends on where the watermark falls on the windows' grid and may be negative), with no
  engine margin added, down to the millisecond the output's event times are written in.

Spark's Structured Streaming (``streaming.py``) keeps its watermark in whole milliseconds and
compares with ``<=``: it drops a record as late when its event time is at or below the
previous batch's watermark, and closes a window (evicts a key) when its end (the key's event
time) is at or below the current one. The runner hands Spark watermarks that make those
comparisons say what the rules above say (``spark_late_watermark``,
``spark_eviction_watermark``); records late by the ODF rule are dropped before Spark sees
them, so Spark's own late filter only has to drop nothing more. Evicting in whole
milliseconds loses nothing for keys on whole milliseconds; a key off one may be held a
transaction late, and while it may be, the output watermark stays below it
(``spark_output_margin``, ``off_millisecond_key``).

An input's watermark is the newest of its explicit watermarks in this request and the one
carried in the previous checkpoint; watermarks never move back. The output watermark is the
minimum over the inputs that have one (an input that never had a watermark does not hold the
output back, as in the DataFusion engine, rather than failing as the reference Spark engine
does), and never less than the previous output watermark, because the coordinator rejects a
watermark that decreases.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
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
    """Minimum over inputs with a watermark less ``lag``, down to the millisecond (the output's
    event times are written in whole milliseconds, truncated: a row after T may be written
    as the millisecond T falls in), clamped so it never goes below ``previous``."""
    known = [w - lag for w in inputs if w is not None]
    current = min(known, default=None)
    if current is None:
        return previous
    current = _EPOCH + ((current - _EPOCH) // _MS) * _MS
    if previous is not None and previous > current:
        return previous
    return current


def window_bound(
    watermark: datetime,
    *,
    width: timedelta,
    slide: timedelta,
    offset: timedelta,
    by_end: bool,
) -> datetime:
    """The output watermark of a window aggregation once its input watermark is
    ``watermark``: the earliest event time a window still to be emitted can carry, never
    above ``watermark`` itself.

    Windows are ``[s, s + width)`` with ``s`` on the grid ``offset + n * slide`` (tumbling:
    ``slide == width``), and a window is emitted once the watermark reaches its end. Every
    window still to come, open now or opened by a record on time (at ``watermark`` or
    later), therefore ends after ``watermark``: its start is a grid point after
    ``watermark - width``. The first such start is the bound of windows labelled by their
    start (or by any time inside them): daily windows at a watermark of day 8 00:00 give
    day 8, at day 7 01:00 day 7.

    Labelled by their end, every window still to come would carry a time after
    ``watermark``; but the reference engines pass the input watermark through such a window
    (a valid, looser bound), and an ODF watermark claims no more than the engines that share
    its blocks, so it is ``watermark``."""
    if by_end:
        return watermark
    after = (watermark - width - _EPOCH) // _US - offset // _US
    step = slide // _US
    start = _EPOCH + offset + (after // step + 1) * slide
    return min(start, watermark)  # a grid with gaps (slide > width) may start after it


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_US = timedelta(microseconds=1)


def _below_in_ms(value: datetime) -> datetime:
    """The greatest whole millisecond strictly below ``value``."""
    return _EPOCH + ((value - _EPOCH - _US) // _MS) * _MS


def spark_late_watermark(previous: datetime) -> datetime:
    """The watermark (whole ms) Spark's late filter (``event time <= it``) must use so that it
    drops no record that ``is_late`` keeps: the greatest millisecond below ``previous``."""
    return _below_in_ms(previous)


def spark_eviction_watermark(watermark: datetime, *, points: bool) -> datetime:
    """The watermark (whole ms) Spark closes windows and evicts keys with (``end <= it``).

    A window ``[start, end)`` is complete once the watermark reaches its end, so windows
    close by the watermark truncated to the millisecond (Spark's windows end on whole
    milliseconds). A key that is an event time itself (``points``: GROUP BY event_time,
    DISTINCT) is complete only once the watermark is *past* it (a record at the watermark is
    on time): the greatest millisecond below the watermark."""
    if points:
        return _below_in_ms(watermark)
    return _EPOCH + ((watermark - _EPOCH) // _MS) * _MS


def spark_output_margin(
    watermark: datetime, *, points: bool, off_millisecond: datetime | None = None
) -> timedelta:
    """How far below the inputs' watermark Spark may still emit an output's event time
    because it evicts only in whole milliseconds (``spark_eviction_watermark``): a key in
    the open interval between the eviction watermark and ``watermark`` is still held, and
    its output row can come later. Only a key off a whole millisecond can lie there, so the
    margin is zero for windows, and for point keys unless one may be held there:
    ``off_millisecond`` is the latest such key Spark may still hold (None: none). Otherwise
    ``watermark`` less the first microsecond after the eviction watermark (up to 999 us)."""
    evicted = spark_eviction_watermark(watermark, points=True)
    if not points or off_millisecond is None or off_millisecond <= evicted:
        return timedelta(0)
    return watermark - (evicted + _US)


def off_millisecond_key(
    latest: datetime | None, previous: datetime | None, evicted: datetime | None
) -> datetime | None:
    """The latest key off a whole millisecond Spark may still hold after this transaction:
    the newer of ``latest`` (this transaction's) and ``previous`` (carried), None once Spark
    has evicted it (at or below ``evicted``, Spark's eviction watermark)."""
    keys = [k for k in (latest, previous) if k is not None]
    if not keys:
        return None
    key = max(keys)
    return None if evicted is not None and key <= evicted else key
