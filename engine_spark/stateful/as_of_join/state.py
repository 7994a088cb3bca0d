"""An as-of join's state between transactions (pure pyarrow).

Stream rows wait until the versioned input's watermark reaches their event time: only then
is no version at or before it still to come (a later one would be late and dropped), so the
row's version is final and the row is emitted, exactly once. The state is

- the waiting stream rows (event time after the versioned input's watermark), and
- the versions a waiting or future stream row can still need. Every such row has an event
  time after ``horizon`` = min(stream watermark, versioned watermark): waiting rows are
  after the versioned watermark, future ones not late, so after the stream watermark. Such
  a row needs, per key, the newest version at or before ``horizon`` (or a newer one), so the
  state keeps that one version per key plus every version after ``horizon``.

It grows with the number of keys and the versions between the watermarks, not with history.
Without a stream watermark a future row may be at any time: every version is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from engine_spark.watermark import is_late

_INDEX = "__odf_index"


def split_released(
    rows: pa.Table, event_time: str, versioned_watermark: datetime | None
) -> tuple[pa.Table, pa.Table]:
    """``rows`` as (released, waiting): released when the event time is before the versioned
    input's watermark (or null: no version can match it, nothing will change); a row at the
    watermark waits, since a version at that time is not late (``watermark.is_late``)."""
    if versioned_watermark is None:
        return rows.schema.empty_table(), rows
    value = pa.scalar(versioned_watermark, rows.schema.field(event_time).type)
    late = is_late(pc.field(event_time), value)
    return rows.filter(late | pc.field(event_time).is_null()), rows.filter(~late)


def horizon(
    stream_watermark: datetime | None, versioned_watermark: datetime | None
) -> datetime | None:
    """The time every waiting or future stream row is after; None when there is none."""
    if stream_watermark is None or versioned_watermark is None:
        return None
    return min(stream_watermark, versioned_watermark)


def retained_versions(
    versions: pa.Table,
    key: Sequence[str],
    event_time: str,
    offset: str,
    after: datetime | None,
) -> pa.Table:
    """The versions still needed when every later lookup is after ``after``: per key the
    newest (by event time, then offset) at or before it, and all after it; in offset order."""
    if after is not None and versions.num_rows > 0:
        later = _after(versions, event_time, after)
        settled = versions.filter(pc.invert(later))
        ordered = settled.sort_by([(event_time, "ascending"), (offset, "ascending")])
        indexed = ordered.append_column(_INDEX, pa.array(range(ordered.num_rows), pa.int64()))
        newest = indexed.group_by(list(key), use_threads=False).aggregate([(_INDEX, "max")])
        kept = ordered.take(newest.column(f"{_INDEX}_max"))
        versions = pa.concat_tables([kept, versions.filter(later)])
    return versions.sort_by([(offset, "ascending")])


def _after(rows: pa.Table, column: str, instant: datetime) -> pa.ChunkedArray:
    value = pa.scalar(instant, rows.schema.field(column).type)
    return pc.fill_null(pc.greater(rows.column(column), value), False)
