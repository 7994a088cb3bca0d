"""The Mqtt polling source against a real broker (Mosquitto, installed by
scripts/install-system.sh), through ``odf pull``."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from tests.support.cli import odf, ok
from tests.support.ports import free_port, wait_listening
from tests.support.workspace import dataset, new_workspace

pytestmark = pytest.mark.e2e

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
TOPIC = "odf/test/readings"
SNAPSHOT = """\
kind: DatasetSnapshot
version: 1
content:
  name: readings
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Mqtt
        host: 127.0.0.1
        port: {port}
        topics:
          - path: {topic}
            qos: AtLeastOnce
      read:
        kind: NdJson
        schema: ["sensor STRING", "value BIGINT"]
      merge:
        kind: Append
"""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[int]:
    if not Path(MOSQUITTO).exists():
        pytest.fail("mosquitto is missing: run scripts/install-system.sh (make install)")
    port = free_port()
    config = tmp_path / "mosquitto.conf"
    config.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    process = subprocess.Popen(
        [MOSQUITTO, "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_listening(port, "mosquitto", process=process)
        yield port
    finally:
        process.terminate()
        process.wait(10)


def publish(port: int, *records: dict[str, object]) -> None:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="odf-test-publisher")
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        for record in records:
            client.publish(TOPIC, json.dumps(record), qos=1).wait_for_publish(10)
    finally:
        client.disconnect()
        client.loop_stop()


def test_mqtt_messages_since_the_last_poll_are_ingested(tmp_path: Path, broker: int) -> None:
    ws = new_workspace(tmp_path / "ws")
    (ws / "readings.yaml").write_text(SNAPSHOT.format(port=broker, topic=TOPIC))
    ok(ws, "add", "readings.yaml")
    # The first poll subscribes (the broker keeps the session): nothing to ingest yet.
    assert ok(ws, "pull", "readings") == "readings: up to date\n"
    publish(broker, {"sensor": "a", "value": 1}, {"sensor": "b", "value": 2})
    out = ok(ws, "pull", "readings")  # published while no client was connected
    assert out.startswith("readings: 2 records from the polling source (head f1620")
    publish(broker, {"sensor": "a", "value": 3})
    assert ok(ws, "pull", "readings").startswith("readings: 1 record from the polling source")
    assert ok(ws, "pull", "readings") == "readings: up to date\n"
    values = ok(ws, "sql", "-c", "SELECT sensor, value FROM readings ORDER BY value", "-o", "csv")
    assert values.splitlines()[1:] == ["a,1", "b,2", "a,3"]
    assert dataset(ws, "readings").state().num_records == 3
    assert "readings: ok" in ok(ws, "verify", "readings")


def test_an_unreachable_broker_is_one_clear_error(tmp_path: Path) -> None:
    ws = new_workspace(tmp_path / "ws")
    (ws / "readings.yaml").write_text(SNAPSHOT.format(port=free_port(), topic=TOPIC))
    ok(ws, "add", "readings.yaml")
    result = odf(ws, "pull", "readings")
    assert result.returncode == 1
    assert result.stderr.startswith("error: mqtt://127.0.0.1:")
    assert "cannot connect: Connection refused" in result.stderr
    assert dataset(ws, "readings").state().num_records == 0
