"""``odf engine test`` through the CLI: the engine image on a focused subset of the corpus
(every area, each error class), a failing case reported with its rule and exit 1, and an
invalid case directory refused before any engine starts."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from coordinator.conformance.loader import builtin_cases_dir
from tests.support.cli import fails, odf
from tests.support.engine_cases import MINIMAL
from tests.support.images import BuiltImage

IMAGE_SUBSET = (
    "core/offsets-start-at-next-offset",
    "core/filter-to-nothing-writes-no-slice",
    "event-time/event-time-date-input",
    "watermarks/watermark-carried-in-the-checkpoint",
    "watermarks/watermark-minimum-over-inputs",
    "retractions/filter-keeping-half-a-correction",
    "windows/tumbling-window-closes-on-the-watermark",
    "joins/interval-join-inner",
    "aggregates/changelog-aggregate-inserts-and-updates",
    "temporal/temporal-table-latest-version-per-key",
    "evolution/input-gains-a-column",
    "validate/validate-evolution-drops-a-column",
    "migrate/migrate-keeps-watermarks",
    "raw-query/raw-query-projection",
    "errors/division-by-zero-is-invalid-query",
    "errors/damaged-checkpoint-is-internal-error",
    "harvested/datafusion-partial-input-file",
    "harvested/datafusion-empty-result-keeps-its-schema",
    "harvested/risingwave-eowc-tumble-max",
)
"""The image run: one or two cases per area of the corpus (the whole corpus runs against the
embedded engine in tests/integration/conformance); chosen to stay within a few minutes."""


def subset(tmp_path: Path, names: tuple[str, ...]) -> Path:
    cases = tmp_path / "cases"
    cases.mkdir()
    for name in names:
        shutil.copy(builtin_cases_dir() / f"{name}.yaml", cases / f"{Path(name).name}.yaml")
    return cases


@pytest.mark.e2e
@pytest.mark.containerized
def test_the_engine_image_passes_the_corpus_subset(
    tmp_path: Path, engine_image: BuiltImage
) -> None:
    cases = subset(tmp_path, IMAGE_SUBSET)
    report = tmp_path / "report.xml"
    result = odf(
        tmp_path,
        "engine", "test", "--image", engine_image.pinned_ref(),
        "--cases", str(cases), "-o", "junit", "--report", str(report),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    suite = ET.parse(report).getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (
        str(len(IMAGE_SUBSET)),
        "0",
        "0",
    )
    assert f"{len(IMAGE_SUBSET)} passed, 0 failed" in result.stderr


def wrong_expectation() -> str:
    """The minimal case expecting what the engine does not give: a doubled ``n`` and a later
    watermark."""
    case = yaml.safe_load(MINIMAL)
    case["case"] = "wrong-expectation"
    (transaction,) = case["transactions"]
    transaction["inputs"]["events"]["watermark"] = "00:01"
    transaction["expect"] = {"watermark": "00:02", "records": [{"event_time": "00:01", "n": 2}]}
    return str(yaml.safe_dump(case, sort_keys=False))


@pytest.mark.e2e
@pytest.mark.spark
def test_a_failing_case_exits_1_with_the_rules_and_skips_undeclared_capabilities(
    tmp_path: Path,
) -> None:
    cases = subset(tmp_path, ("aggregates/top-n-per-key-changelog",))
    (cases / "wrong.yaml").write_text(wrong_expectation())
    result = odf(
        tmp_path, "engine", "test", "--embedded", "--cases", str(cases),
        "--capabilities", "retractions", "-o", "json",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "FAIL wrong-expectation: transaction 0: [records]" in result.stderr
    assert "[watermark] output watermark: expected 2024-01-01T00:02:00Z" in result.stderr
    assert "1 failed, 1 skipped" in result.stderr
    doc = json.loads(result.stdout)
    by_name = {c["case"]: c for c in doc["cases"]}
    assert by_name["wrong-expectation"]["rules"] == ["records", "watermark"]
    assert by_name["top-n-per-key-changelog"]["status"] == "skipped"
    assert "needs capability" in by_name["top-n-per-key-changelog"]["detail"]


@pytest.mark.e2e
def test_an_invalid_case_is_refused_before_an_engine_starts(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    no_spec = MINIMAL.replace('spec: "Engine Contract"\n', "")
    assert no_spec != MINIMAL
    (cases / "bad.yaml").write_text(no_spec)
    line = fails(tmp_path, "engine", "test", "--embedded", "--cases", str(cases), only_line=True)
    assert line == f"error: {cases / 'bad.yaml'}: (top): 'spec' is a required property"
    line = fails(tmp_path, "engine", "test", "--embedded", "--filter", "no-such-case-at-all")
    assert "no case matches" in line
