"""The figures a benchmark reports, machine-readable for ``bench/run_all.py``.

Each benchmark keeps its own human output and, given ``--json PATH``, also writes its figures
there: what was measured (``ours``), the baseline measured in the same run (if any), and the
target, a bound on the ratio ours/baseline (or on ``ours`` itself when there is no baseline):
at most ``target`` (times, memory) or, with ``at_least``, at least ``target`` (throughput).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Figure:
    name: str
    ours: float
    unit: str
    baseline: float | None = None
    target: float | None = None
    at_least: bool = False

    @property
    def ratio(self) -> float | None:
        if self.baseline is None:
            return None
        return self.ours / self.baseline if self.baseline else float("inf")

    @property
    def measured(self) -> float:
        """What the target bounds: the ratio, or ``ours`` when there is no baseline."""
        ratio = self.ratio
        return self.ours if ratio is None else ratio

    @property
    def ok(self) -> bool | None:
        """Whether the target is met; ``None`` when the figure has no target."""
        if self.target is None:
            return None
        return self.measured >= self.target if self.at_least else self.measured <= self.target

    @classmethod
    def of(cls, doc: dict[str, Any]) -> Figure:
        return cls(
            name=str(doc["name"]),
            ours=float(doc["ours"]),
            unit=str(doc["unit"]),
            baseline=None if doc.get("baseline") is None else float(doc["baseline"]),
            target=None if doc.get("target") is None else float(doc["target"]),
            at_least=bool(doc.get("at_least", False)),
        )


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="also write the figures to PATH as JSON (for bench/run_all.py)",
    )


def write_json(path: Path | None, figures: list[Figure]) -> None:
    """Write ``figures`` to ``path`` (nothing when ``path`` is ``None``)."""
    if path is not None:
        path.write_text(json.dumps([asdict(f) for f in figures], indent=1) + "\n")


def read_json(path: Path) -> list[Figure]:
    return [Figure.of(doc) for doc in json.loads(path.read_text())]
