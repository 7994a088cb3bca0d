"""The daemon's Prometheus metrics (``GET /metrics`` on its HTTP address).

- ``odf_calls_total{call,outcome}`` and ``odf_call_seconds{call}``: API calls and scheduled
  work (``ingest``, ``pull``, ``query``, ``verify``, ``set_transform``, ``scheduled``);
- ``odf_transactions_total``, ``odf_records_total{kind}`` (``ingest``, ``transform``),
  ``odf_bytes_received_total`` (uploads);
- ``odf_queue_depth``: datasets waiting in the scheduler's queue;
- ``odf_engine_starts_total``, ``odf_engine_restarts_total``, ``odf_engine_idle_stops_total``,
  ``odf_engines_running``: the warm engine pool;
- ``odf_errors_total{call}``: calls and scheduled work that failed;
- ``odf_http_refused_total{why}``: HTTP connections refused over a cap (``cap``) or cut at a
  deadline (``header``, ``body``, ``idle``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from coordinator.engine.pool import PoolStats

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.calls = Counter(
            "odf_calls", "API calls and scheduled work", ["call", "outcome"], registry=r
        )
        self.seconds = Histogram("odf_call_seconds", "Duration of calls", ["call"], registry=r)
        self.errors = Counter("odf_errors", "Calls that failed", ["call"], registry=r)
        self.transactions = Counter("odf_transactions", "Transactions committed", registry=r)
        self.records = Counter("odf_records", "Records committed", ["kind"], registry=r)
        self.bytes_in = Counter("odf_bytes_received", "Bytes uploaded for ingest", registry=r)
        self.http_refused = Counter(
            "odf_http_refused",
            "HTTP connections refused over a cap or cut at a deadline",
            ["why"],
            registry=r,
        )
        self.queue_depth = Gauge(
            "odf_queue_depth", "Datasets waiting for the scheduler", registry=r
        )

    def watch_pool(self, stats: Callable[[], PoolStats | None]) -> None:
        """Export the engine pool's counters (read when scraped)."""
        self.registry.register(_PoolCollector(stats))

    @contextmanager
    def timed(self, call: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        except BaseException:
            self.calls.labels(call, "error").inc()
            self.errors.labels(call).inc()
            raise
        finally:
            self.seconds.labels(call).observe(time.monotonic() - started)
        self.calls.labels(call, "ok").inc()

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))


class _PoolCollector(Collector):
    def __init__(self, stats: Callable[[], PoolStats | None]) -> None:
        self._stats = stats

    def collect(self) -> Iterable[Metric]:
        s = self._stats() or PoolStats()
        yield CounterMetricFamily("odf_engine_starts", "Engines started", value=s.starts)
        yield CounterMetricFamily(
            "odf_engine_restarts", "Engines started again after they died", value=s.restarts
        )
        yield CounterMetricFamily(
            "odf_engine_idle_stops", "Engines stopped after the idle timeout", value=s.idle_stops
        )
        yield GaugeMetricFamily("odf_engines_running", "Warm engines", value=s.running)
