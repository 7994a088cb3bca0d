"""YAML text to and from plain values: the JSON-compatible subset of YAML, with positions.

Scalars are resolved as the reference (serde_yaml 0.9, a YAML 1.2 core schema) resolves them:
only ``true``/``false`` are booleans, ``null``/``~``/empty is null, integers are decimal (no
leading zeros), ``0x``, ``0o`` or ``0b``; everything else that is not a float is a string, so
timestamps, ``yes``/``no`` and ``1:20`` stay strings. Mapping keys must be strings; anchors,
aliases, merge keys and custom tags are rejected, and so is nesting deeper than ``MAX_DEPTH``
sequences and mappings (found while composing, before anything recurses past it).

Writing uses libyaml (as serde_yaml does): block style, 2-space indentation, sequences not
indented under their key, no line wrapping, strings quoted only when they would otherwise read
as another type, multi-line strings as literal blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml._yaml import CEmitter
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from common.odf.errors import ValidationError

_TAG = "tag:yaml.org,2002:"
_STR, _NULL, _BOOL, _INT, _FLOAT = (_TAG + t for t in ("str", "null", "bool", "int", "float"))
_SEQ, _MAP = _TAG + "seq", _TAG + "map"

_NULL_RE = re.compile(r"~|null|Null|NULL|")
_BOOL_RE = re.compile(r"true|True|TRUE|false|False|FALSE")
_INT_RE = re.compile(r"[-+]?(?:0|[1-9][0-9]*|0x[0-9a-fA-F]+|0o[0-7]+|0b[01]+)")
_FLOAT_RE = re.compile(
    r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
)
_LEADING_ZERO_DIGITS_RE = re.compile(r"[-+]?0[0-9]+")
_DIGITS = list("-+0123456789")

MAX_DEPTH = 64
"""Sequences and mappings nested inside one another, at the most (a snapshot needs 6)."""


class _LoadResolver(yaml.resolver.BaseResolver):
    """serde_yaml's untagged scalar resolution."""

    yaml_implicit_resolvers: dict[Any, Any] = {}


def _anchored(pattern: re.Pattern[str]) -> re.Pattern[str]:
    return re.compile(f"(?:{pattern.pattern})\\Z")


_LoadResolver.add_implicit_resolver(_NULL, _anchored(_NULL_RE), [*"~nN", ""])
_LoadResolver.add_implicit_resolver(_BOOL, _anchored(_BOOL_RE), list("tTfF"))
_LoadResolver.add_implicit_resolver(_INT, _anchored(_INT_RE), _DIGITS)
_LoadResolver.add_implicit_resolver(
    _FLOAT,
    re.compile(rf"(?!{_LEADING_ZERO_DIGITS_RE.pattern}\Z)(?:{_FLOAT_RE.pattern})\Z"),
    [*_DIGITS, "."],
)


class _DumpResolver(_LoadResolver):
    """Also treats ``0123`` as non-string, so that it is quoted on output (as serde_yaml does)."""


_DumpResolver.add_implicit_resolver(_INT, _anchored(_LEADING_ZERO_DIGITS_RE), _DIGITS)


class _Loader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _LoadResolver,
):
    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _LoadResolver.__init__(self)
        self.depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.get_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases are not supported", event.start_mark
            )
        if not self.check_event(yaml.CollectionStartEvent):
            return super().compose_node(parent, index)
        if self.depth == MAX_DEPTH:
            problem = f"nested deeper than {MAX_DEPTH} sequences and mappings"
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(None, None, problem, mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _Representer(yaml.representer.SafeRepresenter):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(representer: yaml.representer.BaseRepresenter, data: str) -> ScalarNode:
    return representer.represent_scalar(_STR, data, style="|" if "\n" in data else None)


_Representer.add_representer(str, _represent_str)


class _Dumper(CEmitter, _Representer, _DumpResolver):
    def __init__(self, stream: Any, **kwargs: Any) -> None:
        CEmitter.__init__(
            self,
            stream,
            indent=2,
            width=(1 << 31) - 1,
            allow_unicode=True,
            line_break="\n",
        )
        _Representer.__init__(self, default_flow_style=False, sort_keys=False)
        _DumpResolver.__init__(self)


def dump(value: Any) -> str:
    """Plain value as YAML text in the reference's style."""
    text: str = yaml.dump(value, Dumper=_Dumper)
    return text


@dataclass(frozen=True, slots=True)
class Document:
    """One parsed YAML document: its plain value and where each of its nodes starts."""

    value: Any
    source: str
    marks: dict[str, yaml.Mark] = field(repr=False)

    def locate(self, error: ValidationError, *, within: str = "") -> ValidationError:
        """``error`` (whose path is relative to ``within``) with the file and line in front."""
        full = _join(within, error.path or "")
        mark = self._nearest_mark(full)
        where = f"{self.source}:{mark.line + 1}" if mark is not None else self.source
        shown = error.path or within
        prefixed = f"{where}: {shown}" if shown else where
        return type(error)(error.reason, path=prefixed)

    def _nearest_mark(self, path: str) -> yaml.Mark | None:
        while True:
            mark = self.marks.get(path)
            if mark is not None or not path:
                return mark
            path = path[: max(path.rfind("."), path.rfind("["), 0)]


def load_all(text: str, source: str) -> list[Document]:
    """Every document of a YAML stream, as plain values."""
    loader = _Loader(text)
    documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            assert node is not None  # check_node() said there is one
            marks: dict[str, yaml.Mark] = {}
            value = _Converter(source, marks).convert(node, "")
            documents.append(Document(value, source, marks))
    except yaml.MarkedYAMLError as e:
        raise _syntax_error(e, source) from None
    except yaml.YAMLError as e:
        raise ValidationError(f"invalid YAML: {' '.join(str(e).split())}", path=source) from None
    finally:
        loader.dispose()
    return documents


def load_one(text: str, source: str) -> Document:
    """The single document of a YAML stream."""
    documents = load_all(text, source)
    if len(documents) != 1:
        found = "no document" if not documents else f"{len(documents)} documents"
        raise ValidationError(f"expected one YAML document, found {found}", path=source)
    return documents[0]


def _syntax_error(e: yaml.MarkedYAMLError, source: str) -> ValidationError:
    mark = e.problem_mark or e.context_mark
    where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
    problem = e.problem or e.context or "syntax error"
    return ValidationError(f"invalid YAML: {problem}", path=where)


def _join(path: str, key: str) -> str:
    if not path:
        return key
    if not key:
        return path
    return path + key if key.startswith("[") else f"{path}.{key}"


class _Converter:
    """Turns a composed node tree into plain values, recording each node's start mark."""

    def __init__(self, source: str, marks: dict[str, yaml.Mark]) -> None:
        self.source = source
        self.marks = marks

    def convert(self, node: Node, path: str) -> Any:
        self.marks[path] = node.start_mark
        if isinstance(node, ScalarNode):
            return self._scalar(node, path)
        if isinstance(node, SequenceNode) and node.tag == _SEQ:
            return [self.convert(item, _join(path, f"[{i}]")) for i, item in enumerate(node.value)]
        if isinstance(node, MappingNode) and node.tag == _MAP:
            return self._mapping(node, path)
        raise self._error(node, path, f"unsupported YAML tag {node.tag}")

    def _mapping(self, node: MappingNode, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not (isinstance(key_node, ScalarNode) and key_node.tag == _STR):
                shown = key_node.value if isinstance(key_node, ScalarNode) else "a collection"
                raise self._error(key_node, path, f"mapping keys must be strings, got {shown}")
            key = key_node.value
            if key in out:
                raise self._error(key_node, _join(path, key), "duplicate key")
            out[key] = self.convert(value_node, _join(path, key))
        return out

    def _scalar(self, node: ScalarNode, path: str) -> Any:
        text = node.value
        if node.tag == _STR:
            return text
        if node.tag == _NULL and _NULL_RE.fullmatch(text):
            return None
        if node.tag == _BOOL and _BOOL_RE.fullmatch(text):
            return text[0] in "tT"
        if node.tag == _INT and _INT_RE.fullmatch(text):
            return _parse_int(text)
        if node.tag == _FLOAT and _FLOAT_RE.fullmatch(text):
            return _parse_float(text)
        raise self._error(node, path, f"unsupported YAML scalar {node.tag} {text!r}")

    def _error(self, node: Node, path: str, reason: str) -> ValidationError:
        mark = node.start_mark
        where = f"{self.source}:{mark.line + 1}:{mark.column + 1}"
        return ValidationError(reason, path=f"{where}: {path}" if path else where)


def _parse_int(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    base = {"0x": 16, "0o": 8, "0b": 2}.get(digits[:2], 10)
    return sign * int(digits if base == 10 else digits[2:], base)


def _parse_float(text: str) -> float:
    lowered = text.lower()
    if lowered.endswith(".inf"):
        return float("-inf") if lowered.startswith("-") else float("inf")
    if lowered == ".nan":
        return float("nan")
    return float(text)
