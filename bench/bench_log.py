"""``odf log`` on a block with a large description: linear, measured against decoding.

Workload: a root dataset whose SetInfo description is S, then 4*S bytes of words (the
default S is 2 MB). For each size the script times, in the same run:

- the baseline: reading and decoding every block of the chain (``Dataset.iter_blocks``);
- ``odf log`` as a table (the default format; not a terminal, so 400 columns), rendered into
  memory;
- at size 4*S, the same table with rich's plain ``Text`` cells (the renderer before the
  fix, quadratic: rich splits one segment holding every wrapped line with repeated
  ``str.partition``).

It prints each time as a ratio to the decode baseline, and the growth of the log time from
S to 4*S: about 4 when linear, about 16 when quadratic.

Run: ``.venv/bin/python bench/bench_log.py [--megabytes S]``
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.text import Text

import coordinator.cli.output as output
from common.odf.events import SetInfo
from common.odf.fragments import DatasetKind
from common.odf.snapshot import DatasetSnapshot
from coordinator.cli import main
from coordinator.workspace import Workspace


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def log(name: str) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        main(["log", name])


def run(megabytes: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.init(Path(tmp))
        sizes = {"small": int(megabytes * 1_000_000), "large": int(4 * megabytes * 1_000_000)}
        for name, size in sizes.items():
            description = ("word " * (size // 5 + 1))[:size]
            snapshot = DatasetSnapshot(
                name=name,
                kind=DatasetKind.ROOT,
                metadata=(SetInfo(description=description),),
            )
            ws.create_dataset(snapshot)
        os.chdir(tmp)
        logs = {}
        for name, size in sizes.items():
            ds = ws.open_dataset(name)
            decode = timed(lambda ds=ds: list(ds.iter_blocks()))
            logs[name] = timed(lambda name=name: log(name))
            print(
                f"{size / 1e6:6.1f} MB description: decode {decode:6.3f} s, log {logs[name]:6.3f} s"
                f" ({logs[name] / decode:5.1f}x decode)"
            )
        fixed = output._Cell
        output._Cell = Text  # type: ignore[misc]
        try:
            before = timed(lambda: log("large"))
        finally:
            output._Cell = fixed  # type: ignore[misc]
        print(
            f"{sizes['large'] / 1e6:6.1f} MB with plain rich Text cells (before the fix):"
            f" log {before:6.3f} s ({before / logs['large']:.1f}x the fixed renderer)"
        )
        growth = logs["large"] / logs["small"]
        verdict = "linear" if growth < 8 else "SUPERLINEAR"
        print(f"log time growth for 4x the size: {growth:.1f}x ({verdict}; quadratic would be 16x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=2.0)
    run(parser.parse_args().megabytes)
