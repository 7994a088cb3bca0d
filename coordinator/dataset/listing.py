"""A dataset's listing figures read from its state cache, without decoding a block.

``state_cache.save`` stores, next to the head and the ``origins``, the few figures ``odf list``
shows (``summary``: kind, block count, records, update time, watermark). When the cache is
at the current head and the blocks it names still match their hashes, ``read`` returns those
figures: the listing then needs neither the FlatBuffers model nor any block decoding. In any
other case (no cache, an older cache without figures, a head that moved on, a damaged file)
it returns ``None`` and the caller computes the state the full way, which also reports what
is wrong. This module imports only the standard library and ``Multihash`` (CLI start time).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from common.odf.errors import OdfError
from common.odf.multihash import Multihash
from common.odf.record import positional_record
from coordinator.tempdirs import require_real_dir

if TYPE_CHECKING:
    from coordinator.dataset.layout import DatasetLayout
    from coordinator.dataset.state import DatasetState

SUMMARY_KEY = "summary"
_T = TypeVar("_T")


@positional_record
class Listing:
    """What ``odf list`` shows of a dataset at ``head``."""

    head: Multihash
    kind: str | None
    blocks: int
    records: int
    size: int
    updated: datetime | None
    watermark: datetime | None


def summary_doc(state: DatasetState) -> dict[str, Any]:
    """The figures of ``state`` as stored in the state cache (plain JSON values)."""
    return {
        "kind": state.kind.value if state.kind else None,
        "blocks": state.sequence_number + 1,
        "records": state.num_records,
        "updated": _time_text(state.system_time),
        "watermark": _time_text(state.last_watermark),
    }


def read(layout: DatasetLayout) -> Listing | None:
    """The listing of the dataset at ``layout`` from its state cache when that is current
    and every block it names is intact; else ``None`` (compute the state instead)."""
    import json  # here: odf log, which never reads the cache, starts without it

    try:
        head_text = layout.head_ref_path.read_text(encoding="ascii").strip()
        if not require_real_dir(layout.private_dir):
            return None
        doc = json.loads(layout.state_cache_path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or doc.get("head") != head_text or doc.get("format") != 1:
            return None
        head = Multihash.from_multibase(head_text)
        figures = doc[SUMMARY_KEY]
        for h in {head_text, *(str(h) for _, h in doc["origins"])}:
            block = Multihash.from_multibase(h)
            if Multihash.sha3_256(layout.block_path(block).read_bytes()) != block:
                return None
        return Listing(
            head=head,
            kind=_optional(figures["kind"], str),
            blocks=_integer(figures["blocks"]),
            records=_integer(figures["records"]),
            size=_integer(doc["data_size"]),
            updated=_time(figures["updated"]),
            watermark=_time(figures["watermark"]),
        )
    except (OSError, ValueError, KeyError, TypeError, OdfError):
        return None  # anything unexpected: the full way says what is wrong, if anything


def _time_text(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _time(value: Any) -> datetime | None:
    text = _optional(value, str)
    return datetime.fromisoformat(text) if text is not None else None


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"not a count: {value!r}")
    return value


def _optional(value: Any, kind: type[_T]) -> _T | None:
    if value is None or isinstance(value, kind):
        return value
    raise TypeError(f"not a {kind.__name__}: {value!r}")
