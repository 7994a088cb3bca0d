"""``@record`` behaves as ``@dataclass(frozen=True, slots=True, kw_only=True)`` does."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from common.odf.fragments import INT32, FetchStepMqtt, MqttTopicSubscription, OffsetInterval
from common.odf.multihash import Multihash
from common.odf.record import positional_record, record


@record
class Point:
    x: int
    y: int = 0
    label: str | None = field(default=None, metadata=INT32)


@record
class Empty:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class RefPoint:
    x: int
    y: int = 0
    label: str | None = field(default=None, metadata=INT32)


def _error(make: Any) -> str:
    with pytest.raises(TypeError) as e:
        make()
    return str(e.value).replace("RefPoint", "Point")


def _error_of(cls: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(TypeError) as e:
        cls(*args, **kwargs)
    return str(e.value).replace(cls.__qualname__, "C")


def test_init_defaults_and_fields_are_a_dataclass_s() -> None:
    p = Point(x=1)
    assert (p.x, p.y, p.label) == (1, 0, None)
    assert dataclasses.is_dataclass(p)
    assert [(f.name, f.metadata.get("fbs")) for f in dataclasses.fields(Point)] == [
        ("x", None),
        ("y", None),
        ("label", "int32"),
    ]
    assert dataclasses.replace(p, y=5) == Point(x=1, y=5)
    assert dataclasses.asdict(p) == {"x": 1, "y": 0, "label": None}
    assert Point.__slots__ == RefPoint.__slots__ == ("x", "y", "label")
    assert Point.__match_args__ == RefPoint.__match_args__ == ()


def test_eq_hash_and_repr_match_the_generated_methods() -> None:
    a, b = Point(x=1, y=2, label="a"), RefPoint(x=1, y=2, label="a")
    assert a == Point(x=1, y=2, label="a") and a != Point(x=1, y=3, label="a")
    assert hash(a) == hash(b) == hash((1, 2, "a"))
    assert repr(a) == repr(b).replace("RefPoint", "Point")
    assert a != b and a.__eq__(b) is NotImplemented
    assert Empty() == Empty() and hash(Empty()) == hash(()) and repr(Empty()) == "Empty()"
    assert OffsetInterval(start=0, end=9) in {OffsetInterval(start=0, end=9)}


def test_bad_arguments_raise_what_python_raises_for_a_dataclass() -> None:
    assert _error(lambda: Point()) == _error(lambda: RefPoint())
    assert _error(lambda: Point(x=1, z=2)) == _error(lambda: RefPoint(x=1, z=2))  # type: ignore[call-arg]
    assert _error(lambda: Point(y=1, z=2)) == _error(lambda: RefPoint(y=1, z=2))  # type: ignore[call-arg]
    assert _error(lambda: Point(1)) != ""  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"missing 3 required keyword-only arguments: 'host', 'p"):
        FetchStepMqtt(username="u")  # type: ignore[call-arg]


def test_records_are_frozen() -> None:
    p = Point(x=1)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'y'"):
        del p.y  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.other = 1  # type: ignore[attr-defined]


def test_copy_and_pickle_round_trip() -> None:
    m = FetchStepMqtt(
        host="h", port=1883, topics=(MqttTopicSubscription(path="a/b"),), username=None
    )
    assert pickle.loads(pickle.dumps(m)) == m
    assert copy.deepcopy(m) == m and copy.copy(m) == m


def test_post_init_validates_and_a_factory_is_refused() -> None:
    @positional_record
    class Even:
        n: int

        def __post_init__(self) -> None:
            if self.n % 2:
                raise ValueError(f"{self.n} is odd")

    class WithFactory:
        x: list[int] = field(default_factory=list)

    assert Even(2).n == 2
    with pytest.raises(ValueError, match="3 is odd"):
        Even(3)
    with pytest.raises(TypeError, match="field x has a default_factory"):
        record(WithFactory)


@positional_record
class Pair:
    left: str
    right: int | None = None

    def __repr__(self) -> str:
        return f"<{self.left}|{self.right}>"


@dataclass(frozen=True, slots=True)
class RefPair:
    left: str
    right: int | None = None


def test_positional_records_take_arguments_as_a_positional_dataclass() -> None:
    assert Pair("a", 1) == Pair(left="a", right=1) == Pair("a", right=1)
    assert hash(Pair("a")) == hash(RefPair("a")) and Pair.__match_args__ == ("left", "right")
    assert repr(Pair("a", 2)) == "<a|2>"  # a method of the class itself is kept
    for args, kwargs in [((), {}), (("a", 1, 2), {}), (("a",), {"left": "b"}), ((), {"x": 1})]:
        assert _error_of(Pair, *args, **kwargs) == _error_of(RefPair, *args, **kwargs)
    match Pair("x", 3):
        case Pair(left, right):
            assert (left, right) == ("x", 3)
    assert [f.name for f in dataclasses.fields(Multihash)] == ["code", "digest"]
