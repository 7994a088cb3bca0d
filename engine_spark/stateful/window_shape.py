"""The shape of a window aggregation in a query's plan: where its single ``GROUP BY
window(event_time, ...)`` is, how wide its windows are, and whether the output is labelled by
the window's end. Read by the window runner (``window.py``), which recomputes such a query,
and by the Structured Streaming runner, whose output watermark lags the same way."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame

from engine_spark.jvm_plan import analyzed, expr_id, seq, single_operator, view_name, walk
from engine_spark.watermark import window_bound

_ROW_WISE = frozenset(
    {
        "Project",
        "Filter",
        "SubqueryAlias",
        "View",
        "Generate",
        "LogicalRelation",
        "LocalRelation",
        "LogicalRDD",
        "MapInArrow",
        "Relation",
        "ResolvedHint",
        "Expand",
        "Aggregate",
    }
)
"""The plan nodes a recomputed window query may have (one Aggregate, Expand only as the
sliding window's expansion)."""


@dataclass(frozen=True, slots=True)
class WindowAggregate:
    """Where a window query's aggregation is, and how wide its windows are."""

    width: timedelta
    """The window duration: a record older than the watermark by more is in closed windows
    only."""
    window_column: str
    """The name of the window column below the aggregation."""
    lag: timedelta
    """Zero when the output's event time is the window's end, the width otherwise (a window
    labelled by its start, or by anything inside it): how far behind the input watermark
    the output watermark may stay at most. ``lag_at`` gives the exact lag."""
    slide: timedelta | None = None
    """The distance between window starts (the width for tumbling windows); None when not
    known (a checkpoint written before it was kept): the output watermark then lags by
    ``lag``."""
    offset: timedelta = timedelta(0)
    """Where the windows' grid starts: every start is ``offset + n * slide``."""

    def lag_at(self, watermark: datetime) -> timedelta:
        """How far behind ``watermark`` the output watermark is (``watermark.window_bound``:
        negative for windows labelled by their end)."""
        return watermark - self.bound_after(watermark)

    def bound_after(self, watermark: datetime) -> datetime:
        """The output watermark once the windows ending at or before ``watermark`` are
        closed (``watermark.window_bound``; without a grid, ``watermark`` less ``lag``)."""
        if self.slide is None:
            return watermark - self.lag
        return window_bound(
            watermark,
            width=self.width,
            slide=self.slide,
            offset=self.offset,
            by_end=self.lag == timedelta(0),
        )


def window_aggregate(
    result: DataFrame, event_time: str, inputs: frozenset[str], output_event_time: str
) -> WindowAggregate | None:
    """The query's window aggregation when it can be recomputed from retained records;
    ``inputs``: the views of the streamed inputs, by name; ``output_event_time``: the output's
    event-time column."""
    root = analyzed(result)
    aggregate = single_operator(root, inputs, _ROW_WISE, "Aggregate")
    if aggregate is None:
        return None
    windows = [
        e
        for e in seq(aggregate.groupingExpressions())
        if str(e.nodeName()) == "AttributeReference" and _is_window_type(e.dataType())
    ]
    if len(windows) != 1:
        return None
    found = _window_width(aggregate, windows[0], event_time, inputs)
    if found is None:
        return None
    width, slide, offset = found
    names = [str(a.name()) for a in seq(aggregate.child().output())]
    window_column = str(windows[0].name())
    if names.count(window_column) != 1:
        return None
    by_end = _labelled_by_end(root, aggregate, windows[0], output_event_time)
    return WindowAggregate(width, window_column, timedelta(0) if by_end else width, slide, offset)


def windows_anywhere(result: DataFrame, output_event_time: str) -> list[WindowAggregate]:
    """Every time-window aggregation in the query, wherever its event time comes from (a
    join's output, say), each with its grid; an aggregation whose grid cannot be read gets
    none, and so lags by its width (``WindowAggregate.bound_after``)."""
    root = analyzed(result)
    found = []
    for node in walk(root):
        if str(node.nodeName()) != "Aggregate":
            continue
        for window in seq(node.groupingExpressions()):
            if str(window.nodeName()) != "AttributeReference" or not _is_window_type(
                window.dataType()
            ):
                continue
            grid = _window_width(node, window, "", frozenset(), strict=False)
            by_end = _labelled_by_end(root, node, window, output_event_time)
            if grid is None:
                return []  # the width is not known: no bound (the caller's own lag holds)
            width, slide, offset = grid
            lag = timedelta(0) if by_end else width
            found.append(WindowAggregate(width, str(window.name()), lag, slide, offset))
    return found


def labelled_by_window_end(result: DataFrame, output_event_time: str) -> bool:
    """Whether every aggregation grouped by a window (time or session window) labels the
    output's event time by the window's end (``window.end``, passed up unchanged)."""
    root = analyzed(result)
    for node in walk(root):
        if str(node.nodeName()) != "Aggregate":
            continue
        windows = [
            e
            for e in seq(node.groupingExpressions())
            if str(e.nodeName()) == "AttributeReference" and _is_window_type(e.dataType())
        ]
        if not all(_labelled_by_end(root, node, w, output_event_time) for w in windows):
            return False
    return True


def _labelled_by_end(root: Any, aggregate: Any, window: Any, output_event_time: str) -> bool:
    """Whether the output's event time is ``window.end``, computed by the aggregation and
    passed up unchanged."""
    outputs = [a for a in seq(root.output()) if str(a.name()) == output_event_time]
    if len(outputs) != 1:
        return False
    target = expr_id(outputs[0])
    for e in seq(aggregate.aggregateExpressions()):
        if expr_id(e) != target or str(e.nodeName()) != "Alias":
            continue
        field = e.child()
        return (
            str(field.nodeName()) == "GetStructField"
            and int(field.ordinal()) == 1
            and str(field.child().nodeName()) == "AttributeReference"
            and expr_id(field.child()) == expr_id(window)
        )
    return False


def _is_window_type(data_type: Any) -> bool:
    return str(data_type.simpleString()) == "struct<start:timestamp,end:timestamp>"


_Grid = tuple[timedelta, timedelta, timedelta]
"""A time window's width, slide and offset."""


def _window_width(
    aggregate: Any, window: Any, event_time: str, inputs: frozenset[str], *, strict: bool = True
) -> _Grid | None:
    """The width, slide and offset of the time window ``window`` (an attribute the
    aggregation groups by), as
    Spark's analyzer writes it: ``named_struct(start, ..., end, start + <width>)`` in a
    Project (tumbling) or an Expand (sliding) below the aggregation, over an input column
    named ``event_time`` that no operator redefines; None for anything else (session
    windows, windows over a computed time)."""
    target = expr_id(window)
    for node in walk(aggregate.child()):
        name = str(node.nodeName())
        if name == "Project":
            for e in seq(node.projectList()):
                if expr_id(e) != target or str(e.nodeName()) != "Alias":
                    continue
                if str(e.child().nodeName()) == "AttributeReference":
                    target = expr_id(e.child())  # the window column renamed: follow it
                    break
                return _struct_width(e.child(), node, event_time, inputs, strict=strict)
        elif name == "Expand":
            output = [expr_id(a) for a in seq(node.output())]
            if target in output:
                position = output.index(target)
                grids = {
                    _struct_width(list(seq(p))[position], node, event_time, inputs, strict=strict)
                    for p in seq(node.projections())
                }
                return grids.pop() if len(grids) == 1 else None
    return None


def _struct_width(
    struct: Any, node: Any, event_time: str, inputs: frozenset[str], *, strict: bool = True
) -> _Grid | None:
    """``named_struct(start, s, end, knownnullable(precisetimestampconversion(s' + W)))``:
    W microseconds, when the struct reads only the input column ``event_time`` (``strict``;
    any one column otherwise); with the slide and offset of ``s`` (``_grid``)."""
    if str(struct.nodeName()) != "CreateNamedStruct":
        return None
    names = [str(n) for n in seq(struct.names())]
    if names != ["start", "end"]:
        return None
    end = struct.valExprs().apply(1)
    for expected in ("KnownNullable", "PreciseTimestampConversion"):
        if str(end.nodeName()) != expected:
            return None
        end = end.child()
    if str(end.nodeName()) != "Add" or str(end.right().nodeName()) != "Literal":
        return None
    references = list(seq(struct.references().toSeq()))
    if len(references) != 1 or (strict and str(references[0].name()) != event_time):
        return None
    if not all(
        str(e.child().nodeName()) == "AttributeReference"
        for e in _descendants(struct)
        if str(e.nodeName()) == "PreciseTimestampConversion"
        and str(e.fromType().simpleString()) == "timestamp"
    ):
        return None  # the windows are over a time computed from event_time
    if strict and not _read_from_input(node, references[0], inputs):
        return None
    grid = _grid(struct)
    if grid is None:
        return None
    return timedelta(microseconds=int(end.right().value())), *grid


def _grid(struct: Any) -> tuple[timedelta, timedelta] | None:
    """The slide and offset of a window's start as Spark's analyzer writes it: the start is
    the event time less ``(t - <offset>) % <slide>`` (made non-negative), less a multiple of
    the slide; None unless every such remainder names the same slide and offset."""
    grids = set()
    for e in _descendants(struct):
        if str(e.nodeName()) != "Remainder":
            continue
        slide, shifted = e.right(), e.left()
        if (
            str(slide.nodeName()) != "Literal"
            or str(shifted.nodeName()) != "Subtract"
            or str(shifted.right().nodeName()) != "Literal"
        ):
            return None
        grids.add((int(slide.value()), int(shifted.right().value())))
    if len(grids) != 1:
        return None
    slide_us, offset_us = grids.pop()
    if slide_us <= 0:
        return None
    return timedelta(microseconds=slide_us), timedelta(microseconds=offset_us)


def _descendants(expression: Any) -> Iterator[Any]:
    stack = [expression]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(seq(e.children()))


def _read_from_input(node: Any, attribute: Any, inputs: frozenset[str]) -> bool:
    """Whether ``attribute`` reaches ``node`` unchanged from one of the ``inputs`` views."""
    target = expr_id(attribute)
    for below in walk(node):
        name = str(below.nodeName())
        if (
            name == "View"
            and view_name(below) in inputs
            and any(expr_id(a) == target for a in seq(below.output()))
        ):
            return True
        if name == "Project":
            for e in seq(below.projectList()):
                if expr_id(e) == target and str(e.nodeName()) == "Alias":
                    return False
        elif name == "Generate" and any(expr_id(a) == target for a in seq(below.generatorOutput())):
            return False
    return False
