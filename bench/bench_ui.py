"""The web UI's page times on a warm daemon (issue 30): the list on a workspace with 200
datasets, a dataset's pages with 5,000 blocks.

Workload, built through the dataset layer (no CLI call per block): 200 root datasets, each
with a push source and a description, one in four with an ingested CSV; one of them, ``long``,
with an ingested CSV and then 5,000 more blocks in one commit (watermark moves, so the chain
is 5,000 blocks deep), and a last ingest (the latest records on top, as usual). Then
``odf serve`` runs on it; the bench logs in, requests every page a few times to warm it, and
times ``--repeats`` requests of each (the median is reported,
the 95th percentile printed): the list (default and sorted by records), ``long``'s overview,
history (first page), data (latest records) and lineage, and ``long``'s history page 50
(``from`` a block 2,500 deep). Targets: list < 300 ms, a dataset page < 500 ms.

Run: ``.venv/bin/python bench/bench_ui.py [--datasets 200] [--blocks 5000] [--repeats 20]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.figures import Figure, add_json_argument, write_json
from common.odf.events import AddData, AddPushSource, SetInfo
from common.odf.fragments import DatasetKind, MergeStrategyAppend, ReadStepCsv
from common.odf.snapshot import DatasetSnapshot
from coordinator.app import Application, IngestFile
from coordinator.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]
LOOPBACK = ("--address", "127.0.0.1:0", "--http-address", "127.0.0.1:0")
LIST_TARGET_S = 0.3
PAGE_TARGET_S = 0.5


def build(root: Path, datasets: int, blocks: int) -> None:
    ws = Workspace.init(root)
    app = Application(ws)
    csv = root / "rows.csv"
    csv.write_text("id,v\n" + "".join(f"{i},value {i}\n" for i in range(100)))
    source = AddPushSource(
        source_name="main",
        read=ReadStepCsv(header=True, schema=("id BIGINT", "v STRING")),
        merge=MergeStrategyAppend(),
    )
    started = time.perf_counter()
    for i in range(datasets):
        name = "long" if i == 0 else f"ds{i:04d}"
        info = SetInfo(description=f"# Dataset {i}\n\nA dataset of the UI benchmark.")
        ws.create_dataset(
            DatasetSnapshot(name=name, kind=DatasetKind.ROOT, metadata=(source, info))
        )
        if i % 4 == 0:
            list(app.ingest(name, [IngestFile(csv, "rows.csv")]))
    ds = ws.open_dataset("long")
    state = ds.state()
    t0 = state.last_watermark or datetime(2020, 1, 1, tzinfo=UTC)
    events = [
        AddData(prev_offset=state.last_offset, new_watermark=t0 + timedelta(microseconds=i + 1))
        for i in range(blocks)
    ]
    ds.commit_events(events, expected_head=state.head)
    list(app.ingest("long", [IngestFile(csv, "rows.csv")]))  # the latest records on top
    for summary in app.list_datasets():  # the state caches, as any daemon would have them
        assert summary.error is None, summary
    print(
        f"built {datasets} datasets, `long` with {ds.state().sequence_number + 1} blocks,"
        f" in {time.perf_counter() - started:.1f} s"
    )


def serve(root: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "serve", *LOOPBACK],
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    info_path = root / ".odf" / "run" / "daemon.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if info_path.is_file():
            info = json.loads(info_path.read_text())
            if info["pid"] == process.pid:
                token = (root / ".odf" / "run" / "token").read_text().strip()
                return process, f"http://{info['httpAddress']}", token
        if process.poll() is not None:
            raise SystemExit(f"odf serve exited with {process.returncode}")
        time.sleep(0.05)
    process.kill()
    raise SystemExit("odf serve did not start within 60 s")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def login(base: str, token: str) -> str:
    opener = urllib.request.build_opener(NoRedirect)
    data = urllib.parse.urlencode({"token": token}).encode()
    request = urllib.request.Request(base + "/ui/login", data=data, headers={"Origin": base})
    try:
        opener.open(request, timeout=30)
    except urllib.error.HTTPError as e:
        if e.code != 303:
            raise
        return str(e.headers["Set-Cookie"]).split(";")[0]
    raise SystemExit("login did not redirect")


def fetch(url: str, cookie: str) -> float:
    started = time.perf_counter()
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    with urllib.request.urlopen(request, timeout=60) as reply:
        body = reply.read()
        assert reply.status == 200 and body.endswith(b"</html>"), url
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=200)
    parser.add_argument("--blocks", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=20)
    add_json_argument(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        build(root, args.datasets, args.blocks)
        process, base, token = serve(root)
        try:
            cookie = login(base, token)
            deep = [h for h, _ in Workspace(root).open_dataset("long").iter_blocks()][
                args.blocks // 2
            ].to_multibase()
            pages = {
                f"ui list page ({args.datasets} datasets)": ("/ui/", LIST_TARGET_S),
                "ui list sorted by records": ("/ui/?sort=records&desc=1", LIST_TARGET_S),
                f"ui dataset overview ({args.blocks} blocks)": ("/ui/datasets/long", PAGE_TARGET_S),
                "ui dataset history": ("/ui/datasets/long?tab=history", PAGE_TARGET_S),
                "ui dataset history, deep page": (
                    f"/ui/datasets/long?tab=history&from={deep}",
                    PAGE_TARGET_S,
                ),
                "ui dataset data": ("/ui/datasets/long?tab=data", PAGE_TARGET_S),
                "ui dataset lineage": ("/ui/datasets/long?tab=lineage", PAGE_TARGET_S),
                "ui dataset schema": ("/ui/datasets/long?tab=schema", PAGE_TARGET_S),
            }
            figures = []
            for name, (path, target) in pages.items():
                for _ in range(3):
                    fetch(base + path, cookie)
                times = sorted(fetch(base + path, cookie) for _ in range(args.repeats))
                median = statistics.median(times)
                p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
                print(f"{name:42s} median {median * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms")
                figures.append(Figure(name, median, "s", target=target))
        finally:
            process.terminate()
            process.wait(60)
    write_json(args.json, figures)
    return 0 if all(f.ok for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
