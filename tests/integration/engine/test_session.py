"""The engine's JVM, as ``session.py`` configures it."""

from __future__ import annotations

from typing import Any

import pytest

from engine_spark.engine import SparkEngine

pytestmark = pytest.mark.spark


def test_the_driver_jvm_exits_when_out_of_heap(spark_engine: SparkEngine) -> None:
    jvm: Any = spark_engine.session.sparkContext._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )
    option = bean.getVMOption("ExitOnOutOfMemoryError")
    assert option.getValue() == "true"
    # Set by the engine's own Java options, not by JAVA_TOOL_OPTIONS of whoever started it.
    assert option.getOrigin().toString() == "VM_CREATION"
