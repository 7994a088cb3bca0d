"""``bench/run_all.py``'s one table: a row per figure, MISSED rows, and the verdict."""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.figures import Figure
from bench.run_all import BenchResult, background_load, render, run_mode, table_rows


def test_rows_show_ours_baseline_ratio_target_and_verdict() -> None:
    results = [
        BenchResult(
            "cli_start",
            0,
            (Figure("CLI start: odf list", 0.09, "s", 0.03, 3.0),),
        ),
        BenchResult(
            "ingest",
            1,
            (
                Figure("ingest, library", 500_000, "rows/s", 1_000_000, 0.7, at_least=True),
                Figure("ingest peak RSS", 600 * 2**20, "B", 500 * 2**20, 1.2),
            ),
        ),
        BenchResult("memory", 0, (Figure("engine memory, idle", 300 * 2**20, "B"),)),
    ]
    rows, ok = table_rows(results)
    assert not ok
    assert rows == [
        ("CLI start: odf list", "90.0 ms", "30.0 ms", "3.00x", "<= 3x", "OK"),
        ("ingest, library", "0.50 M rows/s", "1.00 M rows/s", "0.50x", ">= 0.7x", "MISSED"),
        ("ingest peak RSS", "600 MiB", "500 MiB", "1.20x", "<= 1.2x", "OK"),
        ("engine memory, idle", "300 MiB", "", "", "", ""),
    ]
    text = render(rows)
    lines = text.splitlines()
    assert lines[0].split() == ["figure", "ours", "baseline", "ratio", "target"]
    assert set(lines[1]) == {"-"} and len(lines) == 2 + len(rows)
    assert all(line == line.rstrip() for line in lines)


def test_a_failed_benchmark_is_a_missed_row_and_fails_the_table() -> None:
    met = Figure("append at 100 blocks", 0.001, "s", target=0.005)
    encode = Figure("block encode", 6000, "blocks/s", target=5000, at_least=True)
    rows, ok = table_rows([BenchResult("blocks", 1, (met,)), BenchResult("start", 2, ())])
    assert not ok
    assert rows[0][-1] == "OK" and rows[0][4] == "<= 5.0 ms"
    assert rows[1] == (
        "blocks: a check outside the table failed (exit code 1)",
        *[""] * 4,
        "MISSED",
    )
    assert rows[2] == ("start: failed (exit code 2)", "", "", "", "", "MISSED")
    rows, ok = table_rows([BenchResult("blocks", 0, (met, encode))])
    assert ok
    assert rows[1][1:] == ("6,000 blocks/s", "", "", ">= 5,000 blocks/s", "OK")


def test_the_title_says_whether_the_run_was_quiet_loaded_or_quick() -> None:
    assert run_mode(False, 0) == " (quiet: nothing added beside it)"
    assert "loaded: 2 CPU spinners" in run_mode(False, 2)
    quick_loaded = run_mode(True, 1)
    assert "quick" in quick_loaded and "loaded: 1 CPU spinner" in quick_loaded


def test_a_loaded_run_spins_beside_it_and_stops_its_spinners() -> None:
    def own_children() -> set[int]:
        me = os.getpid()
        return {
            int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == me
        }

    before = own_children()
    with background_load(2):
        spinning = own_children() - before
        assert len(spinning) == 2
    time.sleep(0.05)
    assert not (own_children() & spinning)


def _parent(proc: Path) -> int | None:
    try:
        stat = (proc / "stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_spark_floor_rows_are_informational() -> None:
    from bench import spark_floor

    median = {
        "ours": 1.2,
        "engine": 0.9,
        "datafusion": 0.1,
        "aggregate": 0.3,
        **dict(zip(spark_floor.WAYS, (0.8, 0.6), strict=True)),
    }
    target_row, plain_df, ours_plain, engine_plain, no_output = spark_floor.figures(
        1_000_000, median, 3.0, counted=True
    )
    assert (target_row.ours, target_row.baseline, target_row.ok) == (1.2, 0.1, False)
    assert (plain_df.ours, plain_df.baseline, plain_df.ok) == (0.6, 0.1, None)  # the faster way
    assert (ours_plain.ours, ours_plain.baseline, ours_plain.ok) == (1.2, 0.6, None)
    assert (engine_plain.ours, engine_plain.baseline, engine_plain.ok) == (0.9, 0.6, None)
    assert (no_output.ours, no_output.ok) == (0.3, None)
    rows, ok = table_rows([BenchResult("datafusion", 1, (target_row, plain_df, ours_plain))])
    assert not ok
    assert [r[0] for r in rows if r[5] == "MISSED"] == [target_row.name]
    (differ, *_) = spark_floor.figures(1_000_000, median, 3.0, counted=False)
    assert "RECORD COUNTS DIFFER" in differ.name and differ.ok is False
