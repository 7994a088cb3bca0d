"""Comparing an engine's answer with a case (pure): each failure names the rule it breaks.

Rules checked on every successful transaction, whatever the case expects: the system columns
(``offset, op, system_time, event_time`` first, integer offsets and ops, timestamp system
time, timestamp or date event time), offsets contiguous from the request's ``next_offset`` and
matching the response's interval, a data slice exactly when an interval is returned, and
every ``system_time`` equal to the request's. Then what the case expects: records (in order,
or as a multiset; wildcards match sets of values), columns, types, nullability, the output
watermark, the checkpoint, the error class, or any one of several acceptable outcomes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa

from coordinator.conformance.case import ErrorClass, Expect, Order
from coordinator.conformance.values import Wildcard, canonical, parse_op, parse_time, type_name

SYSTEM_COLUMNS = ("offset", "op", "system_time", "event_time")
"""The system columns every slice starts with (the last one as the output's vocabulary names
the event-time column)."""
MAX_DIFF_ROWS = 8


@dataclass(frozen=True, slots=True)
class Failure:
    rule: str
    """The rule broken: ``records``, ``offsets``, ``watermark``, ``error-class``..."""
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


@dataclass(frozen=True, slots=True)
class Answer:
    """What the engine answered one request."""

    error: ErrorClass | None = None
    error_message: str = ""
    table: pa.Table | None = None
    """The output data slice (None: no file)."""
    interval: tuple[int, int] | None = None
    watermark: datetime | None = None
    checkpoint: bool = False


def check_outcome(
    expect: Expect, answer: Answer, check: Callable[[Expect], list[Failure]]
) -> list[Failure]:
    """The error class, then ``check`` of a successful answer; with ``one_of``, the answer
    passes when it meets any of the acceptable outcomes."""
    if expect.one_of:
        outcomes = [check_outcome(e, answer, check) for e in expect.one_of]
        if any(not failures for failures in outcomes):
            return []
        lines = [
            f"  outcome {i}: " + "; ".join(str(f).replace("\n", "\n    ") for f in failures)
            for i, failures in enumerate(outcomes)
        ]
        return [Failure("one-of", "no acceptable outcome is met:\n" + "\n".join(lines))]
    failures = check_error_class(expect, answer)
    if failures or answer.error is not None:
        return failures
    return check(expect)


def check_error_class(expect: Expect, answer: Answer) -> list[Failure]:
    if expect.error == answer.error:
        return []
    want = expect.error.value if expect.error else "success"
    got = answer.error.value if answer.error else "success"
    detail = f": {answer.error_message}" if answer.error_message else ""
    return [Failure("error-class", f"expected {want}, got {got}{detail}")]


def check_transform(
    expect: Expect,
    answer: Answer,
    *,
    next_offset: int,
    system_time: datetime,
    day: str,
    event_time: str = "event_time",
) -> list[Failure]:
    """Every rule for a successful ExecuteTransform / MigrateQuery answer (``event_time``:
    the output's event-time column)."""
    failures = _check_slice(answer, next_offset, system_time, event_time)
    table = answer.table
    failures += check_records(expect, table, day, system=True)
    if expect.check_watermark:
        want = parse_time(expect.watermark, day) if expect.watermark is not None else None
        if want != answer.watermark:
            failures.append(
                Failure(
                    "watermark",
                    f"output watermark: expected {_time(want)}, got {_time(answer.watermark)}",
                )
            )
    if expect.checkpoint is not None and expect.checkpoint != answer.checkpoint:
        what = "a checkpoint" if expect.checkpoint else "no checkpoint"
        got = "one" if answer.checkpoint else "none"
        failures.append(Failure("checkpoint", f"expected {what}, got {got}"))
    return failures


def _check_slice(
    answer: Answer, next_offset: int, system_time: datetime, event_time: str
) -> list[Failure]:
    table, interval = answer.table, answer.interval
    if table is None:
        if interval is not None:
            return [Failure("data-slice", f"offset interval {interval} returned but no data file")]
        return []
    if interval is None:
        return [Failure("data-slice", f"a data file of {table.num_rows} rows but no interval")]
    out: list[Failure] = []
    if table.num_rows == 0:
        out.append(Failure("data-slice", "an empty data file (no data must mean no file)"))
    names = tuple(table.column_names[:4])
    system = (*SYSTEM_COLUMNS[:3], event_time)
    if names != system:
        out.append(
            Failure(
                "system-columns",
                f"first columns {list(names)}, expected {', '.join(system)}",
            )
        )
        return out
    schema = table.schema
    for name, ok in (
        ("offset", pa.types.is_integer(schema.field("offset").type)),
        ("op", pa.types.is_integer(schema.field("op").type)),
        ("system_time", pa.types.is_timestamp(schema.field("system_time").type)),
        (event_time, _is_time(schema.field(event_time).type)),
    ):
        if not ok:
            out.append(Failure("system-columns", f"{name} has type {schema.field(name).type}"))
    start, end = interval
    offsets = table.column("offset").to_pylist()
    want = list(range(next_offset, next_offset + table.num_rows))
    if start != next_offset or end != start + table.num_rows - 1:
        out.append(
            Failure(
                "offsets",
                f"interval [{start}, {end}] for {table.num_rows} rows from next offset"
                f" {next_offset} (expected [{next_offset}, {next_offset + table.num_rows - 1}])",
            )
        )
    if offsets != want:
        at = next(i for i, (a, b) in enumerate(zip(offsets, want, strict=False)) if a != b)
        out.append(
            Failure(
                "offsets",
                f"offsets must run from {next_offset} in row order: row {at} has"
                f" {offsets[at]}, expected {want[at]}",
            )
        )
    if pa.types.is_timestamp(schema.field("system_time").type):
        times = set(table.column("system_time").to_pylist())
        if times != {system_time}:
            shown = ", ".join(sorted(_time(t) for t in times))
            out.append(
                Failure("system-time", f"system_time {shown}, expected {_time(system_time)}")
            )
    return out


def check_records(
    expect: Expect, table: pa.Table | None, day: str, *, system: bool
) -> list[Failure]:
    """The records, columns and types the case expects of ``table``."""
    out: list[Failure] = []
    if expect.columns is not None:
        got = table.column_names if table is not None else None
        if got is not None and tuple(got) != expect.columns:
            out.append(Failure("columns", f"columns {got}, expected {list(expect.columns)}"))
    if expect.types is not None and table is not None:
        for name, want in expect.types.items():
            if name not in table.column_names:
                continue
            got_type = type_name(table.schema.field(name).type)
            if got_type != want:
                out.append(Failure("types", f"column {name}: type {got_type}, expected {want}"))
    if expect.nullable is not None and table is not None:
        for name, nullable in expect.nullable.items():
            if name not in table.column_names:
                out.append(Failure("nullable", f"no column {name} in the output schema"))
            elif table.schema.field(name).nullable != nullable:
                what = "nullable" if nullable else "not nullable"
                out.append(Failure("nullable", f"column {name}: expected {what}"))
    if expect.records is None:
        return out
    if not expect.records:
        if table is not None and table.num_rows:
            out.append(
                Failure(
                    "records",
                    f"expected no records, got {table.num_rows}:\n"
                    + _rows_text(_actual_rows(table, None, day)[:MAX_DIFF_ROWS]),
                )
            )
        return out
    if table is None:
        return [*out, Failure("records", f"expected {len(expect.records)} records, got none")]
    keys = _compared_columns(expect, system)
    data_cols = [c for c in table.column_names if c not in ("offset", "op", "system_time")]
    if system and set(data_cols) != {k for k in keys if k not in ("offset", "op")}:
        wanted = [k for k in keys if k not in ("offset", "op")]
        out.append(Failure("columns", f"output columns {data_cols}, the case expects {wanted}"))
        return out
    missing = [k for k in keys if k not in table.column_names]
    if missing:
        return [*out, Failure("columns", f"output has no column(s) {missing}")]
    types = {k: table.schema.field(k).type for k in keys}
    expected = [
        tuple(zip(keys, _expected_row(r, keys, types, day, system), strict=True))
        for r in expect.records
    ]
    actual = _actual_rows(table, keys, day)
    diff = (
        _ordered_diff(expected, actual)
        if expect.order is Order.ORDERED
        else _multiset_diff(expected, actual)
    )
    if diff:
        rule = "op" if system and _only_op_differs(expected, actual) else "records"
        what = "operation types differ (RFC-015) " if rule == "op" else ""
        out.append(Failure(rule, f"{what}({expect.order.value}) {diff}"))
    return out


def _only_op_differs(expected: list[tuple[Any, ...]], actual: list[tuple[Any, ...]]) -> bool:
    def without_op(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return [tuple(kv for kv in r if kv[0] != "op") for r in rows]

    missing, extra = _unmatched(without_op(expected), without_op(actual))
    return not missing and not extra


def _compared_columns(expect: Expect, system: bool) -> list[str]:
    keys: dict[str, None] = {}
    if system:
        if expect.order is Order.ORDERED and any("offset" in r for r in expect.records or ()):
            keys["offset"] = None
        keys["op"] = None
    for r in expect.records or ():
        for k in r:
            if k not in ("offset", "op") or not system:
                keys[k] = None
    return list(keys)


def _expected_row(
    row: dict[str, Any], keys: list[str], types: dict[str, pa.DataType], day: str, system: bool
) -> tuple[Any, ...]:
    values: list[Any] = []
    for k in keys:
        value = row.get(k)
        if system and k == "op":
            values.append(parse_op(row.get("op", 0)))
        elif isinstance(value, Wildcard):
            values.append(value.bound(types[k]))
        else:
            values.append(_hashable(canonical(value, types[k], day)))
    return tuple(values)


def _actual_rows(table: pa.Table, keys: list[str] | None, day: str) -> list[tuple[Any, ...]]:
    names = keys or [c for c in table.column_names if c != "system_time"]
    columns = [table.column(k).to_pylist() for k in names]
    rows = [
        tuple(_hashable(canonical(v, None, day)) for v in vals)
        for vals in zip(*columns, strict=True)
    ]
    if keys is None:
        return [tuple(zip(names, r, strict=True)) for r in rows]
    return [tuple(zip(keys, r, strict=True)) for r in rows]


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


def _ordered_diff(expected: list[tuple[Any, ...]], actual: list[tuple[Any, ...]]) -> str:
    lines = []
    for i in range(max(len(expected), len(actual))):
        e = expected[i] if i < len(expected) else None
        a = actual[i] if i < len(actual) else None
        if e is None or a is None or not _row_matches(e, a):
            lines.append(f"  row {i}: expected {_row(e)}\n         got      {_row(a)}")
    if not lines:
        return ""
    head = f"{len(lines)} row(s) differ ({len(expected)} expected, {len(actual)} got):\n"
    return head + "\n".join(lines[:MAX_DIFF_ROWS])


def _row_matches(expected: tuple[Any, ...], actual: tuple[Any, ...]) -> bool:
    return len(expected) == len(actual) and all(
        k == ak and (e.matches(a) if isinstance(e, Wildcard) else e == a)
        for (k, e), (ak, a) in zip(expected, actual, strict=True)
    )


def _unmatched(
    expected: list[tuple[Any, ...]], actual: list[tuple[Any, ...]]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The expected rows and the actual rows left over by a best pairing of the two (a
    maximum bipartite matching: wildcard rows may match several actual rows)."""
    exact = [r for r in expected if not any(isinstance(v, Wildcard) for _, v in r)]
    wild = [r for r in expected if any(isinstance(v, Wildcard) for _, v in r)]
    # An exact row pairs with an equal actual row; any equal one will do.
    left = Counter(actual)
    missing = []
    for r in exact:
        if left[r] > 0:
            left[r] -= 1
        else:
            missing.append(r)
    rest = list(left.elements())
    candidates = [[j for j, a in enumerate(rest) if _row_matches(w, a)] for w in wild]
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j in candidates[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    missing += [w for i, w in enumerate(wild) if not assign(i, set())]
    extra = [a for j, a in enumerate(rest) if j not in owner]
    return missing, extra


def _multiset_diff(expected: list[tuple[Any, ...]], actual: list[tuple[Any, ...]]) -> str:
    missing, extra = _unmatched(expected, actual)
    if not missing and not extra:
        return ""
    lines = [f"{len(expected)} expected, {len(actual)} got"]
    lines += [f"  missing    {_row(r)}" for r in missing[:MAX_DIFF_ROWS]]
    lines += [f"  unexpected {_row(r)}" for r in extra[:MAX_DIFF_ROWS]]
    return "\n".join(lines)


def _rows_text(rows: list[tuple[Any, ...]]) -> str:
    return "\n".join(f"  {_row(r)}" for r in rows)


_OP_NAMES = {0: "+A", 1: "-R", 2: "-C", 3: "+C"}


def _row(row: tuple[Any, ...] | None) -> str:
    if row is None:
        return "(none)"
    parts = []
    for k, v in row:
        shown = _OP_NAMES.get(v, v) if k == "op" else v
        parts.append(f"{k}: {shown}")
    return "{" + ", ".join(parts) + "}"


def _is_time(t: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(t) or pa.types.is_date(t))


def _time(t: datetime | None) -> str:
    return "none" if t is None else str(canonical(t, None, ""))
