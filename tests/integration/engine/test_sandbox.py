"""The SQL sandbox through the real request path: hostile queries refused without side effects,
legitimate ones allowed, nothing surviving a request, and Spark's registry fully reviewed."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from common.engine_rpc import engine_pb2_grpc
from common.odf import engine_protocol as ep
from common.odf.fragments import TransformSql
from engine_spark.engine import SparkEngine
from engine_spark.errors import InvalidQueryError
from engine_spark.inputs import load_input, register_view
from engine_spark.queries import run_steps
from engine_spark.sandbox import Policy, Sandbox
from engine_spark.sandbox.expressions import ALLOWED_EXPRESSIONS, CLOCK_EXPRESSIONS
from engine_spark.sandbox.rules import ALLOWED_FUNCTIONS, CLOCK_FUNCTIONS, REFUSED_FUNCTIONS
from engine_spark.session import request_session
from engine_spark.staging import Staging
from tests.integration.engine import client, datasets
from tests.integration.engine.datasets import InputDataset, OutputDataset, at, sql

pytestmark = [pytest.mark.spark, pytest.mark.grpc]

SECRET_VAR = "ODF_TEST_SECRET"
SECRET = "s3cr3t-value-9d1f"
# Set at import (collection), before the shared JVM starts, so the JVM's environment has it.
os.environ.setdefault(SECRET_VAR, SECRET)

# Placeholders filled per test: {marker} a file a shell command would create, {victim} a
# directory an INSERT OVERWRITE DIRECTORY would replace.
TOUCH = "SELECT TRANSFORM(city) USING 'touch {marker}' AS (x) FROM cities"
Step = str | tuple[str, str]

HOSTILE: list[tuple[str, tuple[Step, ...], str]] = [
    # Script transformation (a shell command), in every place a query can hide one.
    ("script", (TOUCH,), "ScriptTransformation (SELECT TRANSFORM ... USING) is not allowed"),
    (
        "script-case-comments",
        ("select /* c */ transform (city)\n-- x\n using 'touch {marker}' as (x) from cities",),
        "ScriptTransformation",
    ),
    ("script-cte", (f"WITH t AS ({TOUCH}) SELECT event_time FROM cities, t",), "ScriptTransf"),
    ("script-from-subquery", (f"SELECT event_time FROM ({TOUCH}) s, cities",), "ScriptTransf"),
    (
        "script-scalar-subquery",
        (f"SELECT event_time, (SELECT max(x) FROM ({TOUCH})) AS y FROM cities",),
        "ScriptTransformation",
    ),
    (
        "script-in-subquery",
        (f"SELECT event_time FROM cities WHERE city IN ({TOUCH})",),
        "ScriptTransformation",
    ),
    (
        "script-exists",
        (f"SELECT event_time FROM cities WHERE EXISTS ({TOUCH})",),
        "ScriptTransformation",
    ),
    (
        "script-union-branch",
        (
            "SELECT event_time, city FROM cities "
            f"UNION ALL SELECT event_time, x FROM cities, ({TOUCH})",
        ),
        "ScriptTransformation",
    ),
    (
        "script-aliased-step",
        (("s", TOUCH), "SELECT event_time FROM cities, s"),
        "query step 's': ScriptTransformation",
    ),
    (
        "script-lateral-subquery",
        (f"SELECT event_time FROM cities, LATERAL ({TOUCH})",),
        "ScriptTransformation",
    ),
    # EXECUTE IMMEDIATE and commands.
    (
        "execute-immediate-insert-dir",
        ("EXECUTE IMMEDIATE 'INSERT OVERWRITE DIRECTORY ''{victim}'' USING csv SELECT 1'",),
        "EXECUTE IMMEDIATE is not allowed",
    ),
    (
        "execute-immediate-view-on-file",
        (
            'execute   immediate /* x */ "CREATE TEMPORARY VIEW v USING text '
            "OPTIONS (path '/etc/hostname')\"",
        ),
        "EXECUTE IMMEDIATE",
    ),
    ("execute-immediate-set", ("EXECUTE IMMEDIATE 'SET spark.sql.ansi.enabled=false'",), "EXECUTE"),
    (
        "execute-immediate-global-view",
        ("EXECUTE IMMEDIATE 'CREATE GLOBAL TEMPORARY VIEW g AS SELECT 1 AS a'",),
        "EXECUTE IMMEDIATE",
    ),
    (
        "execute-immediate-aliased-step",
        (("s", "EXECUTE IMMEDIATE 'SELECT 1 AS a'"), "SELECT event_time FROM cities"),
        "query step 's': EXECUTE IMMEDIATE",
    ),
    (
        "insert-overwrite-directory",
        ("INSERT OVERWRITE DIRECTORY '{victim}' USING csv SELECT city FROM cities",),
        "INSERT OVERWRITE DIRECTORY is not allowed",
    ),
    (
        "view-on-file",
        ("CREATE TEMPORARY VIEW v USING text OPTIONS (path '/etc/hostname')",),
        "only queries",
    ),
    ("global-view", ("CREATE GLOBAL TEMPORARY VIEW g AS SELECT * FROM cities",), "only queries"),
    ("create-table", ("CREATE TABLE t USING parquet AS SELECT * FROM cities",), "only queries"),
    ("set", ("SET spark.sql.ansi.enabled=false",), "only queries"),
    ("set-lower", ("set spark.sql.variable.substitute = true",), "only queries"),
    ("add-jar", ("ADD JAR /tmp/nothing.jar",), "only queries"),
    ("cache", ("CACHE TABLE cities",), "only queries"),
    ("use", ("USE global_temp",), "only queries"),
    ("create-function", ("CREATE TEMPORARY FUNCTION f AS 'java.lang.String'",), "only queries"),
    ("drop", (("s", "DROP VIEW cities"), "SELECT event_time FROM cities"), "query step 's'"),
    # Relations other than the request's views.
    ("global-temp", ("SELECT * FROM global_temp.g",), "table global_temp.g is not allowed"),
    ("catalog-table", ("SELECT * FROM spark_catalog.default.t",), "spark_catalog.default.t"),
    ("file-parquet", ("SELECT * FROM parquet.`/tmp`",), "table parquet.`/tmp` is not allowed"),
    (
        "file-text-join",
        ("SELECT c.event_time FROM cities c JOIN text.`/etc/hostname` h ON true",),
        "text.`/etc/hostname`",
    ),
    (
        "file-in-cte",
        ("WITH h AS (SELECT * FROM `text`.`/etc/passwd`) SELECT event_time FROM cities, h",),
        "is not allowed",
    ),
    ("identifier", ("SELECT * FROM IDENTIFIER('global_temp.g')",), "not allowed"),
    ("tvf-python", ("SELECT * FROM python_worker_logs()",), "table-valued function"),
    ("tvf-keywords", ("SELECT * FROM sql_keywords()",), "table-valued function sql_keywords()"),
    # Reflection and other refused functions.
    (
        "reflect",
        (f"SELECT event_time, reflect('java.lang.System', 'getenv', '{SECRET_VAR}') FROM cities",),
        "function reflect() is not allowed: it calls arbitrary Java methods",
    ),
    (
        "reflect-upper-cte",
        (
            "WITH x AS (SELECT REFLECT('java.lang.System', 'getProperty', 'user.home') AS h) "
            "SELECT event_time FROM cities, x",
        ),
        "function reflect()",
    ),
    (
        "java-method-lateral-view",
        (
            "SELECT event_time, v FROM cities LATERAL VIEW explode(array(java_method("
            "'java.lang.System', 'getenv', 'HOME'))) t AS v",
        ),
        "function java_method()",
    ),
    (
        "try-reflect-lambda",
        (
            "SELECT event_time, filter(array(city), c -> try_reflect('java.lang.System', "
            "'getenv', c) IS NULL) AS f FROM cities",
        ),
        "function try_reflect()",
    ),
    (
        "qualified-function",
        (
            "SELECT event_time, system.builtin.reflect('java.lang.System', 'lineSeparator') "
            "FROM cities",
        ),
        "only built-in functions",
    ),
    ("xpath", ("SELECT event_time, xpath_string('<a>b</a>', 'a') FROM cities",), "xpath_string()"),
    ("current-user", ("SELECT event_time, current_user() FROM cities",), "current_user()"),
    ("input-file-name", ("SELECT event_time, input_file_name() FROM cities",), "input_file_name"),
    # Non-determinism (transforms).
    ("rand", ("SELECT event_time, rand() FROM cities",), "function rand() is not allowed"),
    ("uuid-in-where", ("SELECT event_time FROM cities WHERE uuid() > ''",), "function uuid()"),
    ("shuffle", ("SELECT event_time, shuffle(array(1, 2)) FROM cities",), "function shuffle()"),
    ("partition-id", ("SELECT event_time, spark_partition_id() FROM cities",), "spark_partition"),
    (
        "monotonic-id",
        ("SELECT event_time, monotonically_increasing_id() FROM cities",),
        "monotonically_increasing_id",
    ),
    ("now", ("SELECT event_time, now() FROM cities",), "function now() is not allowed"),
    ("current-date-bare", ("SELECT event_time, current_date FROM cities",), "CurrentDate"),
    (
        "current-timestamp-bare-subquery",
        ("SELECT event_time FROM cities WHERE event_time < (SELECT CURRENT_TIMESTAMP)",),
        "CurrentTimestamp",
    ),
    ("unix-timestamp-no-args", ("SELECT event_time, unix_timestamp() FROM cities",), "Current"),
    ("timestamp-now", ("SELECT TIMESTAMP 'now' AS event_time",), "special datetime value 'now'"),
    ("date-today", ("SELECT DATE 'today' AS event_time",), "'today'"),
    ("date-comment-yesterday", ("SELECT date /* c */ ' Yesterday' AS event_time",), "'Yesterday'"),
    ("timestamp-ntz-tomorrow", ('SELECT timestamp_ntz"tomorrow" AS event_time',), "tomorrow"),
    ("cast-now", ("SELECT CAST('now' AS TIMESTAMP) AS event_time",), "special datetime value"),
    ("cast-folded-now", ("SELECT CAST(concat('n', 'ow') AS TIMESTAMP) AS event_time",), "'now'"),
    (
        "implicit-now",
        ("SELECT event_time FROM cities WHERE event_time > 'now'",),
        "special datetime value 'now'",
    ),
    ("to-date-today", ("SELECT to_date('today') AS event_time",), "special datetime value"),
    # Spelled as Spark reads it (its converters trim control characters too).
    ("control-padded-now", ("SELECT CAST('\u0001now' AS TIMESTAMP) AS event_time",), "now"),
    ("char1-concat-now", ("SELECT CAST(concat(char(1), 'now') AS TIMESTAMP) AS e",), "now"),
    ("chr-today-concat", ("SELECT CAST(chr(31) || 'TODAY' || chr(9) AS DATE) AS e",), "TODAY"),
    ("typed-padded", ("SELECT TIMESTAMP '\u0010now' AS event_time",), "special datetime"),
    (
        "implicit-padded-yesterday",
        ("SELECT event_time FROM cities WHERE event_time > concat(' \u0002', 'yesterday UTC')",),
        "yesterday",
    ),
    # Order-dependent aggregates (transforms).
    ("first", ("SELECT max(event_time) AS e, first(city) FROM cities",), "aggregate First"),
    ("last-ignore-nulls", ("SELECT max(event_time) AS e, last(city, true) FROM cities",), "Last"),
    ("any-value", ("SELECT max(event_time) AS e, any_value(city) FROM cities",), "AnyValue"),
    ("collect-list", ("SELECT max(event_time) AS e, collect_list(city) FROM cities",), "Collect"),
    ("array-agg", ("SELECT max(event_time) AS e, array_agg(city) FROM cities",), "CollectList"),
    ("collect-set", ("SELECT max(event_time) AS e, collect_set(city) FROM cities",), "CollectSet"),
    ("listagg", ("SELECT max(event_time) AS e, listagg(city, ',') FROM cities",), "ListAgg"),
    ("string-agg", ("SELECT max(event_time) AS e, string_agg(city, ',') FROM cities",), "ListAgg"),
    (
        "collect-list-in-concat",
        ("SELECT max(event_time) AS e, concat_ws(',', collect_list(city)) FROM cities",),
        "CollectList",
    ),
    ("tablesample-percent", ("SELECT * FROM cities TABLESAMPLE (50 PERCENT)",), "TABLESAMPLE"),
    ("tablesample-rows", ("SELECT event_time FROM cities tablesample ( 2 rows )",), "TABLESAMPLE"),
    (
        "tablesample-bucket-cte",
        ("WITH s AS (SELECT * FROM cities TABLESAMPLE (BUCKET 1 OUT OF 2)) SELECT * FROM s",),
        "TABLESAMPLE",
    ),
]

LEGITIMATE: list[tuple[str, tuple[Step, ...]]] = [
    (
        "order-erased-aggregates",
        (
            "SELECT max(event_time) AS event_time, array_sort(collect_list(city)) AS l, "
            "size(collect_set(city)) AS n, sort_array(array_agg(population)) AS p, "
            "CAST('epoch' AS TIMESTAMP) AS e, CAST('nowhere-' AS STRING) AS s FROM cities",
        ),
    ),
    ("projection", ("SELECT event_time, upper(city) AS c, population * 2 AS p FROM cities",)),
    ("dotted-input-name", ("SELECT event_time FROM `cities`",)),
    (
        "window",
        (
            "SELECT event_time, city, sum(population) OVER (PARTITION BY city ORDER BY event_time "
            "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running, "
            "row_number() OVER w AS n, lag(population) OVER w AS prev "
            "FROM cities WINDOW w AS (PARTITION BY city ORDER BY event_time)",
        ),
    ),
    (
        "join-steps",
        (
            ("big", "SELECT event_time, city FROM cities WHERE population > 5"),
            "SELECT c.event_time, c.city FROM cities c LEFT JOIN big b ON b.city = c.city",
        ),
    ),
    (
        "cte-aggregate",
        (
            "WITH t AS (SELECT date_trunc('HOUR', event_time) AS h, population FROM cities) "
            "SELECT h AS event_time, count(*) AS n, avg(population) AS a FROM t GROUP BY h",
        ),
    ),
    (
        "explode-lateral-view",
        (
            "SELECT event_time, part FROM cities "
            "LATERAL VIEW OUTER explode(split(city, '')) p AS part",
        ),
    ),
    (
        "pivot",
        (
            "SELECT * FROM (SELECT event_time, city, population FROM cities) "
            "PIVOT (sum(population) FOR city IN ('A' AS a, 'B' AS b))",
        ),
    ),
    (
        "unpivot",
        (
            "SELECT * FROM (SELECT event_time, population AS p, population * 2 AS q FROM cities) "
            "UNPIVOT (v FOR k IN (p, q))",
        ),
    ),
    (
        "values",
        (
            "SELECT TIMESTAMP '2020-01-01 00:00:00' AS event_time, * "
            "FROM VALUES (1, 'a'), (2, 'b') AS t(n, s)",
        ),
    ),
    ("range", ("SELECT DATE '2020-01-01' + CAST(id AS INT) AS event_time FROM range(3)",)),
    (
        "date-functions",
        (
            "SELECT event_time, date_add(to_date(event_time), 1) AS d, "
            "datediff(DATE '2020-01-02', DATE '2020-01-01') AS dd, "
            "to_date(from_utc_timestamp(event_time, 'America/New_York')) AS ny, "
            "unix_timestamp(event_time) AS u, date_format(event_time, 'yyyy-MM') AS m, "
            "event_time > '2020-01-01' AS after, CAST('2020-01-01' AS DATE) AS c, "
            "TIMESTAMP 'epoch' AS e FROM cities",
        ),
    ),
    (
        "subqueries",
        (
            "SELECT event_time FROM cities c WHERE population > (SELECT avg(population) FROM "
            "cities) AND city IN (SELECT city FROM cities) AND EXISTS (SELECT 1 FROM cities d "
            "WHERE d.city = c.city)",
        ),
    ),
    (
        "set-operations",
        (
            "SELECT event_time, city FROM cities UNION SELECT event_time, city FROM cities "
            "EXCEPT SELECT event_time, 'x' FROM cities",
        ),
    ),
    (
        "case-lambda-struct",
        (
            "SELECT event_time, CASE WHEN population > 1 THEN 'big' ELSE 'small' END AS size, "
            "transform(array(population), x -> x + 1) AS xs, named_struct('c', city).c AS c, "
            "coalesce(city, '') || '!' AS bang, try_cast(city AS INT) AS n FROM cities",
        ),
    ),
    (
        "having",
        (
            "SELECT max(event_time) AS event_time, city FROM cities GROUP BY city "
            "HAVING count(*) > 0 AND sum(population) > 1",
        ),
    ),
    (
        "grouping-sets",
        (
            "SELECT max(event_time) AS event_time, city, count(*) AS n FROM cities "
            "GROUP BY ROLLUP (city)",
        ),
    ),
    (
        "distinct-limit-hint",
        (
            "SELECT /*+ REPARTITION(2) */ DISTINCT event_time, city FROM cities "
            "ORDER BY city LIMIT 5",
        ),
    ),
    (
        "secret-literal-is-text",
        ("SELECT event_time, '${env:" + SECRET_VAR + "}' AS s FROM cities",),
    ),
    (
        "table-functions",
        ("SELECT TIMESTAMP '2020-01-01 00:00:00' AS event_time, * FROM stack(2, 1, 2)",),
    ),
]


@pytest.fixture
def cities(workdir: Path) -> ep.TransformRequestInput:
    src = InputDataset(workdir / "in", "cities", datasets.CITIES)
    src.append(
        [
            {"event_time": at(0), "city": "A", "population": 10},
            {"event_time": at(1), "city": "B", "population": 3},
        ],
        watermark=at(1),
    )
    return src.take()


@pytest.fixture
def victim(workdir: Path) -> Iterator[Path]:
    directory = workdir / "victim"
    directory.mkdir()
    (directory / "keep.txt").write_text("precious")
    yield directory
    assert sorted(p.name for p in directory.iterdir()) == ["keep.txt"]
    assert (directory / "keep.txt").read_text() == "precious"


def _fill(steps: tuple[Step, ...], marker: Path, victim: Path) -> TransformSql:
    def fill(query: str) -> str:
        return query.replace("{marker}", str(marker)).replace("{victim}", str(victim))

    return sql(*[(s[0], fill(s[1])) if isinstance(s, tuple) else fill(s) for s in steps])


def _no_leftovers(engine: SparkEngine) -> None:
    """Nothing a request could create is visible to the next one."""
    session = engine.session
    assert [t.name for t in session.catalog.listTables()] == []
    assert [t.name for t in session.catalog.listTables("global_temp")] == []
    assert [d.name for d in session.catalog.listDatabases()] == ["default"]
    assert session.conf.get("spark.sql.ansi.enabled") == "true"


@pytest.mark.parametrize(("steps", "message"), [pytest.param(s, m, id=i) for i, s, m in HOSTILE])
def test_hostile_query_is_refused_by_validate_query(
    spark_engine: SparkEngine, workdir: Path, victim: Path, steps: tuple[Step, ...], message: str
) -> None:
    marker = workdir / "marker"
    transform = _fill(steps, marker, victim)
    with pytest.raises(InvalidQueryError) as raised:
        spark_engine.validate_query(datasets.validate_request(transform))
    assert message in str(raised.value)
    assert SECRET not in str(raised.value)
    assert not marker.exists()
    _no_leftovers(spark_engine)


@pytest.mark.parametrize(("steps", "message"), [pytest.param(s, m, id=i) for i, s, m in HOSTILE])
def test_hostile_query_is_refused_by_execute_transform(
    engine_stub: engine_pb2_grpc.EngineStub,
    spark_engine: SparkEngine,
    workdir: Path,
    victim: Path,
    cities: ep.TransformRequestInput,
    steps: tuple[Step, ...],
    message: str,
) -> None:
    marker = workdir / "marker"
    request = OutputDataset(workdir / "out", "bad", _fill(steps, marker, victim)).request([cities])
    response = client.transform(engine_stub, request)
    assert isinstance(response, ep.TransformResponseInvalidQuery), response
    assert message in response.message
    assert SECRET not in response.message
    assert not marker.exists()
    assert not Path(request.new_data_path).exists()
    _no_leftovers(spark_engine)


@pytest.mark.parametrize("steps", [pytest.param(s, id=i) for i, s in LEGITIMATE])
def test_legitimate_query_runs(
    spark_engine: SparkEngine, cities: ep.TransformRequestInput, steps: tuple[Step, ...]
) -> None:
    """The sandbox (transform policy) lets the query run over the input's slice. Whether a
    transform may use it across transactions is ``stateful/plan.py``'s call (test_stateful.py)."""
    session = request_session(spark_engine.session)
    register_view(load_input(session, cities, Staging.OFF), "cities")
    rows = run_steps(session, sql(*steps)).toArrow().to_pylist()
    assert SECRET not in repr(rows)


def _interactive(engine: SparkEngine, workdir: Path, query: str) -> pa.Table:
    data = workdir / "cities.arrow"
    table = pa.table({"city": ["A", "B"], "population": [10, 3]})
    with pa.OSFile(str(data), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    output = workdir / "result.arrow"
    request = ep.QueryRequest(
        inputs=(ep.QueryInput(alias="cities", data_paths=(str(data),)),),
        transform=sql(query),
        output_data_path=str(output),
    )
    engine.execute_query(request)
    with pa.memory_map(str(output)) as source:
        return ipc.open_file(source).read_all()


def test_interactive_queries_may_read_the_clock_but_nothing_else(
    spark_engine: SparkEngine, workdir: Path
) -> None:
    table = _interactive(
        spark_engine,
        workdir,
        "SELECT city, now() AS t, current_date AS d, TIMESTAMP 'now' AS n, "
        "CAST(concat(char(1), 'now') AS TIMESTAMP) AS padded, "
        "'${env:" + SECRET_VAR + "}' AS s FROM cities TABLESAMPLE (100 PERCENT)",
    )
    assert table.num_rows == 2
    ordered = _interactive(  # an ad-hoc query may depend on row order: it is not replayed
        spark_engine, workdir, "SELECT first(city) AS f, collect_list(city) AS l FROM cities"
    )
    assert ordered.num_rows == 1
    assert table.column("s").to_pylist() == ["${env:" + SECRET_VAR + "}"] * 2
    for query, message in [
        ("SELECT reflect('java.lang.System', 'getenv', 'HOME') FROM cities", "reflect()"),
        ("SELECT current_user() FROM cities", "current_user()"),
        ("SELECT input_file_name() FROM cities", "input_file_name()"),
        ("SELECT * FROM text.`/etc/hostname`", "is not allowed"),
        ("EXECUTE IMMEDIATE 'SELECT 1'", "EXECUTE IMMEDIATE"),
        ("SELECT TRANSFORM(city) USING 'cat' AS (x) FROM cities", "ScriptTransformation"),
    ]:
        with pytest.raises(InvalidQueryError, match=re.escape(message)):
            _interactive(spark_engine, workdir, query)


def test_views_of_a_request_do_not_survive_it(spark_engine: SparkEngine, workdir: Path) -> None:
    _interactive(spark_engine, workdir, "SELECT city FROM cities")
    with pytest.raises(InvalidQueryError, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark_engine.validate_query(datasets.validate_request(sql("SELECT * FROM s")))
    transform = sql(("s", "SELECT * FROM cities"), "SELECT event_time FROM s")
    spark_engine.validate_query(datasets.validate_request(transform))
    with pytest.raises(InvalidQueryError, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark_engine.validate_query(datasets.validate_request(sql("SELECT event_time FROM s")))
    _no_leftovers(spark_engine)


def test_every_registry_function_is_reviewed(spark_engine: SparkEngine) -> None:
    """A Spark upgrade that adds functions fails here, listing them (they are refused
    meanwhile): add each to ALLOWED_FUNCTIONS or REFUSED_FUNCTIONS with a reason."""
    unreviewed = sorted(
        set(_registry(spark_engine))
        - ALLOWED_FUNCTIONS
        - set(REFUSED_FUNCTIONS)
        - set(CLOCK_FUNCTIONS)
    )
    assert unreviewed == []
    overlap = ALLOWED_FUNCTIONS & (set(REFUSED_FUNCTIONS) | set(CLOCK_FUNCTIONS))
    assert overlap == set()


def test_examples_of_allowed_functions_pass_the_sandbox(spark_engine: SparkEngine) -> None:
    """Spark's documented example of every allowed function analyzes into allowed classes (a
    Spark upgrade that changes the classes behind a function shows here)."""
    session = spark_engine.session.newSession()
    jsession: Any = session._jsparkSession
    jvm: Any = session.sparkContext._jvm
    parser = jsession.sessionState().sqlParser()
    refused: dict[str, str] = {}
    for name, examples in _registry(spark_engine).items():
        if name not in ALLOWED_FUNCTIONS and name not in CLOCK_FUNCTIONS:
            continue
        for example in re.findall(r">\s*(SELECT .*?);\s*$", examples, re.S | re.M):
            sandbox = Sandbox(jvm, parser, Policy.INTERACTIVE, name)
            try:
                parsed = parser.parsePlan(" ".join(example.split()))
                sandbox.vet_parsed(parsed)
                jdf = jvm.org.apache.spark.sql.classic.Dataset.ofRows(jsession, parsed)
                sandbox.vet_analyzed(jdf.queryExecution().analyzed())
            except InvalidQueryError as exc:
                refused[name] = str(exc)
            except Exception:  # examples Spark itself cannot run (the TIME type...)
                continue
    assert refused == {}


def test_listed_classes_exist(spark_engine: SparkEngine) -> None:
    """Every class in the allow-lists is a class of this Spark (no typos, no dead entries)."""
    jvm: Any = spark_engine.session.sparkContext._jvm
    missing = []
    for name in sorted(ALLOWED_EXPRESSIONS | CLOCK_EXPRESSIONS):
        try:
            jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst." + name)
        except Exception:
            missing.append(name)
    assert missing == []


def _registry(engine: SparkEngine) -> dict[str, str]:
    """Spark's builtin function registry: name -> documented examples."""
    jsession: Any = engine.session._jsparkSession
    registry = jsession.sessionState().functionRegistry()
    functions = registry.listFunction()
    result = {}
    for i in range(functions.size()):
        identifier = functions.apply(i)
        info = registry.lookupFunction(identifier).get()
        result[str(identifier.funcName())] = str(info.getExamples() or "")
    return result


def test_the_engine_jvm_sees_the_secret(spark_engine: SparkEngine) -> None:
    """So the hostile queries above had something to leak."""
    jvm: Any = spark_engine.session.sparkContext._jvm
    assert jvm.java.lang.System.getenv(SECRET_VAR) == SECRET


def test_variables_stay_text_on_a_thread_without_an_active_session(
    spark_engine: SparkEngine,
) -> None:
    """A gRPC worker thread has no active Spark session; the parser must still read the
    request session's settings (found through a real engine server process, where
    ``${env:VAR}`` was substituted). A JVM system property stands for the secret: the JVM's
    environment is fixed when it starts."""
    import threading

    from engine_spark.queries import run_sql
    from engine_spark.session import request_session

    jvm: Any = spark_engine.session.sparkContext._jvm
    jvm.java.lang.System.setProperty("odf.thread.secret", "leaked")
    rows: list[Any] = []

    def query() -> None:
        jvm.org.apache.spark.sql.SparkSession.clearActiveSession()
        session = request_session(spark_engine.session)
        rows.extend(run_sql(session, "SELECT '${system:odf.thread.secret}' AS s", None).collect())

    thread = threading.Thread(target=query)
    thread.start()
    thread.join()
    assert [r.s for r in rows] == ["${system:odf.thread.secret}"]


ALLOWED_BUT_HOSTILE = [
    (
        "catastrophic-rlike",
        "SELECT event_time, concat(repeat('a', 50000), city) rlike '(a|aa)*b' AS r FROM cities",
        "StackOverflowError",
    ),
    (
        "catastrophic-regexp-replace",
        "SELECT event_time, regexp_replace(concat(repeat('a', 50000), city), '(a|aa)*c', '') AS r "
        "FROM cities",
        "StackOverflowError",
    ),
    (
        "nested-parentheses",
        "SELECT event_time, " + "(" * 3000 + "population" + ")" * 3000 + " AS p FROM cities",
        "",
    ),
    (
        "nested-calls",
        "SELECT event_time, " + "abs(" * 3000 + "population" + ")" * 3000 + " AS p FROM cities",
        "",
    ),
    (
        "huge-sequence",
        "SELECT event_time, size(sequence(1L, 10000000000L + population)) AS n FROM cities",
        "COLLECTION_SIZE_LIMIT_EXCEEDED",
    ),
]


def _jvm_pid(engine: SparkEngine) -> int:
    return int(engine.session._jvm.java.lang.ProcessHandle.current().pid())


@pytest.mark.parametrize(
    ("query", "message"), [pytest.param(q, m, id=i) for i, q, m in ALLOWED_BUT_HOSTILE]
)
def test_a_hostile_but_allowed_query_fails_alone_and_the_engine_answers_the_next(
    engine_stub: engine_pb2_grpc.EngineStub,
    spark_engine: SparkEngine,
    workdir: Path,
    cities: ep.TransformRequestInput,
    query: str,
    message: str,
) -> None:
    pid = _jvm_pid(spark_engine)
    request = OutputDataset(workdir / "out", "hostile", sql(query)).request([cities])
    response = client.transform(engine_stub, request)
    assert isinstance(response, ep.TransformResponseInvalidQuery), response
    assert message in response.message
    with pytest.raises(InvalidQueryError, match=message or "."):
        _interactive(spark_engine, workdir, query.replace("event_time, ", "", 1))
    assert _jvm_pid(spark_engine) == pid  # the same JVM, still up
    assert _interactive(spark_engine, workdir, "SELECT count(*) AS n FROM cities").num_rows == 1
