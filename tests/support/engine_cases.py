"""Engine conformance case files for tests (the format: ``coordinator/conformance/cases``)."""

from __future__ import annotations

MINIMAL = """\
case: minimal
spec: "Engine Contract"
inputs:
  - alias: events
    columns: {n: int64}
transform:
  spark:
    queries:
      - query: SELECT event_time, n FROM events
transactions:
  - inputs:
      events:
        rows:
          - {event_time: "00:01", n: 1}
        watermark: 2024-01-01T00:01:00Z
    expect:
      order: ordered
      records:
        - {event_time: "00:01", n: 1}
"""
"""One input, a pass-through query and one transaction: the smallest valid case."""
