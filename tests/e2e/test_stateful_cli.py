"""Stateful derivatives through the CLI: one derivative per operator, pulled over several
rounds with the embedded engine; the workspace is moved between rounds (the streaming state
in the checkpoints must not depend on where the datasets are), then ``odf verify
--recursive`` replays every transaction byte for byte.

Watermarks come from ingest (the newest event time ingested so far), so a window closes in
the round whose data passes its end.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coordinator.workspace import Workspace
from tests.integration.transform.pipeline import records, records_of_first, transaction_slices
from tests.support.cli import ok
from tests.support.datasets import derivative, root
from tests.support.images import BuiltImage

ROOTS = {
    "readings": root(
        "readings", ["event_time TIMESTAMP", "sensor STRING", "value BIGINT"], source="default"
    ),
    "views": root(
        "views", ["event_time TIMESTAMP", "user STRING", "page STRING"], source="default"
    ),
    "clicks": root(
        "clicks", ["event_time TIMESTAMP", "user STRING", "ad STRING"], source="default"
    ),
}
DERIVATIVES = {
    "hourly": derivative(
        "hourly",
        "SELECT window.end AS event_time, sensor, sum(value) AS total FROM readings "
        "GROUP BY window(event_time, '1 hour'), sensor",
        ["readings"],
    ),
    "sessions": derivative(
        "sessions",
        "SELECT session_window.end AS event_time, sensor, count(*) AS n FROM readings "
        "GROUP BY session_window(event_time, '20 minutes'), sensor",
        ["readings"],
    ),
    "sliding": derivative(
        "sliding",
        "SELECT window.end AS event_time, sensor, sum(value) AS total FROM readings "
        "GROUP BY window(event_time, '2 hours', '1 hour'), sensor",
        ["readings"],
    ),
    "distinct": derivative(
        "distinct", "SELECT DISTINCT event_time, sensor FROM readings", ["readings"]
    ),
    "last-page": derivative(
        "last-page",
        "SELECT event_time, user, ad, max_by(page, seen) AS page FROM ("
        "SELECT c.event_time, c.user, c.ad, v.event_time AS seen, v.page FROM clicks c "
        "JOIN views v ON c.user = v.user "
        "AND v.event_time BETWEEN c.event_time - INTERVAL 1 HOUR AND c.event_time) "
        "GROUP BY event_time, user, ad",
        ["clicks", "views"],
    ),
    "totals": derivative(
        "totals",
        "SELECT max(event_time) AS event_time, sensor, sum(value) AS total FROM readings "
        "GROUP BY sensor",
        ["readings"],
    ),
    "top-value": derivative(
        "top-value",
        "SELECT event_time, sensor, value, rn FROM (SELECT event_time, sensor, value, "
        "row_number() OVER (PARTITION BY sensor ORDER BY value DESC, event_time) AS rn "
        "FROM readings) WHERE rn <= 1",
        ["readings"],
    ),
    "attributed": derivative(
        "attributed",
        "SELECT v.event_time, v.user, v.page, c.ad FROM views v JOIN clicks c "
        "ON v.user = c.user AND c.event_time BETWEEN v.event_time "
        "AND v.event_time + INTERVAL 30 MINUTES",
        ["views", "clicks"],
    ),
    "as-of-page": derivative(
        "as-of-page",
        "SELECT c.event_time, c.user, c.ad, v.page FROM clicks AS c LEFT JOIN LATERAL ("
        "SELECT p.* FROM views AS p WHERE p.user = c.user AND p.event_time <= c.event_time "
        "ORDER BY p.event_time DESC, p.offset DESC LIMIT 1) AS v ON true",
        ["clicks", "views"],
        temporal_tables={"views": ["user"]},
    ),
}
ROUNDS = [
    {
        "readings": "event_time,sensor,value\n"
        "2024-01-01T00:10:00Z,a,1\n2024-01-01T00:50:00Z,b,2\n2024-01-01T00:20:00Z,a,3\n",
        "views": "event_time,user,page\n2024-01-01T00:00:00Z,u1,home\n"
        "2024-01-01T00:30:00Z,u2,faq\n",
        "clicks": "event_time,user,ad\n2024-01-01T00:05:00Z,u9,x\n",
    },
    {
        # 00:15 is late for hourly (the watermark is 00:50): dropped everywhere
        "readings": "event_time,sensor,value\n"
        "2024-01-01T00:15:00Z,a,100\n2024-01-01T01:30:00Z,a,4\n",
        "clicks": "event_time,user,ad\n2024-01-01T00:40:00Z,u2,ad2\n",
        "views": "event_time,user,page\n2024-01-01T00:45:00Z,u3,pricing\n",
    },
    {
        "readings": "event_time,sensor,value\n2024-01-01T03:00:00Z,b,5\n",
        "clicks": "event_time,user,ad\n2024-01-01T02:00:00Z,u3,late\n",
        "views": "event_time,user,page\n2024-01-01T03:00:00Z,u4,home\n",
    },
]


IN_THE_IMAGE = ("hourly", "sessions", "attributed", "as-of-page")
"""One derivative per runner family (windows, sessions, interval join, as-of join) in the
image: the same engine code as embedded, so a subset shows the image's state carries over."""
IMAGE_ROUNDS = 2
"""Rounds in the image: the second reads the first's state (hourly's first window closes,
attributed's and as-of-page's clicks find the first round's views) after the move."""


def t(hh_mm: str) -> datetime:
    return datetime.fromisoformat(f"2024-01-01T{hh_mm}:00+00:00").astimezone(UTC)


def run_rounds(
    base: Path,
    config: str | None = None,
    derivatives: tuple[str, ...] = (),
    rounds: int = len(ROUNDS),
) -> Path:
    """The first ``rounds`` rounds ingested and pulled; the workspace moves before the last
    one. With ``derivatives``, only those (and every root)."""
    ws = base / "first-home"
    ws.mkdir()
    ok(ws, "init")
    if config is not None:
        (ws / ".odf" / "config.yaml").write_text(config)
    snapshots = base / "snapshots"
    snapshots.mkdir()
    chosen = {n: d for n, d in DERIVATIVES.items() if not derivatives or n in derivatives}
    for name, text in {**ROOTS, **chosen}.items():
        (snapshots / f"{name}.yaml").write_text(text)
    ok(ws, "add", "--recursive", str(snapshots))
    for index, files in enumerate(ROUNDS[:rounds]):
        if index == rounds - 1:  # the whole workspace moves between rounds
            moved = base / "second-home"
            shutil.move(ws, moved)
            ws = moved
        for name, text in files.items():
            path = base / f"{name}-{index}.csv"
            path.write_text(text)
            ok(ws, "ingest", name, str(path))
        ok(ws, "pull", "--all", "--system-time", f"2030-01-0{index + 1}T00:00:00Z")
    return ws


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_rounds(tmp_path_factory.mktemp("stateful"))


def rows(ws: Path, name: str, *columns: str) -> list[tuple[object, ...]]:
    table = records(Workspace(ws).open_dataset(name))
    return [tuple(r[c] for c in columns) for r in table.to_pylist()]


@pytest.mark.e2e
def test_each_operator_emits_what_the_semantics_say_over_rounds(workspace: Path) -> None:
    assert rows(workspace, "hourly", "op", "event_time", "sensor", "total") == [
        (0, t("01:00"), "a", 4),
        (0, t("01:00"), "b", 2),
        (0, t("02:00"), "a", 4),
    ]
    assert rows(workspace, "sessions", "event_time", "sensor", "n") == [
        (t("00:40"), "a", 2),
        (t("01:10"), "b", 1),
        (t("01:50"), "a", 1),
    ]
    assert rows(workspace, "totals", "op", "sensor", "total") == [
        (0, "a", 4),
        (0, "b", 2),
        (2, "a", 4),
        (3, "a", 8),
        (2, "b", 2),
        (3, "b", 7),
    ]
    # The top value per sensor: a changelog of its one rank.
    assert rows(workspace, "top-value", "op", "event_time", "sensor", "value") == [
        (0, t("00:20"), "a", 3),
        (0, t("00:50"), "b", 2),
        (2, t("00:20"), "a", 3),
        (3, t("01:30"), "a", 4),
        (2, t("00:50"), "b", 2),
        (3, t("03:00"), "b", 5),
    ]
    assert rows(workspace, "attributed", "event_time", "user", "ad") == [
        (t("00:30"), "u2", "ad2"),
    ]
    assert rows(workspace, "sliding", "event_time", "sensor", "total") == [
        (t("01:00"), "a", 4),
        (t("01:00"), "b", 2),
        (t("02:00"), "a", 8),
        (t("02:00"), "b", 2),
        (t("03:00"), "a", 4),
    ]
    # 03:00 b is at the last watermark (03:00): a record at 03:00 is still on time, so the
    # row waits for the watermark to pass it
    assert rows(workspace, "distinct", "event_time", "sensor") == [
        (t("00:10"), "a"),
        (t("00:20"), "a"),
        (t("00:50"), "b"),
        (t("01:30"), "a"),
    ]
    # The page each click's user viewed last within the hour before the click (as-of join).
    assert rows(workspace, "last-page", "event_time", "user", "page") == [
        (t("00:40"), "u2", "faq"),
    ]
    # The page each click's user viewed last before the click, from any earlier round
    # (event-time as-of join): a click waits until the views' watermark reaches it.
    assert rows(workspace, "as-of-page", "event_time", "user", "page") == [
        (t("00:05"), "u9", None),
        (t("00:40"), "u2", "faq"),
        (t("02:00"), "u3", "pricing"),
    ]


@pytest.mark.e2e
def test_verify_replays_every_stateful_transaction_after_the_move(workspace: Path) -> None:
    out = ok(workspace, "verify", "--recursive", *DERIVATIVES)
    assert "ok" in out.lower()


@pytest.mark.e2e
@pytest.mark.containerized
def test_the_engine_image_gives_the_same_records(
    workspace: Path, engine_image: BuiltImage, tmp_path: Path
) -> None:
    """The image's first rounds give the embedded run's first transactions: the same slices
    (offsets and logical hashes) and records."""
    in_container = run_rounds(tmp_path, engine_image.engine_config, IN_THE_IMAGE, IMAGE_ROUNDS)
    for name in IN_THE_IMAGE:
        got, embedded = (Workspace(w).open_dataset(name) for w in (in_container, workspace))
        slices = transaction_slices(got)
        assert len(slices) == IMAGE_ROUNDS, name
        assert slices == transaction_slices(embedded)[:IMAGE_ROUNDS], name
        produced = records(got).drop_columns(["system_time"])
        assert produced.num_rows > 0, name
        assert produced == records_of_first(embedded, IMAGE_ROUNDS).drop_columns(["system_time"]), (
            name
        )
