"""Case files: the shipped corpus is valid; invalid or hostile files are refused with one
line naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.conformance.case import ErrorClass, Kind, Order
from coordinator.conformance.loader import (
    MAX_CASE_BYTES,
    CaseFormatError,
    builtin_cases_dir,
    load_case,
    load_cases,
)
from tests.support.engine_cases import MINIMAL


def write(tmp_path: Path, text: str, name: str = "case.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_corpus_loads_and_covers_the_issue() -> None:
    cases = load_cases()
    assert len(cases) >= 80
    assert len({c.name for c in cases}) == len(cases)
    kinds = {c.kind for c in cases}
    assert kinds == set(Kind)
    capabilities = set().union(*(c.capabilities for c in cases))
    for needed in (
        "stateful",
        "retractions",
        "windows",
        "session-windows",
        "interval-join",
        "outer-join",
        "changelog",
        "top-n",
        "deduplication",
        "as-of-join",
        "temporal-table",
        "schema-evolution",
        "raw-query",
        "validate-query",
        "migrate-query",
    ):
        assert needed in capabilities, needed
    errors = {
        t.expect.error for c in cases for t in c.transactions if t.expect.error is not None
    } | {c.expect.error for c in cases if c.expect is not None and c.expect.error is not None}
    assert errors == set(ErrorClass)
    assert all(c.spec for c in cases)


def test_a_minimal_case(tmp_path: Path) -> None:
    case = load_case(write(tmp_path, MINIMAL))
    assert case.kind is Kind.TRANSFORM
    [tx] = case.transactions
    assert tx.expect.order is Order.ORDERED
    # YAML's own timestamp typing is off: the time stays exactly as written
    assert [m.event_time for m in tx.inputs["events"].watermarks] == ["2024-01-01T00:01:00Z"]
    assert case.dialects() == {"spark"}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (("case: minimal", "case: Bad Name"), "case: 'Bad Name' does not match"),
        (('spec: "Engine Contract"\n', ""), "'spec' is a required property"),
        (("n: int64}", "n: int128}"), "inputs.0.columns.n"),
        (("order: ordered", "order: sorted"), "transactions.0.expect.order"),
        (("      events:\n        rows", "      nope:\n        rows"), "no input 'nope'"),
        (
            ('{event_time: "00:01", n: 1}\n        watermark', "{n: 1}\n        watermark"),
            "needs event_time",
        ),
        (
            (
                '{event_time: "00:01", n: 1}\n        watermark',
                '{event_time: "00:01", m: 1}\n        watermark',
            ),
            "unknown column(s) ['m']",
        ),
        (("    expect:\n", "    expect:\n      error: invalid-query\n"), "transactions.0.expect"),
        (
            (
                '{event_time: "00:01", n: 1}\n        watermark',
                "{event_time: 1:30, n: 1}\n        watermark",
            ),
            "not a quoted time: 90",
        ),
        (
            (
                '{event_time: "00:01", n: 1}\n        watermark',
                '{event_time: "00:01", n: 1, op: -X}\n        watermark',
            ),
            "not an operation type",
        ),
        (("transactions:", "surprise: 1\ntransactions:"), "Additional properties"),
        (
            ('"00:01", n: 1}\n        watermark', '"00:01", n: one}\n        watermark'),
            "transactions.0.inputs.events: column n:",
        ),
        (
            ("watermark: 2024-01-01T00:01:00Z", "watermark: yesterday"),
            "transactions.0.inputs.events.watermarks.0: not a time: 'yesterday'",
        ),
    ],
)
def test_invalid_cases_are_refused_naming_file_and_field(
    tmp_path: Path, change: tuple[str, str], words: str
) -> None:
    assert change[0] in MINIMAL
    path = write(tmp_path, MINIMAL.replace(change[0], change[1], 1))
    with pytest.raises(CaseFormatError) as e:
        load_case(path)
    message = str(e.value)
    assert message.startswith(f"{path}: ")
    assert words in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "text",
    [
        "!!python/object/apply:os.system ['echo pwned']\n",
        "a: [unclosed\n",
        "- just\n- a list\n",
        "case: &a [*a]\n",
    ],
)
def test_hostile_yaml_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(CaseFormatError, match=r"case\.yaml: "):
        load_case(write(tmp_path, text))


def test_oversized_and_undecodable_files_are_refused(tmp_path: Path) -> None:
    big = write(tmp_path, "#" * (MAX_CASE_BYTES + 1), "big.yaml")
    with pytest.raises(CaseFormatError, match="larger than"):
        load_case(big)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CaseFormatError, match="cannot read"):
        load_case(binary)


def test_directories_filters_and_duplicates(tmp_path: Path) -> None:
    with pytest.raises(CaseFormatError, match="not a directory"):
        load_cases(tmp_path / "missing")
    with pytest.raises(CaseFormatError, match="no case files"):
        load_cases(tmp_path)
    write(tmp_path, MINIMAL, "a.yaml")
    write(tmp_path, MINIMAL.replace("case: minimal", "case: other"), "b.yaml")
    assert [c.name for c in load_cases(tmp_path, "oth")] == ["other"]
    assert [c.name for c in load_cases(tmp_path, "m*")] == ["minimal"]
    write(tmp_path, MINIMAL, "c.yaml")
    with pytest.raises(CaseFormatError, match="also in"):
        load_cases(tmp_path)


def test_the_corpus_is_shipped_inside_the_package() -> None:
    assert builtin_cases_dir().is_dir()
    assert (builtin_cases_dir().parent / "case.schema.json").is_file()
    assert (builtin_cases_dir().parent / "README.md").is_file()
