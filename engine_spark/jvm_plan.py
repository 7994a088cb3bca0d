"""Reading and rebuilding Spark's (JVM) logical plans from Python, through py4j.

Analyzed plans are Scala trees: nodes and expressions with ``children()``, ``nodeName()`` and
Scala ``Seq`` fields. These helpers walk them, compare them and put a changed subtree back.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession


def analyzed(df: DataFrame) -> Any:
    return df._jdf.queryExecution().analyzed()


def frame(session: SparkSession, plan: Any) -> DataFrame:
    """A DataFrame over an (analyzed) logical plan."""
    jvm = session.sparkContext._jvm
    assert jvm is not None
    return DataFrame(
        jvm.org.apache.spark.sql.classic.Dataset.ofRows(session._jsparkSession, plan), session
    )


def seq(jseq: Any) -> Iterator[Any]:
    for i in range(jseq.size()):
        yield jseq.apply(i)


def scala_seq(session: SparkSession, items: Sequence[Any]) -> Any:
    jvm = session.sparkContext._jvm
    assert jvm is not None
    values = jvm.java.util.ArrayList()
    for item in items:
        values.add(item)
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(values).toSeq()


def child(node: Any, i: int) -> Any:
    return node.children().apply(i)


def walk(root: Any) -> Iterator[Any]:
    """Every plan node, subquery and view bodies included."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(seq(node.children()))
        stack.extend(seq(node.subqueries()))


def path_to(root: Any, target: Any) -> list[Any] | None:
    """The nodes from ``root`` down to ``target`` (both included), following children only."""
    if same_node(root, target):
        return [root]
    for node in seq(root.children()):
        below = path_to(node, target)
        if below is not None:
            return [root, *below]
    return None


def replace_on_path(session: SparkSession, path: Sequence[Any], new: Any) -> Any:
    """The tree of ``path[0]`` with ``path[-1]`` replaced by ``new``."""
    for parent, old in zip(reversed(path[:-1]), reversed(path[1:]), strict=True):
        children = [new if same_node(c, old) else c for c in seq(parent.children())]
        new = parent.withNewChildren(scala_seq(session, children))
    return new


def same_node(a: Any, b: Any) -> bool:
    return bool(a.equals(b)) and str(a.nodeName()) == str(b.nodeName())


def unalias(expression: Any) -> Any:
    return expression.child() if str(expression.nodeName()) == "Alias" else expression


def conjuncts(condition: Any) -> Iterator[Any]:
    """The terms of a condition's top-level ``AND``s, left to right."""
    if str(condition.nodeName()) == "And":
        yield from conjuncts(condition.left())
        yield from conjuncts(condition.right())
    else:
        yield condition


def is_attribute(expression: Any) -> bool:
    return str(expression.nodeName()) == "AttributeReference"


def expr_id(expression: Any) -> Any:
    return expression.exprId().id()


def query_nodes(root: Any, views: frozenset[str]) -> Iterator[Any]:
    """The plan's nodes down to the temp views named in ``views`` (not inside them)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if str(node.nodeName()) == "View" and view_name(node) in views:
            continue
        stack.extend(seq(node.children()))
        stack.extend(seq(node.subqueries()))


def view_name(view: Any) -> str:
    """The name of a temp view's ``View`` node."""
    return str(view.desc().identifier().table())


def single_operator(root: Any, views: frozenset[str], allowed: frozenset[str], name: str) -> Any:
    """The plan's one node named ``name`` when every node down to the ``views`` is one of
    ``allowed`` and none has a subquery; None otherwise (also with none or several)."""
    found = []
    for node in query_nodes(root, views):
        kind = str(node.nodeName())
        if kind not in allowed or node.subqueries().size() > 0:
            return None
        if kind == name:
            found.append(node)
    return found[0] if len(found) == 1 else None
