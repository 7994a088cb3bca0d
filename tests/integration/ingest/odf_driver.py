"""``odf`` with the commit step hook set, for fault tests of real ingest processes.

Run as ``python -m tests.integration.ingest.odf_driver DIR [--stop-at STEP] -- ODF-ARGS...``.
Every step a dataset commit reaches (see ``coordinator.dataset.commit.step_hook``) is appended
to ``DIR/steps``, one per line. The first time ``STEP`` is reached the process writes
``DIR/at-STEP`` and waits, with the commit exactly there, until ``DIR/go`` exists: a test kills
it at that point, or lets it go on. ``--no-writer-locks``: the process takes no writer lock
(``coordinator.dataset.writer_locks``), as a writer that does not know them (another ODF
implementation, an older odf): the commit's compare-and-swap is then the only guard.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from coordinator.cli import main as odf_main
from coordinator.dataset import commit, writer_locks

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


@contextmanager
def _no_locks(*_args: object, **_kwargs: object) -> Iterator[None]:
    yield


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        raise SystemExit("usage: odf_driver DIR [--stop-at STEP] -- ODF-ARGS...")
    split = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--stop-at", choices=STEPS)
    parser.add_argument("--no-writer-locks", action="store_true")
    args = parser.parse_args(argv[:split])
    args.directory.mkdir(parents=True, exist_ok=True)
    install(args.directory, args.stop_at)
    if args.no_writer_locks:
        writer_locks.WriterLocks.hold_keys = _no_locks  # type: ignore[method-assign]
    return odf_main(argv[split + 1 :])


if __name__ == "__main__":
    sys.exit(main())
