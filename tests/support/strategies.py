"""Hypothesis strategies for every type of the ODF model, derived from its type hints.

``model(cls)`` generates instances of any model dataclass: every field is filled according
to the same field plan the FlatBuffers codec uses (``common.serde.fb_plan``), so a new field
or union variant is covered without touching this module. Optional fields are ``None`` or a
value, vectors are short tuples, unions pick any variant.

Named helpers: ``metadata_blocks()``, ``metadata_events()``, ``utc_datetimes()``,
``multihashes()``, ``dataset_ids()``. Pass ``text=`` to restrict strings (e.g. to printable
characters for a text format).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

from common.odf import unions
from common.odf.block import MetadataBlock
from common.odf.identity import DatasetID
from common.odf.multihash import ARROW0_SHA3_256, SHA3_256, Multihash
from common.serde.fb_plan import FieldPlan, Kind, plan_of

U64_MAX = (1 << 64) - 1
MAX_VECTOR = 3

DEFAULT_TEXT: st.SearchStrategy[str] = st.text(max_size=24)
"""Any Unicode text except surrogates (which UTF-8 cannot encode), NUL included."""


def utc_datetimes() -> st.SearchStrategy[datetime]:
    """Aware UTC datetimes over the whole range Python supports, microsecond precision."""
    return st.datetimes(
        min_value=datetime(1, 1, 1),
        max_value=datetime(9999, 12, 31, 23, 59, 59, 999_999),
        timezones=st.just(UTC),
    )


def offset_datetimes() -> st.SearchStrategy[datetime]:
    """Aware datetimes in fixed-offset time zones (not UTC), away from the range limits."""
    zones = (
        st.integers(-14 * 60, 14 * 60)
        .filter(bool)
        .map(lambda minutes: timezone(timedelta(minutes=minutes)))
    )
    return st.datetimes(
        min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=zones
    )


def multihashes() -> st.SearchStrategy[Multihash]:
    return st.builds(
        Multihash,
        st.sampled_from([SHA3_256, ARROW0_SHA3_256, 0x12]),
        st.one_of(st.binary(min_size=32, max_size=32), st.binary(max_size=64)),
    )


def dataset_ids() -> st.SearchStrategy[DatasetID]:
    return st.builds(DatasetID, st.binary(min_size=32, max_size=32))


def model(cls: type, *, text: st.SearchStrategy[str] = DEFAULT_TEXT) -> st.SearchStrategy[Any]:
    """Instances of model dataclass ``cls`` with every field generated from its type."""
    plan = plan_of(cls)
    kwargs = {f.name: _field(f, text) for f in plan.fields}
    return st.builds(cls, **kwargs)


def union_values(
    union: str, *, text: st.SearchStrategy[str] = DEFAULT_TEXT
) -> st.SearchStrategy[Any]:
    """Values of any variant of the registered union ``union`` (e.g. ``"MetadataEvent"``)."""
    return st.one_of([model(v, text=text) for v in unions.variants(union)])


def metadata_events(*, text: st.SearchStrategy[str] = DEFAULT_TEXT) -> st.SearchStrategy[Any]:
    return union_values("MetadataEvent", text=text)


def metadata_blocks(
    *, text: st.SearchStrategy[str] = DEFAULT_TEXT, event: st.SearchStrategy[Any] | None = None
) -> st.SearchStrategy[MetadataBlock]:
    """Blocks with any event (or events from ``event``)."""
    return st.builds(
        MetadataBlock,
        system_time=utc_datetimes(),
        prev_block_hash=st.none() | multihashes(),
        sequence_number=_u64(),
        event=event if event is not None else metadata_events(text=text),
    )


def _u64() -> st.SearchStrategy[int]:
    return st.one_of(st.just(0), st.integers(0, 1000), st.integers(0, U64_MAX))


def _field(f: FieldPlan, text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    value = _value(f, text)
    return st.none() | value if f.optional else value


def _value(f: FieldPlan, text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    kind = f.kind
    simple: dict[Kind, st.SearchStrategy[Any]] = {
        Kind.STRING: text,
        Kind.BYTES: st.binary(max_size=64),
        Kind.MULTIHASH: multihashes(),
        Kind.DATASET_ID: dataset_ids(),
        Kind.U64: _u64(),
        Kind.I32: st.integers(-(1 << 31), (1 << 31) - 1),
        Kind.BOOL: st.booleans(),
        Kind.TIMESTAMP: utc_datetimes(),
    }
    if kind in simple:
        return simple[kind]
    if kind is Kind.STRING_VEC:
        return _tuples(text)
    if kind is Kind.ENUM:
        assert f.target is not None
        return st.sampled_from(f.enum_members)
    if kind is Kind.TABLE or kind is Kind.TABLE_VEC:
        target = f.target
        assert target is not None
        table = st.deferred(lambda: model(target, text=text))
        return table if kind is Kind.TABLE else _tuples(table)
    assert f.union is not None
    union = f.union
    if kind is Kind.UNION:
        return st.deferred(lambda: union_values(union, text=text))
    return _tuples(st.deferred(lambda: union_values(union, text=text)))


def _tuples(elements: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(elements, max_size=MAX_VECTOR).map(tuple)
