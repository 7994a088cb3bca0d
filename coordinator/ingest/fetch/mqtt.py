"""FetchStep::Mqtt: the messages an MQTT broker holds for the dataset, since the last poll.

The dataset subscribes with a persistent session (MQTT 3.1.1, ``clean_session`` off) under a
client id derived from its dataset id, so the broker keeps the messages of its topics (QoS 1
and 2) between polls. A poll connects, subscribes to every topic at its QoS, and collects
messages until none has arrived for ``IDLE_S`` seconds or ``MAX_MESSAGES`` have; the payloads,
trimmed, one per line, are the fetched data, read with the source's reader (NdJson, Csv...).
As in the reference there is no source state and no event time from the source; unlike it,
payloads are separated by newlines, not spaces, so each message is one NDJSON record or CSV
line. No messages: up to date. ``password`` may use ``${{ env.NAME }}``.

Delivery: messages are acknowledged to the broker as they arrive, so a poll whose commit then
fails does not see them again (at most once into the dataset, as the reference).
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from common.odf.fragments import FetchStepMqtt, MqttQos
from coordinator.ingest.errors import UnreachableError
from coordinator.ingest.fetch.result import Fetched, FetchResult, UpToDate
from coordinator.ingest.fetch.templating import render

DEFAULT_PORT = 1883
IDLE_S = 1.0
MAX_MESSAGES = 10_000
CONNECT_TIMEOUT_S = 10.0
DATA_FILE = "mqtt-messages"
_QOS = {None: 0, MqttQos.AT_MOST_ONCE: 0, MqttQos.AT_LEAST_ONCE: 1, MqttQos.EXACTLY_ONCE: 2}


def fetch_mqtt(step: FetchStepMqtt, work_dir: Path, *, client_id: str) -> FetchResult:
    port = step.port or DEFAULT_PORT
    where = f"mqtt://{step.host}:{port}"
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=False,
        protocol=mqtt.MQTTv311,
    )
    if step.username is not None:
        password = render(step.password, field="fetch.password") if step.password else None
        client.username_pw_set(step.username, password)
    messages: queue.Queue[bytes] = queue.Queue()
    subscribed = threading.Event()
    refused: list[str] = []

    def on_connect(c: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            refused.append(str(reason))
            subscribed.set()
            return
        c.subscribe([(t.path, _QOS[t.qos]) for t in step.topics])

    def on_subscribe(c: Any, userdata: Any, mid: Any, reasons: Any, props: Any) -> None:
        failed = [str(r) for r in reasons if r.is_failure]
        if failed:
            refused.append(f"subscription refused: {', '.join(failed)}")
        subscribed.set()

    def on_message(c: Any, userdata: Any, message: Any) -> None:
        messages.put(bytes(message.payload))

    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    try:
        client.connect(step.host, port, keepalive=60)
    except OSError as e:
        raise UnreachableError(f"{where}: cannot connect: {e.strerror or e}") from None
    client.loop_start()
    try:
        if not subscribed.wait(CONNECT_TIMEOUT_S):
            raise UnreachableError(f"{where}: no answer within {CONNECT_TIMEOUT_S:.0f} s")
        if refused:
            raise UnreachableError(f"{where}: {refused[0]}")
        payloads = _collect(messages)
    finally:
        client.disconnect()
        client.loop_stop()
    if not payloads:
        return UpToDate()
    path = work_dir / DATA_FILE
    with open(path, "wb") as out:
        for payload in payloads:
            out.write(payload.strip() + b"\n")
    return Fetched(path=path, name=where, source_state=None, source_event_time=None)


def _collect(messages: queue.Queue[bytes]) -> list[bytes]:
    """Messages until none arrived for ``IDLE_S`` seconds, or ``MAX_MESSAGES`` of them."""
    found: list[bytes] = []
    last = time.monotonic()
    while len(found) < MAX_MESSAGES:
        try:
            found.append(messages.get(timeout=max(0.0, last + IDLE_S - time.monotonic())))
            last = time.monotonic()
        except queue.Empty:
            break
    return found
