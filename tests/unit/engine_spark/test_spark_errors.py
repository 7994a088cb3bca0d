"""The table of which Spark errors are the query's fault (``engine_spark/spark_errors.py``),
checked against the error conditions of the Spark this engine runs (``error-conditions.json``
in its ``spark-common-utils`` jar): every condition the table names exists, and every
condition of the installed Spark is sorted by it as its SQLSTATE class says, but for the
table's exceptions."""

from __future__ import annotations

import json
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import pyspark
import pytest

from engine_spark.spark_errors import (
    ENGINE_CONDITION_PREFIXES,
    ENGINE_CONDITIONS,
    QUERY_CONDITIONS,
    WRAPPER_CONDITIONS,
    is_query_fault,
)


@cache
def conditions() -> dict[str, Any]:
    jars = Path(pyspark.__file__).parent / "jars"
    (jar,) = jars.glob("spark-common-utils_*.jar")
    with zipfile.ZipFile(jar) as archive:
        loaded: dict[str, Any] = json.loads(archive.read("error/error-conditions.json"))
    return loaded


def state(condition: str) -> str | None:
    value = conditions()[condition].get("sqlState")
    return str(value) if value else None


def test_every_condition_the_table_names_exists_in_the_installed_spark() -> None:
    named = set(QUERY_CONDITIONS) | ENGINE_CONDITIONS | WRAPPER_CONDITIONS
    assert named - set(conditions()) == set()
    for prefix in ENGINE_CONDITION_PREFIXES:
        assert any(c.startswith(prefix) for c in conditions()), prefix


@pytest.mark.parametrize(
    ("condition", "query"),
    [
        ("MULTIPLE_EVENT_TIME_COLUMNS", True),
        ("NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING", True),
        ("UNSUPPORTED_STREAMING_OPERATOR_WITHOUT_WATERMARK", True),
        ("_LEGACY_ERROR_TEMP_3102", True),  # the unsupported-operation check, no SQLSTATE
        ("UNRESOLVED_COLUMN", True),
        ("DIVIDE_BY_ZERO", True),
        ("CAST_INVALID_INPUT", True),
        ("STREAM_FAILED", False),  # its cause decides
        ("FOREACH_BATCH_USER_FUNCTION_ERROR", False),
        ("INTERNAL_ERROR", False),
        ("STREAMING_CHECKPOINT_MISSING_METADATA_FILE", False),  # 42K03, the engine's checkpoint
        ("STATE_STORE_INVALID_PROVIDER", False),
    ],
)
def test_the_table_sorts_conditions(condition: str, query: bool) -> None:
    assert is_query_fault(condition, state(condition)) is query


def test_every_installed_condition_follows_its_sqlstate_class_but_for_the_table() -> None:
    """Class 42 (syntax, analysis) and 22 (data exceptions) are the query's; internal errors
    (XX), I/O (58) and the rest are the engine's; the exceptions are the table's rows."""
    wrong = []
    for condition in conditions():
        code = state(condition)
        expected = code is not None and code[:2] in {"0A", "21", "22", "42", "54"}
        if condition in QUERY_CONDITIONS:
            expected = True
        elif condition in ENGINE_CONDITIONS | WRAPPER_CONDITIONS or condition.startswith(
            ENGINE_CONDITION_PREFIXES
        ):
            expected = False
        if is_query_fault(condition, code) is not expected:
            wrong.append(condition)
    assert wrong == []
    engine_42 = [
        c for c in conditions() if (state(c) or "")[:2] == "42" and not is_query_fault(c, state(c))
    ]
    about_state = ("STATE", "CHECKPOINT", "STDS_")  # STDS: the state data source
    assert all(any(w in c for w in about_state) for c in engine_42), engine_42


def test_no_internal_or_io_condition_is_the_query_s() -> None:
    for condition in conditions():
        code = state(condition) or ""
        if code[:2] in {"XX", "58"} and condition not in QUERY_CONDITIONS:
            assert not is_query_fault(condition, code), condition
