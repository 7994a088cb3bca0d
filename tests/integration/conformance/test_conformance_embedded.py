"""The whole conformance corpus against the embedded engine (one engine process for the
module), through the kit's pytest entry point; then the negative controls: a gRPC proxy in
front of the same engine breaks one rule at a time and a case must catch each breakage with
a failure naming the rule."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from coordinator.config import ExchangeFormat
from coordinator.conformance.engines import AddressTarget, EmbeddedTarget, EngineUnderTest
from coordinator.conformance.loader import load_cases
from coordinator.conformance.runner import RunOptions, Status, run_case, run_cases
from coordinator.conformance.testing import assert_conforms, conformance_cases, engine_fixture
from tests.support.breaking_engine import Breakage, BreakingProxy

pytestmark = [pytest.mark.spark, pytest.mark.grpc]

engine = engine_fixture(EmbeddedTarget())

CASES = conformance_cases()


def test_the_corpus_has_at_least_80_cases() -> None:
    assert len(CASES) >= 80


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(engine: EngineUnderTest, case: object) -> None:
    assert_conforms(engine, case)  # type: ignore[arg-type]


@pytest.fixture
def proxied(engine: EngineUnderTest, request: pytest.FixtureRequest) -> Iterator[EngineUnderTest]:
    """The module's engine behind a proxy that breaks ``request.param``."""
    with (
        BreakingProxy(engine.client.target, request.param) as proxy,
        AddressTarget(proxy.address).start(engine.dirs.host_in.parent) as broken,
    ):
        yield broken


CONTROLS = [
    # (breakage, the case that must catch it, the rule its failure names, a case still passing)
    (
        Breakage.SHIFT_OFFSETS,
        "offsets-start-at-next-offset",
        "offsets",
        "syntax-error-is-invalid-query",
    ),
    (
        Breakage.DROP_WATERMARK,
        "watermark-propagates-through-a-map",
        "watermark",
        "computed-columns",
    ),
    (
        Breakage.APPENDS_FOR_RETRACTIONS,
        "retraction-passes-through-a-map",
        "op",
        "offsets-start-at-next-offset",
    ),
    (
        Breakage.LOSE_STATE,
        "tumbling-window-state-survives-transactions",
        "records",
        "offsets-start-at-next-offset",
    ),
    (
        Breakage.MISCLASSIFY_INVALID_QUERY,
        "syntax-error-is-invalid-query",
        "error-class",
        "offsets-start-at-next-offset",
    ),
]


@pytest.mark.parametrize(
    ("proxied", "case_name", "rule", "unaffected"),
    CONTROLS,
    indirect=["proxied"],
    ids=[c[0].value for c in CONTROLS],
)
def test_a_broken_rule_is_caught_with_a_diff_naming_it(
    proxied: EngineUnderTest, case_name: str, rule: str, unaffected: str
) -> None:
    [caught] = load_cases(pattern=case_name)
    result = run_case(proxied, caught)
    assert result.status is Status.FAILED
    assert rule in result.rules, result.summary()
    assert f"[{rule}]" in result.summary()
    # The proxy is otherwise faithful: a case the breakage does not touch still passes.
    [other] = load_cases(pattern=unaffected)
    assert run_case(proxied, other).status is Status.PASSED


@pytest.mark.parametrize("proxied", [Breakage.LOSE_STATE], indirect=True)
def test_lost_state_also_loses_the_watermark_the_checkpoint_carries(
    proxied: EngineUnderTest,
) -> None:
    results = run_cases(proxied, load_cases(pattern="watermark-carried-in-the-checkpoint"))
    [result] = results
    assert result.transaction == 1
    # the watermark of transaction 0 is gone, and with it any state to checkpoint
    assert result.rules == ("watermark", "checkpoint"), result.summary()


ARROW_SUBSET = (
    "offsets-several-slices-in-one-transaction",
    "data-types-round-trip",
    "input-never-had-data-in-a-union",
    "tumbling-window-closes-on-the-watermark",
    "interval-join-inner",
    "temporal-table-latest-version-per-key",
    "input-gains-a-column",
    "raw-query-projection",
)


@pytest.mark.parametrize("name", ARROW_SUBSET)
def test_arrow_ipc_exchange(engine: EngineUnderTest, name: str) -> None:
    """Our coordinator's exchange: Arrow IPC input files and an ``.arrow`` output path."""
    [case] = [c for c in CASES if c.name == name]
    assert_conforms(engine, case, RunOptions(exchange=ExchangeFormat.ARROW))


def test_a_known_difference_that_passes_fails_and_one_that_holds_is_reported(
    engine: EngineUnderTest,
) -> None:
    [passing] = load_cases(pattern="offsets-start-at-next-offset")
    result = run_case(engine, replace(passing, known_difference="a difference since fixed"))
    assert result.status is Status.FAILED
    assert result.rules == ("known-difference",)
    assert "remove knownDifference" in result.summary()
    [known] = [c for c in CASES if c.known_difference is not None][:1]
    result = run_case(engine, known)
    assert result.status is Status.KNOWN_DIFFERENCE
    assert result.failures  # what differs is kept for the report
    assert result.summary() == f"known difference: {known.known_difference}"
