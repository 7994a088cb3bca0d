"""The SQL sandbox: an allow-list decided on Spark's own plans, never on the query text.

Every query step is parsed by Spark, and the parsed plan is vetted before anything is
analyzed (analysis of ``EXECUTE IMMEDIATE`` or a command would already act). Then the vetted
plan itself is analyzed and the analyzed plan is vetted again. Both walks accept only what
``rules.py`` lists: relational plan nodes, single-part relation names (the request's own
views and CTEs), allowed table-valued functions, allowed function names and expression
classes. Under ``Policy.TRANSFORM`` they also refuse whatever would make a replay differ:
non-deterministic expressions, clock functions, special datetime strings (``'now'``,
``'today'``...) and ``TABLESAMPLE``. Anything else is an ``InvalidQueryError`` naming the
construct and the step.

The pure helpers (verdicts, messages) are tested without a JVM; ``vet_parsed`` and
``vet_analyzed`` walk JVM plans through py4j.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from enum import Enum
from typing import Any

from engine_spark.errors import InvalidQueryError
from engine_spark.sandbox.expressions import ALLOWED_EXPRESSIONS, CLOCK_EXPRESSIONS
from engine_spark.sandbox.rules import (
    ALLOWED_FUNCTIONS,
    ANALYZED_NODES,
    CLOCK_FUNCTIONS,
    NONDETERMINISTIC_REASONS,
    PARSED_NODES,
    REFUSED_FUNCTIONS,
    REFUSED_NODES,
    SAMPLING_NODES,
    TABLE_FUNCTIONS,
)

_CATALYST = "org.apache.spark.sql.catalyst."
_TRAIT_CACHE: dict[tuple[str, str], bool] = {}

ORDER_DEPENDENT_AGGREGATES = frozenset(
    f"expressions.aggregate.{name}"
    for name in ("First", "Last", "AnyValue", "CollectList", "CollectSet", "ListAgg")
)
"""Aggregates whose result depends on the order rows arrive in (``first``, ``last``,
``any_value``, ``collect_list``/``array_agg``, ``collect_set``, ``listagg``/``string_agg``):
refused in transforms unless an order-erasing function takes their result."""
ORDER_ERASING = frozenset(
    f"expressions.{name}" for name in ("ArraySort", "SortArray", "Size", "ArrayMax", "ArrayMin")
)
"""Functions whose result does not depend on the order of the array they take."""
"""Strings Spark turns into the current date or time when cast to a date or timestamp
(``epoch`` is a fixed instant and stays allowed)."""

_DATETIME_TYPES = frozenset({"date", "timestamp", "timestamp_ntz", "timestamp_ltz", "time"})
_TYPED_LITERAL = re.compile(r"^\s*([A-Za-z_]+)(.*)$", re.DOTALL)
_TABLESAMPLE = re.compile(r"^\s*TABLESAMPLE\b", re.IGNORECASE)


class Policy(Enum):
    """What a query may do besides reading its inputs."""

    TRANSFORM = "transform"
    """Transforms, raw queries, validation, migration: replays must give the same result."""
    INTERACTIVE = "interactive"
    """``odf sql``: may also read the clock, draw random numbers and sample."""

    @property
    def reproducible(self) -> bool:
        return self is Policy.TRANSFORM

    @property
    def purpose(self) -> str:
        if self is Policy.TRANSFORM:
            return "a transform may only query its inputs"
        return "a query may only read its inputs"


def short_class(name: str) -> str:
    """A JVM class name as ``rules.py`` spells it (relative to the catalyst package)."""
    return name.removeprefix(_CATALYST)


def function_refusal(name_parts: Sequence[str], policy: Policy) -> str | None:
    """Why a function call is refused, or ``None`` when ``policy`` allows it."""
    name = ".".join(name_parts).lower()
    if len(name_parts) != 1:
        return f"function {name}() is not allowed: only built-in functions may be called"
    reason = REFUSED_FUNCTIONS.get(name)
    if reason is None and policy.reproducible:
        reason = CLOCK_FUNCTIONS.get(name)
    if reason is not None:
        if reason in NONDETERMINISTIC_REASONS:
            return (
                f"function {name}() is not allowed in a transform: it {reason}, so replaying "
                "the transaction could give a different result"
            )
        return f"function {name}() is not allowed: it {reason}; {policy.purpose}"
    if name in ALLOWED_FUNCTIONS or name in CLOCK_FUNCTIONS:
        return None
    return f"function {name}() is unknown or not allowed: it is not on the sandbox's allow-list"


def table_function_refusal(name_parts: Sequence[str], policy: Policy) -> str | None:
    name = ".".join(name_parts).lower()
    if len(name_parts) == 1 and name in TABLE_FUNCTIONS:
        return None
    return f"table-valued function {name}() is not allowed: {policy.purpose}"


def relation_refusal(name_parts: Sequence[str], policy: Policy) -> str | None:
    """Only single-part names: the request's input views, earlier steps and CTEs."""
    if len(name_parts) == 1:
        return None
    name = ".".join(f"`{p}`" if not p.isidentifier() else p for p in name_parts)
    quoted = "`" + ".".join(name_parts).replace("`", "``") + "`"
    return (
        f"table {name} is not allowed: {policy.purpose} (its inputs, earlier steps and CTEs, "
        f"by single-part names; quote a dataset name that contains dots with backticks: "
        f"{quoted})"
    )


def node_refusal(name: str, policy: Policy, *, analyzed: bool) -> str | None:
    """Why a plan node (``short_class`` name) is refused, or ``None``."""
    if name in SAMPLING_NODES and not policy.reproducible:
        return None
    if name in REFUSED_NODES:
        return f"{REFUSED_NODES[name]} is not allowed: {policy.purpose}"
    if name in (ANALYZED_NODES if analyzed else PARSED_NODES):
        return None
    return f"{_simple(name)} is not allowed: {policy.purpose}"


def command_refusal(name: str, policy: Policy) -> str:
    label = REFUSED_NODES.get(name, _simple(name))
    return f"{label} is not allowed: only queries (SELECT ...) may run; {policy.purpose}"


def expression_refusal(name: str, policy: Policy) -> str | None:
    """Why an expression class (``short_class`` name) is refused, or ``None``."""
    if name in CLOCK_EXPRESSIONS:
        if policy.reproducible:
            return (
                f"{_simple(name)} is not allowed in a transform: it depends on the wall clock, "
                "so replaying the transaction could give a different result"
            )
        return None
    if name in ALLOWED_EXPRESSIONS:
        return None
    return f"expression {_simple(name)} is not allowed: {policy.purpose}"


def nondeterministic_refusal(name: str) -> str:
    return (
        f"non-deterministic expression {_simple(name)} is not allowed in a transform: "
        "replaying the transaction could give a different result"
    )


def order_dependent_refusal(name: str) -> str:
    return (
        f"aggregate {_simple(name)} is not allowed in a transform: its result depends on the"
        " order rows arrive in, so replaying the transaction could give a different result;"
        " make it order-independent (array_sort(collect_list(x)), size(collect_set(x)),"
        " max(x) or max_by(x, y) over a unique y)"
    )


def special_datetime_refusal(text: str) -> str:
    return (
        f"the special datetime value {text.strip()!r} is not allowed in a transform: it means "
        "the current date or time, so replaying the transaction could give a different result"
    )


def typed_literal_parts(origin_text: str) -> tuple[str, str] | None:
    """``("timestamp", " 'now'")`` for ``TIMESTAMP 'now'``: the type keyword and the rest."""
    match = _TYPED_LITERAL.match(origin_text)
    if match is None:
        return None
    return match.group(1).lower(), match.group(2)


def is_tablesample_text(origin_text: str) -> bool:
    return bool(_TABLESAMPLE.match(origin_text))


def _simple(name: str) -> str:
    return name.rsplit(".", 1)[-1].rstrip("$")


# --- Walking JVM plans ---------------------------------------------------------------------


def _seq(jseq: Any) -> Iterator[Any]:
    """The items of an (immutable) Scala ``Seq``: one py4j round trip for its size and one
    per item (an iterator takes two per item and two more for an empty one)."""
    for i in range(jseq.size()):
        yield jseq.apply(i)


class Sandbox:
    """Vets one query step's parsed and analyzed plans under ``policy``."""

    def __init__(self, jvm: Any, parser: Any, policy: Policy, step: str | None) -> None:
        self._jvm = jvm
        self._parser = parser
        self._policy = policy
        self._step = step
        self._seen = jvm.java.util.IdentityHashMap()
        self._traits: dict[str, Any] = {}

    def refuse(self, message: str) -> InvalidQueryError:
        return InvalidQueryError(message, step=self._step, in_step=True)

    def _is(self, obj: Any, trait: str, name: str | None = None) -> bool:
        """``obj`` (of class ``name``, when known) implements the catalyst ``trait``; cached
        per class (one JVM per process)."""
        if name is None:
            name = short_class(str(obj.getClass().getName()))
        key = (name, trait)
        known = _TRAIT_CACHE.get(key)
        if known is None:
            jtrait = self._traits.get(trait)
            if jtrait is None:
                jtrait = self._traits[trait] = self._jvm.java.lang.Class.forName(_CATALYST + trait)
            known = _TRAIT_CACHE[key] = bool(jtrait.isAssignableFrom(obj.getClass()))
        return known

    def _first_visit(self, node: Any) -> bool:
        return self._seen.put(node, True) is None

    # --- parsed plan ---

    def vet_parsed(self, plan: Any) -> None:
        if not self._first_visit(plan):
            return
        name = short_class(str(plan.getClass().getName()))
        if self._is(plan, "plans.logical.Command", name):
            raise self.refuse(command_refusal(name, self._policy))
        # The parser turns ``TABLESAMPLE (n ROWS)`` into a limit: its origin tells.
        if (
            name in ("plans.logical.GlobalLimit", "plans.logical.LocalLimit")
            and self._policy.reproducible
            and is_tablesample_text(_origin_text(plan) or "")
        ):
            raise self.refuse(f"TABLESAMPLE is not allowed: {self._policy.purpose}")
        refusal = node_refusal(name, self._policy, analyzed=False)
        if refusal is None and name == "analysis.UnresolvedRelation":
            refusal = relation_refusal(_strings(plan.multipartIdentifier()), self._policy)
            if refusal is None and plan.isStreaming():
                refusal = f"streaming reads are not allowed: {self._policy.purpose}"
        elif refusal is None and name == "analysis.UnresolvedTableValuedFunction":
            refusal = table_function_refusal(_strings(plan.name()), self._policy)
        if refusal is not None:
            raise self.refuse(refusal)
        for expression in _seq(plan.expressions()):
            self._vet_parsed_expression(expression)
        for child in _seq(plan.children()):
            self.vet_parsed(child)
        for inner in _seq(plan.innerChildren()):
            if self._is(inner, "plans.logical.LogicalPlan"):
                self.vet_parsed(inner)

    def _vet_parsed_expression(self, expression: Any) -> None:
        name = short_class(str(expression.getClass().getName()))
        refusal = expression_refusal(name, self._policy)
        if refusal is None and name == "analysis.UnresolvedFunction":
            refusal = function_refusal(_strings(expression.nameParts()), self._policy)
        elif refusal is None and name == "analysis.UnresolvedGenerator":
            refusal = function_refusal(_function_identifier(expression.name()), self._policy)
        elif refusal is None and name == "expressions.Literal" and self._policy.reproducible:
            refusal = self._typed_literal_refusal(expression)
        if refusal is not None:
            raise self.refuse(refusal)
        if self._is(expression, "expressions.PlanExpression", name):
            self.vet_parsed(expression.plan())
        for child in _seq(expression.children()):
            self._vet_parsed_expression(child)

    def _typed_literal_refusal(self, literal: Any) -> str | None:
        """``TIMESTAMP 'now'`` is folded by the parser into a literal of the current time:
        only the literal's origin text shows what was written."""
        if str(literal.dataType().typeName()).split("(")[0] not in _DATETIME_TYPES:
            return None
        text = _origin_text(literal)
        parts = typed_literal_parts(text) if text is not None else None
        if parts is None or parts[0] not in _DATETIME_TYPES:
            return f"a date or time literal without its source text cannot be vetted: {text!r}"
        value = self._parser.parseExpression(parts[1])
        if short_class(str(value.getClass().getName())) != "expressions.Literal":
            return f"the date or time literal {text!r} cannot be vetted"
        if self._moving_datetime(str(value.value())):
            return special_datetime_refusal(str(value.value()))
        return None

    def _moving_datetime(self, text: str) -> bool:
        """Decided by Spark's own converters (the ones its parser and its optimizer's
        ``SpecialDatetimeValues`` rule apply): a string they turn into the current date or
        time, however it is spelled (any case, padded with spaces or control characters, a
        zone after it). ``'epoch'``, the one constant among them, is not moving."""
        utils = self._jvm.org.apache.spark.sql.catalyst.util.DateTimeUtils
        zone = self._jvm.java.time.ZoneOffset.UTC
        for convert in (
            utils.convertSpecialDate,
            utils.convertSpecialTimestamp,
            utils.convertSpecialTimestampNTZ,
        ):
            found = convert(text, zone)
            if found.isDefined() and int(found.get()) != 0:
                return True
        return False

    # --- analyzed plan ---

    def vet_analyzed(self, plan: Any) -> None:
        if not self._first_visit(plan):
            return
        name = short_class(str(plan.getClass().getName()))
        refusal = node_refusal(name, self._policy, analyzed=True)
        if refusal is None and name == "plans.logical.View":
            # A leaf: a temp view only the engine creates (inputs, earlier vetted steps).
            if not plan.isTempView():
                refusal = f"a permanent view is not allowed: {self._policy.purpose}"
            else:
                return
        if refusal is not None:
            raise self.refuse(refusal)
        for expression in _seq(plan.expressions()):
            if self._policy.reproducible and not expression.deterministic():
                self._refuse_nondeterministic(expression)
            self._vet_analyzed_expression(expression, check_class=True)
        for child in _seq(plan.children()):
            self.vet_analyzed(child)
        for inner in _seq(plan.innerChildren()):
            if self._is(inner, "plans.logical.LogicalPlan"):
                self.vet_analyzed(inner)

    def _vet_analyzed_expression(
        self, expression: Any, *, check_class: bool, order_free: bool = False
    ) -> None:
        """``order_free``: an ancestor's result does not depend on this one's order (an
        order-erasing function, or a window function, whose ordering the query states)."""
        name = short_class(str(expression.getClass().getName()))
        if check_class:
            refusal = expression_refusal(name, self._policy)
            if refusal is not None:
                raise self.refuse(refusal)
        if self._policy.reproducible:
            self._check_reproducible(expression, name)
            if name in ORDER_DEPENDENT_AGGREGATES and not order_free:
                raise self.refuse(order_dependent_refusal(name))
        order_free = order_free or name in ORDER_ERASING or name == "expressions.WindowExpression"
        if self._is(expression, "expressions.PlanExpression", name):
            self.vet_analyzed(expression.plan())
        if self._is(expression, "expressions.InheritAnalysisRules", name):
            # A function rewritten into its replacement (its only child): the replacement is
            # Spark's own code, so only its parameters are class-checked; the replacement is
            # still walked for non-determinism and special datetime strings.
            for parameter in _seq(expression.parameters()):
                self._vet_analyzed_expression(
                    parameter, check_class=check_class, order_free=order_free
                )
            for child in _seq(expression.children()):
                self._vet_analyzed_expression(child, check_class=False, order_free=order_free)
            return
        if self._policy.reproducible and self._is(
            expression, "expressions.RuntimeReplaceable", name
        ):
            # Its replacement (what the optimizer runs) is not among its children: walk it
            # too, e.g. ``to_date('today')`` becomes a cast of 'today'.
            replacement = expression.replacement()
            if not replacement.deterministic():
                self._refuse_nondeterministic(replacement)
            self._vet_analyzed_expression(replacement, check_class=False, order_free=order_free)
        for child in _seq(expression.children()):
            self._vet_analyzed_expression(child, check_class=check_class, order_free=order_free)

    def _refuse_nondeterministic(self, expression: Any) -> None:
        """Raise naming the innermost non-deterministic expression under ``expression``."""
        for child in _seq(expression.children()):
            if not child.deterministic():
                self._refuse_nondeterministic(child)
        raise self.refuse(
            nondeterministic_refusal(short_class(str(expression.getClass().getName())))
        )

    def _check_reproducible(self, expression: Any, name: str) -> None:
        if name == "expressions.Cast":
            # Spark folds a cast of a constant string 'now', 'today'... into the current time.
            child = expression.child()
            target = str(expression.dataType().typeName()).split("(")[0]
            if (
                target in _DATETIME_TYPES
                and child.foldable()
                and str(child.dataType().typeName()).startswith("string")
            ):
                value = child.eval(None)
                if value is not None and self._moving_datetime(str(value.toString())):
                    raise self.refuse(special_datetime_refusal(str(value.toString())))


def _strings(jseq: Any) -> list[str]:
    return [str(s) for s in _seq(jseq)]


def _function_identifier(identifier: Any) -> list[str]:
    database = identifier.database()
    parts = [str(database.get())] if database.isDefined() else []
    return [*parts, str(identifier.funcName())]


def _origin_text(node: Any) -> str | None:
    origin = node.origin()
    start, stop, text = origin.startIndex(), origin.stopIndex(), origin.sqlText()
    if not (start.isDefined() and stop.isDefined() and text.isDefined()):
        return None
    return str(text.get())[int(start.get()) : int(stop.get()) + 1]
