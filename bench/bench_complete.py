"""Shell completion: the time of one TAB, against a bare ``python -c pass``.

Workload: ``bench_cli_start``'s workspace (three root datasets) and one repository alias. Each
TAB is a fresh ``python -m coordinator`` under argcomplete's protocol (``_ARGCOMPLETE=1``,
``COMP_LINE``, ``COMP_POINT``; the answer into ``_ARGCOMPLETE_STDOUT_FILENAME``), as the
shell code of ``odf completion bash`` runs it. Timed in turns with the baseline, ``--runs``
times each, medians of the wall time. The TABs the fast path answers (``coordinator.cli.
complete``: commands, dataset names, repository aliases, config keys) and, for comparison,
one it leaves to argcomplete over the whole parser (an option name).

Target: every fast-path TAB under 150 ms of CPU time (user + system: what a TAB costs, nearly
independent of the machine's load; the wall time, and both ratios to the baseline, the floor
of any Python command on this machine at that moment, are printed too). Exits 1 when one is
missed.

Run: ``.venv/bin/python bench/bench_complete.py [--runs N] [--tree PATH] [--json PATH]``
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_cli_start import (
    BASE,
    DATASETS,
    cli_arguments,
    cli_environment,
    make_workspace,
    print_timings,
    time_in_turns,
)
from bench.figures import Figure, write_json

TARGET_S = 0.150
TABS = {
    "odf ta<TAB> (a command)": ("odf ta", True),
    f"odf tail {DATASETS[0][:2]}<TAB> (a dataset)": (f"odf tail {DATASETS[0][:2]}", True),
    "odf pull <TAB> (datasets, REPO/)": ("odf pull ", True),
    "odf config get daemon.m<TAB> (a key)": ("odf config get daemon.m", True),
    "odf tail --<TAB> (an option: argcomplete)": ("odf tail --", False),
}


def main() -> int:
    args = cli_arguments(__doc__, "TAB")
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-complete-") as tmp:
        cwd = Path(tmp)
        make_workspace(cwd)
        (cwd / ".odf" / "repos.json").write_text('{"repos": {"origin": "file:///tmp/r"}}')
        answer = cwd / "answer"
        base_env = cli_environment(args.tree)
        runs: dict[str, tuple[list[str], dict[str, str]]] = {
            BASE: ([python, "-c", "pass"], base_env)
        }
        for name, (line, _) in TABS.items():
            env = {
                **base_env,
                "_ARGCOMPLETE": "1",
                "_ARGCOMPLETE_SHELL": "bash",
                "_ARGCOMPLETE_STDOUT_FILENAME": str(answer),
                "COMP_LINE": line,
                "COMP_POINT": str(len(line)),
            }
            runs[name] = ([python, "-m", "coordinator"], env)
        medians, cpu_medians = time_in_turns(runs, cwd, args.runs)

    fast = [name for name, (_, answered_here) in TABS.items() if answered_here]
    figures = print_timings(
        f"one TAB of {args.tree}, medians of {args.runs} runs each, in turns",
        medians,
        cpu_medians,
        46,
        {
            n: (Figure(f"TAB (CPU): {n}", cpu_medians[n], "s", None, TARGET_S), "< 150 ms")
            for n in fast
        },
    )
    write_json(args.json, figures)
    return 0 if all(f.ok for f in figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
