"""The engine's phase recording (``engine_spark/phases.py``), without a JVM."""

from __future__ import annotations

import os
import time

from engine_spark.phases import phase, process_cpu, recording


def test_phases_entered_again_add_up_in_the_order_first_entered() -> None:
    with recording(os.getpid()) as rec:
        for _ in range(3):
            with phase("parse"):
                time.sleep(0.002)
        with phase("job"):
            sum(range(200_000))
    assert list(rec.phases) == ["parse", "job"]
    wall, cpu, jvm = rec.phases["parse"]
    assert wall >= 0.006 and cpu >= 0 and jvm >= 0
    assert rec.phases["job"][1] > 0


def test_a_phase_outside_a_recording_records_nothing_and_a_recording_ends_with_its_block() -> None:
    with phase("alone"):
        pass
    with recording() as rec, phase("inside"):
        pass
    with phase("after"):
        pass
    assert list(rec.phases) == ["inside"]
    assert rec.phases["inside"][2] == 0.0  # no JVM asked for


def test_process_cpu_reads_this_process_and_is_zero_for_one_that_is_gone() -> None:
    sum(range(2_000_000))
    assert process_cpu(os.getpid()) > 0
    assert process_cpu(2**22 + 7) == 0.0
