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
        parsed = VETTED.get(id(jvm), policy, query)
        if parsed is None:
            with phase("parse"):
                parsed = _parse(jvm, jsession, parser, query)
            with phase("sandbox: parsed plan"):
                sandbox.vet_parsed(parsed)
            VETTED.put(id(jvm), policy, query, parsed)
        with phase("analysis"):
            jdf = jvm.org.apache.spark.sql.classic.Dataset.ofRows(jsession, parsed)
        with phase("sandbox: analyzed plan"):
            sandbox.vet_analyzed(jdf.queryExecution().analyzed())
        return DataFrame(jdf, session)


class VettedPlans:
    """Parsed plans that passed the sandbox's first walk, by policy and query text: a warm
    engine parses and vets a query it has seen before only once (``run_sql``).

    A parsed plan is a function of the text alone (the parser's settings are the engine's,
    the same for every request), and so is that walk's verdict, whatever the inputs are: a
    query seen again is analyzed from its vetted plan as it was (Spark's unresolved plans are
    immutable; analysis builds new ones). The analyzed plan is vetted on every request, since
    it depends on the inputs. Only accepted plans are kept (a refused query is refused again,
    with its reason, each time), the ``capacity`` most recently used ones.
    """

    def __init__(self, capacity: int = 256) -> None:
        self._capacity = capacity
        self._plans: OrderedDict[tuple[int, Policy, str], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, jvm: int, policy: Policy, query: str) -> Any | None:
        """The vetted plan of ``query`` in the JVM whose view's ``id`` is ``jvm``, if kept."""
        with self._lock:
            plan = self._plans.get((jvm, policy, query))
            if plan is not None:
                self._plans.move_to_end((jvm, policy, query))
            return plan

    def put(self, jvm: int, policy: Policy, query: str, plan: Any) -> None:
        with self._lock:
            self._plans[(jvm, policy, query)] = plan
            while len(self._plans) > self._capacity:
                self._plans.popitem(last=False)


VETTED = VettedPlans()
"""The engine process's vetted parsed plans (one JVM per process)."""


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
