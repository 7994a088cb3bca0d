"""``odf`` with the commit step hook set, for fault tests of real ingest processes.

Run as ``python -m tests.integration.ingest.odf_driver DIR [--stop-at STEP] -- ODF-ARGS...``.
Every step a dataset commit reaches (see ``coordinator.dataset.commit.step_hook``) is appended
to ``DIR/steps``, one per line. The first time ``STEP`` is reached the process writes
``DIR/at-STEP`` and waits, with the commit exactly there, until ``DIR/go`` exists: a test kills
it at that point, or lets it go on.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from coordinator.cli import main as odf_main
from coordinator.dataset import commit

STEPS = ("locking", "locked", "stored", "head_replaced")


def install(directory: Path, stop_at: str | None) -> None:
    stopped = False

    def hook(step: str) -> None:
        nonlocal stopped
        with open(directory / "steps", "a") as f:
            f.write(step + "\n")
        if step == stop_at and not stopped:
            stopped = True
            (directory / f"at-{step}").write_text("")
            while not (directory / "go").exists():
                time.sleep(0.01)

    commit.step_hook = hook


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        raise SystemExit("usage: odf_driver DIR [--stop-at STEP] -- ODF-ARGS...")
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--stop-at", choices=STEPS)
    args = parser.parse_args(argv[:split])
    args.directory.mkdir(parents=True, exist_ok=True)
    install(args.directory, args.stop_at)
    return odf_main(argv[split + 1 :])


if __name__ == "__main__":
    sys.exit(main())
