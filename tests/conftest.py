"""Shared test configuration: tiers by marker, unmarked tests are ``unit``.

Hypothesis: no per-example deadline (the machines are shared and timings are noisy; speed is
measured in bench/, never asserted here) and a derandomized profile in CI, so a CI run is
reproducible. ``HYPOTHESIS_PROFILE=thorough`` runs many more examples.
"""

from __future__ import annotations

import os

# Before anything imports grpc: see coordinator/__init__.py (this process starts engines).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import pytest
from hypothesis import HealthCheck, settings

TIERS = ("spark", "grpc", "containerized", "e2e")

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "ci", parent=settings.get_profile("default"), derandomize=True, print_blob=True
)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=1000)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default")
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.get_closest_marker(t) for t in TIERS):
            item.add_marker(pytest.mark.unit)
