"""Running a transform's SQL steps: each aliased step becomes a temp view, one step is output.

Steps run in the order given; the single step without an alias is the output (kamu normalizes
``query`` into ``queries = [{query}]``). Every step goes through the SQL sandbox
(``sandbox/policy.py``) under the request's policy before Spark analyzes it: only queries over the
request's own views, nothing that runs commands, reads files or (in transforms) differs on
replay.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from common.odf.fragments import SqlQueryStep, TransformSql
from engine_spark.errors import InvalidQueryError
from engine_spark.inputs import register_view
from engine_spark.phases import phase
from engine_spark.sandbox import Policy, Sandbox
from engine_spark.spark_errors import query_errors

ENGINE_NAME = "spark"
"""The ``engine`` of the transforms this engine runs (``TransformSql.engine``)."""


def output_step(transform: TransformSql) -> SqlQueryStep:
    """The step without an alias; InvalidQuery unless there is exactly one, and unless the
    transform is written for this engine (Spark SQL run as another engine's would record
    results that engine may not give)."""
    if transform.engine.lower() != ENGINE_NAME:
        raise InvalidQueryError(
            f"the transform is written for engine {transform.engine!r}; this engine runs"
            f" {ENGINE_NAME!r} SQL only: run it on an engine for {transform.engine!r}"
        )
    steps = transform.steps()
    if not steps:
        raise InvalidQueryError("the transform has no query")
    outputs = [s for s in steps if s.alias is None]
    if len(outputs) != 1:
        raise InvalidQueryError(
            f"exactly one query step must have no alias (it is the output); found {len(outputs)}"
        )
    aliases = [s.alias for s in steps if s.alias is not None]
    duplicates = sorted({a for a in aliases if aliases.count(a) > 1})
    if duplicates:
        raise InvalidQueryError(f"query step alias {duplicates[0]!r} is used more than once")
    return outputs[0]


def run_steps(
    session: SparkSession, transform: TransformSql, policy: Policy = Policy.TRANSFORM
) -> DataFrame:
    """Register every aliased step as a view and return the output step's DataFrame."""
    output = output_step(transform)
    for step in transform.steps():
        if step.alias is not None:
            register_view(run_sql(session, step.query, step.alias, policy), step.alias)
    return run_sql(session, output.query, None, policy)


def run_sql(
    session: SparkSession, query: str, alias: str | None, policy: Policy = Policy.TRANSFORM
) -> DataFrame:
    """Parse, vet, analyze and vet again one query step (``sandbox/policy.py``).

    The vetted parsed plan itself is analyzed (no second parse of the text), so name and
    type errors surface here, and nothing runs before the parsed plan passed the sandbox.
    """
    with query_errors(alias):
        jsession: Any = session._jsparkSession
        jvm: Any = session.sparkContext._jvm
        parser = jsession.sessionState().sqlParser()
        sandbox = Sandbox(jvm, parser, policy, alias)
        key = (id(jvm), policy, query)
        parsed = VETTED.parsed(key)
        if parsed is None:
            with phase("parse"):
                parsed = _parse(jvm, jsession, parser, query)
            with phase("sandbox: parsed plan"):
                sandbox.vet_parsed(parsed)
            VETTED.keep(key, parsed)
        views = view_signature(jsession)
        with phase("analysis"):
            jdf = jvm.org.apache.spark.sql.classic.Dataset.ofRows(jsession, parsed)
        if not VETTED.analyzed_over(key, views):
            with phase("sandbox: analyzed plan"):
                sandbox.vet_analyzed(jdf.queryExecution().analyzed())
            VETTED.accept_over(key, views)
        return DataFrame(jdf, session)


ViewSignature = tuple[tuple[str, str, bool], ...]
"""The temp views a query can see: name, schema (JSON, with nullability and metadata) and
whether it is a stream, by name."""


def view_signature(jsession: Any) -> ViewSignature:
    """What the analyzed plan of a query text depends on in a request session: its temp
    views' names and schemas (the inputs' and earlier steps' views; the sandbox lets a query
    create no function, view or setting of its own)."""
    catalog = jsession.sessionState().catalog()
    names = catalog.getTempViewNames()
    views = []
    for i in range(names.size()):
        name = str(names.apply(i))
        view = catalog.getTempView(name).get()
        views.append((name, str(view.schema().json()), bool(view.isStreaming())))
    return tuple(sorted(views))


class VettedPlans:
    """The sandbox's verdicts on queries seen before: a warm engine parses and vets a query
    once, not on every request (``run_sql``).

    A parsed plan is a function of the text alone (the parser's settings are the engine's,
    the same for every request), and so is the first walk's verdict: a query seen again is
    analyzed from its vetted parsed plan as it was (Spark's unresolved plans are immutable;
    analysis builds new ones). The analyzed plan is a function of that plan and of the temp
    views it can see (``view_signature``; below a view the sandbox walks nothing: the engine
    made it), so its verdict is kept for those views. Only accepted plans are kept (a refused
    query is refused again, with its reason, each time), the ``capacity`` most recently used
    query texts, each with its last 8 sets of views.
    """

    def __init__(self, capacity: int = 256) -> None:
        self._capacity = capacity
        self._plans: OrderedDict[tuple[int, Policy, str], tuple[Any, list[ViewSignature]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def parsed(self, key: tuple[int, Policy, str]) -> Any | None:
        """The vetted parsed plan of (JVM view's ``id``, policy, query text), if kept."""
        with self._lock:
            found = self._plans.get(key)
            if found is None:
                return None
            self._plans.move_to_end(key)
            return found[0]

    def keep(self, key: tuple[int, Policy, str], plan: Any) -> None:
        with self._lock:
            self._plans[key] = (plan, [])
            while len(self._plans) > self._capacity:
                self._plans.popitem(last=False)

    def analyzed_over(self, key: tuple[int, Policy, str], views: ViewSignature) -> bool:
        """Whether the query's analyzed plan over ``views`` passed the sandbox before."""
        with self._lock:
            found = self._plans.get(key)
            return found is not None and views in found[1]

    def accept_over(self, key: tuple[int, Policy, str], views: ViewSignature) -> None:
        with self._lock:
            found = self._plans.get(key)
            if found is not None and views not in found[1]:
                found[1].append(views)
                del found[1][:-8]


VETTED = VettedPlans()
"""The engine process's verdicts (one JVM per process)."""


def _parse(jvm: Any, jsession: Any, parser: Any, query: str) -> Any:
    """Parse ``query`` with the request session active on this (JVM) thread.

    Spark's parser reads its settings (variable substitution among them) from the thread's
    active session, and a gRPC worker thread has none: it would fall back to a default
    configuration in which ``${env:VAR}`` is substituted. So the request session is made
    active for the parse, and the setting that matters is checked before the text is read.
    """
    spark_session = jvm.org.apache.spark.sql.SparkSession
    spark_session.setActiveSession(jsession)
    try:
        substitute = jvm.org.apache.spark.sql.internal.SQLConf.get().getConfString(
            "spark.sql.variable.substitute", "true"
        )
        if substitute != "false":
            raise RuntimeError("variable substitution is on in the parser's configuration")
        return parser.parsePlan(query)
    finally:
        spark_session.clearActiveSession()
