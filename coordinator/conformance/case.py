"""The case model (pure): what a conformance case says, as frozen dataclasses.

A case is data only: input schemas, the transform per SQL dialect, the transactions (records,
explicit watermarks, schema changes, query migrations) and what each response must be.
``Case.from_document`` builds the model from a document the JSON Schema has accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from coordinator.conformance.values import expected_value

DEFAULT_DATE = "2024-01-01"
EVENT_TIME = "event_time"
"""The event-time column's name unless a case or an input names another (DatasetVocabulary)."""


class Kind(StrEnum):
    TRANSFORM = "transform"
    RAW_QUERY = "raw-query"
    VALIDATE = "validate"


class ErrorClass(StrEnum):
    """The engine's answer to a request it does not carry out (engine contract)."""

    INVALID_QUERY = "invalid-query"
    INTERNAL_ERROR = "internal-error"


class Order(StrEnum):
    ORDERED = "ordered"
    """Rows in exactly this order (and offsets as listed)."""
    ANY = "any"
    """Rows as a multiset: the spec leaves their order open (offsets are still contiguous)."""


Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class QueryStep:
    query: str
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class TemporalTableSpec:
    name: str
    primary_key: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TransformSpec:
    """One dialect's transform: the steps (the last one without alias is the output)."""

    queries: tuple[QueryStep, ...]
    temporal_tables: tuple[TemporalTableSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Dialects:
    """The same semantic transform written for several engines' SQL dialects."""

    by_dialect: dict[str, TransformSpec]

    def get(self, dialect: str) -> TransformSpec | None:
        return self.by_dialect.get(dialect)


@dataclass(frozen=True, slots=True)
class InputSpec:
    alias: str
    columns: dict[str, str]
    """Data columns (name to type name); the system columns come first in every slice."""
    event_time: str = "timestamp-ms"
    event_time_column: str = EVENT_TIME
    """The input's event-time column (its vocabulary); its rows name it so."""
    first_offset: int = 0
    """The input's first offset (a dataset whose earlier records this output never saw)."""


@dataclass(frozen=True, slots=True)
class WatermarkSpec:
    """One explicit watermark of an input (its system time: the transaction's by default)."""

    event_time: str
    system_time: str | None = None


@dataclass(frozen=True, slots=True)
class TxInput:
    """An input's part of one transaction: new slices (files), watermarks, a new schema, and
    records in the files outside the requested interval (``before`` it, ``after`` it)."""

    slices: tuple[tuple[Row, ...], ...] = ()
    watermarks: tuple[WatermarkSpec, ...] = ()
    columns: dict[str, str] | None = None
    before: tuple[Row, ...] = ()
    """Records written in the first file ahead of the interval (offsets below its start)."""
    after: tuple[Row, ...] = ()
    """Records written in the last file past the interval's end."""


@dataclass(frozen=True, slots=True)
class Expect:
    records: tuple[Row, ...] | None = None
    order: Order = Order.ANY
    columns: tuple[str, ...] | None = None
    types: dict[str, str] | None = None
    watermark: str | None = None
    check_watermark: bool = False
    checkpoint: bool | None = None
    error: ErrorClass | None = None
    nullable: dict[str, bool] | None = None
    """Whether each named output column is nullable in the output schema."""
    one_of: tuple[Expect, ...] = ()
    """Acceptable outcomes: the answer passes when it meets any of them (then nothing else
    is set here)."""

    def schema_checks(self) -> bool:
        return self.columns is not None or self.types is not None or self.nullable is not None


@dataclass(frozen=True, slots=True)
class Transaction:
    index: int
    expect: Expect
    inputs: dict[str, TxInput]
    system_time: str | None = None
    migrate: Dialects | None = None
    note: str = ""
    corrupt_checkpoint: bool = False
    """Hand the engine a damaged previous checkpoint (its error class is then checked)."""


@dataclass(frozen=True, slots=True)
class RawInput:
    columns: dict[str, str]
    rows: tuple[Row, ...]


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    spec: str
    kind: Kind
    capabilities: frozenset[str]
    description: str = ""
    date: str = DEFAULT_DATE
    inputs: tuple[InputSpec, ...] = ()
    transform: Dialects | None = None
    prev_transform: Dialects | None = None
    next_offset: int = 0
    transactions: tuple[Transaction, ...] = ()
    raw_input: RawInput | None = None
    expect: Expect | None = None
    source: str = ""
    """Where the case was read from (for messages)."""
    event_time_column: str = EVENT_TIME
    """The output's event-time column (the output dataset's vocabulary)."""
    known_difference: str | None = None
    """Why this engine is known to differ from the expected answer: the case is then expected
    to fail (and a pass is reported, so the marker is removed)."""

    @classmethod
    def from_document(cls, doc: dict[str, Any], source: str = "") -> Case:
        """The case of a document valid under the JSON Schema."""
        raw = doc.get("raw_input")
        return cls(
            name=doc["case"],
            spec=doc["spec"],
            kind=Kind(doc.get("kind", Kind.TRANSFORM)),
            capabilities=frozenset(doc.get("capabilities", ())),
            description=doc.get("description", ""),
            date=doc.get("date", DEFAULT_DATE),
            inputs=tuple(
                InputSpec(
                    alias=i["alias"],
                    columns=dict(i["columns"]),
                    event_time=i.get("event_time", "timestamp-ms"),
                    event_time_column=i.get("event_time_column", EVENT_TIME),
                    first_offset=i.get("first_offset", 0),
                )
                for i in doc.get("inputs", ())
            ),
            transform=_dialects(doc.get("transform")),
            prev_transform=_dialects(doc.get("prev_transform")),
            next_offset=doc.get("next_offset", 0),
            transactions=tuple(
                _transaction(i, t) for i, t in enumerate(doc.get("transactions", ()))
            ),
            raw_input=(
                RawInput(columns=dict(raw["columns"]), rows=tuple(raw["rows"])) if raw else None
            ),
            expect=_expect(doc["expect"]) if "expect" in doc else None,
            source=source,
            event_time_column=doc.get("event_time_column", EVENT_TIME),
            known_difference=doc.get("knownDifference"),
        )

    def dialects(self) -> frozenset[str]:
        """The dialects every transform of the case is written in."""
        all_ = [d for d in (self.transform, self.prev_transform) if d is not None]
        all_ += [t.migrate for t in self.transactions if t.migrate is not None]
        names = [frozenset(d.by_dialect) for d in all_]
        return frozenset.intersection(*names) if names else frozenset()


def _dialects(doc: dict[str, Any] | None) -> Dialects | None:
    if doc is None:
        return None
    return Dialects(
        {
            name: TransformSpec(
                queries=tuple(QueryStep(q["query"], q.get("alias")) for q in t["queries"]),
                temporal_tables=tuple(
                    TemporalTableSpec(tt["name"], tuple(tt["primary_key"]))
                    for tt in t.get("temporal_tables", ())
                ),
            )
            for name, t in doc.items()
        }
    )


def _transaction(index: int, doc: dict[str, Any]) -> Transaction:
    inputs = {}
    for alias, t in (doc.get("inputs") or {}).items():
        slices = t.get("slices") or ([t["rows"]] if t.get("rows") else [])
        marks = [t["watermark"]] if "watermark" in t else t.get("watermarks", ())
        inputs[alias] = TxInput(
            slices=tuple(tuple(s) for s in slices if s),
            watermarks=tuple(
                WatermarkSpec(m) if isinstance(m, str) else WatermarkSpec(**m) for m in marks
            ),
            columns=dict(t["columns"]) if "columns" in t else None,
            before=tuple(t.get("before", ())),
            after=tuple(t.get("after", ())),
        )
    return Transaction(
        index=index,
        expect=_expect(doc["expect"]),
        inputs=inputs,
        system_time=doc.get("system_time"),
        migrate=_dialects(doc.get("migrate")),
        note=doc.get("note", ""),
        corrupt_checkpoint=doc.get("corrupt_checkpoint", False),
    )


def _expect(doc: dict[str, Any]) -> Expect:
    records = doc.get("records")
    return Expect(
        records=(
            tuple({k: expected_value(v) for k, v in r.items()} for r in records)
            if records is not None
            else None
        ),
        order=Order(doc.get("order", Order.ANY)),
        columns=tuple(doc["columns"]) if "columns" in doc else None,
        types=dict(doc["types"]) if "types" in doc else None,
        watermark=doc.get("watermark"),
        check_watermark="watermark" in doc,
        checkpoint=doc.get("checkpoint"),
        error=ErrorClass(doc["error"]) if "error" in doc else None,
        nullable=dict(doc["nullable"]) if "nullable" in doc else None,
        one_of=tuple(_expect(e) for e in doc.get("oneOf", ())),
    )
