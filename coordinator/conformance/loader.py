"""Reading cases: YAML files (one case per file), validated against ``case.schema.json``.

Times stay strings (YAML's own timestamp typing is off, so ``2024-01-01T00:00:00Z`` is read
exactly as written). A file that is not a valid case is refused with one line naming the file,
the field path and what is wrong; nothing is run from a directory with an invalid case.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow as pa
import yaml

from common.odf.errors import OdfError
from coordinator.conformance.case import EVENT_TIME, Case, Kind
from coordinator.conformance.values import (
    CaseValueError,
    arrow_type,
    expected_value,
    parse_op,
    to_arrow_value,
)

SCHEMA_RESOURCE = "case.schema.json"
MAX_CASE_BYTES = 1 << 20
SYSTEM_NAMES = frozenset({"offset", "op", "system_time"})


class CaseFormatError(OdfError):
    """A case file that is not a valid case."""


class _Loader(yaml.SafeLoader):
    """Safe YAML with timestamps left as strings."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def builtin_cases_dir() -> Path:
    """The corpus shipped with the kit."""
    return Path(str(resources.files("coordinator.conformance") / "cases"))


@cache
def case_schema() -> dict[str, Any]:
    text = (resources.files("coordinator.conformance") / SCHEMA_RESOURCE).read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def load_cases(directory: Path | None = None, pattern: str | None = None) -> list[Case]:
    """Every case under ``directory`` (default: the kit's corpus) whose name matches the glob
    ``pattern`` (or contains it), in the order of their paths."""
    root = directory or builtin_cases_dir()
    if not root.is_dir():
        raise CaseFormatError(f"{root}: not a directory of cases")
    files = sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    if not files:
        raise CaseFormatError(f"{root}: no case files (*.yaml)")
    cases = [load_case(p) for p in files]
    _unique_names(cases)
    return [c for c in cases if _matches(c.name, pattern)]


def load_case(path: Path) -> Case:
    try:
        if path.stat().st_size > MAX_CASE_BYTES:
            raise CaseFormatError(f"{path}: larger than {MAX_CASE_BYTES} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CaseFormatError(f"{path}: cannot read: {e}") from None
    try:
        doc = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise CaseFormatError(f"{path}: not YAML: {' '.join(str(e).split())}") from None
    return case_from_document(doc, str(path))


def case_from_document(doc: Any, source: str) -> Case:
    """Validate ``doc`` (schema, then cross references) and build its case."""
    validator = jsonschema.Draft202012Validator(case_schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        e = errors[0]
        where = ".".join(map(str, e.absolute_path)) or "(top)"
        raise CaseFormatError(f"{source}: {where}: {_short(e.message)}")
    _cross_check(doc, source)
    case = Case.from_document(doc, source)
    _check_values(case)
    return case


def _short(message: str) -> str:
    return message if len(message) <= 200 else message[:200] + "..."


def _cross_check(doc: dict[str, Any], source: str) -> None:
    def fail(where: str, what: str) -> None:
        raise CaseFormatError(f"{source}: {where}: {what}")

    aliases = [i["alias"] for i in doc.get("inputs", ())]
    if len(set(aliases)) != len(aliases):
        fail("inputs", "input aliases must be unique")
    columns = {i["alias"]: dict(i["columns"]) for i in doc.get("inputs", ())}
    event_time = {i["alias"]: i.get("event_time_column", EVENT_TIME) for i in doc.get("inputs", ())}
    offsets = {i["alias"]: i.get("first_offset", 0) for i in doc.get("inputs", ())}
    for alias, name in event_time.items():
        if name in SYSTEM_NAMES or name in columns[alias]:
            fail(f"inputs.{alias}.event_time_column", f"{name!r} names another column")
    for n, tx in enumerate(doc.get("transactions", ())):
        for alias, part in (tx.get("inputs") or {}).items():
            where = f"transactions.{n}.inputs.{alias}"
            if alias not in columns:
                fail(where, f"no input {alias!r} (inputs: {', '.join(aliases)})")
            if "columns" in part:
                columns[alias] = dict(part["columns"])
            slices = part.get("slices") or [part.get("rows") or []]
            named = {"before": part.get("before") or [], "after": part.get("after") or []}
            if (named["before"] or named["after"]) and not any(slices):
                fail(where, "before/after records need records in the interval (rows)")
            if len(named["before"]) > offsets[alias]:
                fail(
                    f"{where}.before",
                    f"{len(named['before'])} records before offset {offsets[alias]}: give the"
                    " input a first_offset",
                )
            allowed = set(columns[alias]) | {event_time[alias], "op", "system_time"}
            for s, rows in [*enumerate(slices), *named.items()]:
                for r, row in enumerate(rows):
                    at = f"{where}.slices.{s}.{r}" if isinstance(s, int) else f"{where}.{s}.{r}"
                    unknown = set(row) - allowed
                    if unknown:
                        fail(at, f"unknown column(s) {sorted(unknown)}")
                    if event_time[alias] not in row:
                        fail(at, f"a record needs {event_time[alias]}")
                    _check_row(row, event_time[alias], at, fail)
                offsets[alias] += len(rows) if isinstance(s, int) else 0
        for path, expect in _expects(tx.get("expect") or {}, f"transactions.{n}.expect"):
            _check_expect(expect, path, doc, fail)
    if "expect" in doc:
        for path, expect in _expects(doc["expect"], "expect"):
            _check_expect(expect, path, doc, fail)
    if doc.get("kind") == Kind.RAW_QUERY and doc.get("raw_input") is not None:
        raw = doc["raw_input"]
        for r, row in enumerate(raw["rows"]):
            unknown = set(row) - set(raw["columns"])
            if unknown:
                fail(f"raw_input.rows.{r}", f"unknown column(s) {sorted(unknown)}")


def _expects(doc: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """An expectation and, recursively, each of its acceptable outcomes."""
    yield path, doc
    for i, alternative in enumerate(doc.get("oneOf", ())):
        yield from _expects(alternative, f"{path}.oneOf.{i}")


def _check_expect(expect: dict[str, Any], where: str, doc: dict[str, Any], fail: Any) -> None:
    """Wildcards spelled right; an output schema checked without data has a way to ask."""
    for r, row in enumerate(expect.get("records") or ()):
        for name, value in row.items():
            try:
                expected_value(value)
            except CaseValueError as e:
                fail(f"{where}.records.{r}.{name}", str(e))
    schema = any(k in expect for k in ("columns", "types", "nullable"))
    kind = doc.get("kind", Kind.TRANSFORM)
    asks = schema and expect.get("records") == [] and kind == Kind.TRANSFORM
    if asks and "validate-query" not in doc.get("capabilities", ()):
        fail(
            where,
            "the output schema without data is asked of ValidateQuery: add the"
            " validate-query capability",
        )


def _check_row(row: dict[str, Any], event_time: str, where: str, fail: Any) -> None:
    """Values the schema cannot see: times written unquoted (YAML reads ``00:05`` as a
    number), operation types."""
    for name in (event_time, "system_time"):
        if row.get(name) is not None and not isinstance(row[name], str):
            fail(f"{where}.{name}", f"not a quoted time: {row[name]!r}")
    if "op" in row:
        try:
            parse_op(row["op"])
        except CaseValueError as e:
            fail(f"{where}.op", str(e))


def _check_values(case: Case) -> None:
    """Every input value converts to its column's Arrow type; every watermark is a time."""

    def column(values: list[Any], type_name: str, where: str) -> None:
        t = arrow_type(type_name)
        try:
            pa.array([to_arrow_value(v, t, case.date) for v in values], t)
        except (CaseValueError, pa.ArrowException, ValueError, TypeError, ArithmeticError) as e:
            raise CaseFormatError(f"{case.source}: {where}: {' '.join(str(e).split())}") from None

    schemas = {
        i.alias: {"system_time": "timestamp-ms", i.event_time_column: i.event_time, **i.columns}
        for i in case.inputs
    }
    for tx in case.transactions:
        for alias, part in tx.inputs.items():
            where = f"transactions.{tx.index}.inputs.{alias}"
            if part.columns is not None:
                schemas[alias] = dict(list(schemas[alias].items())[:2]) | part.columns
            for i, m in enumerate(part.watermarks):
                column([m.event_time, m.system_time], "timestamp-us", f"{where}.watermarks.{i}")
            for rows in (*part.slices, part.before, part.after):
                for name, type_name in schemas[alias].items():
                    column([r.get(name) for r in rows], type_name, f"{where}: column {name}")
    if case.raw_input is not None:
        for name, type_name in case.raw_input.columns.items():
            rows = case.raw_input.rows
            column([r.get(name) for r in rows], type_name, f"raw_input: column {name}")


def _unique_names(cases: Iterable[Case]) -> None:
    seen: dict[str, str] = {}
    for c in cases:
        if c.name in seen:
            raise CaseFormatError(f"{c.source}: case name {c.name!r} is also in {seen[c.name]}")
        seen[c.name] = c.source


def _matches(name: str, pattern: str | None) -> bool:
    if not pattern:
        return True
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern in name
