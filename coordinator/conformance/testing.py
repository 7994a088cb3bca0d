"""The kit from another project's pytest: one engine per module, one test per case.

In a test module::

    from coordinator.conformance.testing import conformance_cases, engine_fixture

    engine = engine_fixture(ImageTarget("registry.example/my-engine:1.0"))  # or AddressTarget

    @pytest.mark.parametrize("case", conformance_cases(), ids=lambda c: c.name)
    def test_conformance(engine, case):
        assert_conforms(engine, case, RunOptions(dialect="spark"))

``conformance_cases(directory, pattern)`` takes the kit's corpus by default (or your own
directory of cases); ``assert_conforms`` skips a case the options exclude (capability,
dialect) and fails with the case's row diff and the rules it breaks; a case with a
``knownDifference`` that fails is an expected failure (xfail), one that passes fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from coordinator.conformance.case import Case
from coordinator.conformance.engines import EngineTarget, EngineUnderTest
from coordinator.conformance.loader import load_cases
from coordinator.conformance.runner import CaseResult, RunOptions, Status, run_case


def conformance_cases(directory: Path | None = None, pattern: str | None = None) -> list[Case]:
    return load_cases(directory, pattern)


Scope = Literal["session", "package", "module", "class", "function"]


def engine_fixture(target: EngineTarget, scope: Scope = "module") -> Callable[..., Any]:
    """A pytest fixture giving ``target``'s engine, started once per ``scope``."""

    @pytest.fixture(scope=scope)
    def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineUnderTest]:
        with target.start(tmp_path_factory.mktemp("conformance")) as started:
            yield started

    return engine


def assert_conforms(
    engine: EngineUnderTest, case: Case, options: RunOptions | None = None
) -> CaseResult:
    result = run_case(engine, case, options)
    if result.status is Status.SKIPPED:
        pytest.skip(f"{case.name}: {result.reason}")
    if result.status is Status.FAILED:
        pytest.fail(f"{case.name} ({case.spec}), {result.summary()}", pytrace=False)
    if result.status is Status.KNOWN_DIFFERENCE:
        pytest.xfail(f"{case.name}: {result.summary()}")
    return result
