"""Shared test configuration: tiers by marker, unmarked tests are ``unit``."""

from __future__ import annotations

import pytest

TIERS = ("spark", "grpc", "containerized", "e2e")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.get_closest_marker(t) for t in TIERS):
            item.add_marker(pytest.mark.unit)
