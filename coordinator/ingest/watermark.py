"""Setting a root dataset's watermark by hand (``odf set-watermark``).

ODF 0.35 has no separate watermark event: as the reference's ``pull --set-watermark`` does, the
watermark is committed as an ``AddData`` with no data and only ``newWatermark``. Unlike the
reference, the polling source's state is carried over (the reference's block erases it, so the
next poll fetches everything again). Watermarks only move forward: one at or before the
current watermark is refused. Derivative datasets get their watermarks from their inputs.
"""

from __future__ import annotations

from datetime import datetime

from common.odf.errors import ValidationError
from common.odf.multihash import Multihash
from coordinator.dataset import Dataset
from coordinator.dataset.state import next_system_time
from coordinator.ingest.context import chain_context
from coordinator.ingest.errors import SourceNotFoundError


class WatermarkError(ValidationError):
    """The watermark cannot be set: it would move backwards, or the dataset is derived."""


def set_watermark(
    dataset: Dataset, watermark: datetime, *, system_time: datetime | None = None
) -> Multihash:
    """Commit ``watermark`` as the dataset's new watermark; the new head."""
    if watermark.tzinfo is None:
        raise WatermarkError("the watermark needs a time zone (e.g. ...Z)", path="TIME")
    try:
        state, context = chain_context(dataset)
    except SourceNotFoundError:
        raise WatermarkError(
            f"dataset {dataset.alias!r} is not a root dataset: a derivative's watermark follows"
            " its inputs'",
            path="NAME",
        ) from None
    prev = context.prev_watermark
    if prev is not None and watermark <= prev:
        raise WatermarkError(
            f"{watermark.isoformat()} is not after the current watermark {prev.isoformat()}:"
            " watermarks only move forward",
            path="TIME",
        )
    event = context.add_data(None, watermark, context.prev_source_state)
    return dataset.commit(
        event, expected_head=state.head, system_time=system_time or next_system_time(state)
    )
