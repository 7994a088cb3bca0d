"""The sandbox's pure parts: policy tables, verdicts and messages (no JVM)."""

from __future__ import annotations

import pytest

from engine_spark.errors import InvalidQueryError
from engine_spark.sandbox.expressions import ALLOWED_EXPRESSIONS, CLOCK_EXPRESSIONS
from engine_spark.sandbox.policy import (
    Policy,
    command_refusal,
    expression_refusal,
    function_refusal,
    is_tablesample_text,
    node_refusal,
    relation_refusal,
    short_class,
    table_function_refusal,
    typed_literal_parts,
)
from engine_spark.sandbox.rules import (
    ALLOWED_FUNCTIONS,
    ANALYZED_NODES,
    CLOCK_FUNCTIONS,
    PARSED_NODES,
    REFUSED_FUNCTIONS,
    REFUSED_NODES,
    TABLE_FUNCTIONS,
)

T, INTER = Policy.TRANSFORM, Policy.INTERACTIVE


def test_lists_are_disjoint_and_lower_case() -> None:
    assert not ALLOWED_FUNCTIONS & set(REFUSED_FUNCTIONS)
    assert not ALLOWED_FUNCTIONS & set(CLOCK_FUNCTIONS)
    assert not set(REFUSED_FUNCTIONS) & set(CLOCK_FUNCTIONS)
    assert not ALLOWED_EXPRESSIONS & CLOCK_EXPRESSIONS
    assert not (PARSED_NODES | ANALYZED_NODES) & set(REFUSED_NODES)
    for name in ALLOWED_FUNCTIONS | set(REFUSED_FUNCTIONS) | TABLE_FUNCTIONS:
        assert name == name.lower()


@pytest.mark.parametrize(
    "name",
    ["reflect", "java_method", "try_reflect", "input_file_name", "current_user", "version",
     "spark_partition_id", "xpath", "from_protobuf"],
)  # fmt: skip
def test_security_functions_are_refused_under_every_policy(name: str) -> None:
    for policy in Policy:
        refusal = function_refusal([name], policy)
        assert refusal is not None and refusal.startswith(f"function {name}() is not allowed")


@pytest.mark.parametrize(
    "name", ["rand", "uuid", "shuffle", "randn", "monotonically_increasing_id"]
)
def test_random_functions_are_refused_for_replay(name: str) -> None:
    for policy in Policy:
        refusal = function_refusal([name], policy)
        assert refusal is not None
        assert "replaying the transaction could give a different result" in refusal


@pytest.mark.parametrize("name", ["now", "current_timestamp", "current_date", "curdate"])
def test_clock_functions_only_interactively(name: str) -> None:
    refusal = function_refusal([name.upper()], T)
    assert refusal is not None and "depends on the wall clock" in refusal
    assert function_refusal([name], INTER) is None


@pytest.mark.parametrize("name", ["upper", "COUNT", "date_trunc", "explode", "row_number", "+"])
def test_allowed_functions(name: str) -> None:
    assert function_refusal([name], T) is None


def test_unknown_and_qualified_functions_are_refused() -> None:
    assert "not on the sandbox's allow-list" in (function_refusal(["my_udf"], INTER) or "")
    qualified = function_refusal(["system", "builtin", "upper"], INTER) or ""
    assert "system.builtin.upper() is not allowed" in qualified


def test_relations_are_single_part_names() -> None:
    assert relation_refusal(["nyc.flights"], T) is None
    assert "table global_temp.v is not allowed" in (relation_refusal(["global_temp", "v"], T) or "")
    assert "parquet.`/tmp/x`" in (relation_refusal(["parquet", "/tmp/x"], T) or "")


def test_table_functions() -> None:
    assert table_function_refusal(["range"], T) is None
    assert table_function_refusal(["read_files"], T) is not None
    assert table_function_refusal(["system", "range"], T) is not None


def test_plan_nodes() -> None:
    assert node_refusal("plans.logical.Project", T, analyzed=False) is None
    assert node_refusal("plans.logical.View", T, analyzed=True) is None
    assert node_refusal("plans.logical.View", T, analyzed=False) is not None
    script = node_refusal("plans.logical.ScriptTransformation", INTER, analyzed=False)
    assert script == (
        "ScriptTransformation (SELECT TRANSFORM ... USING) is not allowed: "
        "a query may only read its inputs"
    )
    assert node_refusal("plans.logical.Sample", T, analyzed=True) == (
        "TABLESAMPLE is not allowed: a transform may only query its inputs"
    )
    assert node_refusal("plans.logical.Sample", INTER, analyzed=True) is None
    future = node_refusal("plans.logical.SomethingNew", INTER, analyzed=True)
    assert future == "SomethingNew is not allowed: a query may only read its inputs"


def test_commands_name_the_construct() -> None:
    assert command_refusal("analysis.UnresolvedExecuteImmediate", T).startswith(
        "EXECUTE IMMEDIATE is not allowed: only queries"
    )
    assert command_refusal("execution.command.SetCommand", T).startswith("SetCommand is not")


def test_expressions() -> None:
    assert expression_refusal("expressions.Add", T) is None
    assert "CurrentTimestamp is not allowed in a transform" in (
        expression_refusal("expressions.CurrentTimestamp", T) or ""
    )
    assert expression_refusal("expressions.CurrentTimestamp", INTER) is None
    for refused in ("expressions.CallMethodViaReflection", "expressions.ScalaUDF"):
        assert expression_refusal(refused, INTER) is not None


def test_typed_literal_parts() -> None:
    assert typed_literal_parts("TIMESTAMP 'now'") == ("timestamp", " 'now'")
    assert typed_literal_parts("date/*x*/'today'") == ("date", "/*x*/'today'")
    assert typed_literal_parts("'now'") is None


def test_tablesample_origin() -> None:
    assert is_tablesample_text("tablesample (2 rows)")
    assert not is_tablesample_text("LIMIT 2")


def test_messages_name_the_step() -> None:
    assert str(InvalidQueryError("X is not allowed", step="s", in_step=True)) == (
        "query step 's': X is not allowed"
    )
    assert short_class("org.apache.spark.sql.catalyst.expressions.Add") == "expressions.Add"
