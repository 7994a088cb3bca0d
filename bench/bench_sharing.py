"""Cloning a dataset over http:// (Simple Transfer Protocol) against a plain parallel download.

Both sides in one run, against one real ``python -m http.server`` serving a workspace's
dataset directory (a root of ``--files`` Parquet slices of random strings, ``--mb`` in all,
at least 200 MB):

- baseline: ``requests`` with the same number of threads fetching ``refs/head``, every block
  and every data file of the dataset into files, nothing checked;
- ours: ``Sharing.pull_remote`` (what ``odf pull URL`` runs): the chain walked block by block
  and validated, every data file streamed, hashed (SHA3-256) and size-checked as it arrives,
  fsync'd, then the atomic commit of a new dataset.

Both in this process, alternating, ``--runs`` times each; the best run of each side is
compared (the machine is shared: the best run is the least disturbed). Printed for each side:
its throughput and its CPU seconds (this process, all threads, plus the server process).
Also printed, not judged: ``odf pull URL`` as a process, and SHA3-256 alone over the same
files with the same threads (every byte must be hashed before it is accepted: the ceiling of
a validating clone). Target: our clone at least 70% of the baseline's throughput. Exits 1
when missed.

    .venv/bin/python bench/bench_sharing.py [--mb 220] [--files 8] [--runs 5] [--parallel 8]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from common.hashing import physical_hash_file  # noqa: E402
from coordinator.app.sharing import Sharing  # noqa: E402
from coordinator.dataset import Dataset  # noqa: E402
from coordinator.sharing.limits import DEFAULT_PARALLEL  # noqa: E402
from coordinator.sharing.transfer import Options  # noqa: E402
from coordinator.workspace import Workspace  # noqa: E402
from tests.support.cli import odf, ok  # noqa: E402
from tests.support.datasets import root  # noqa: E402
from tests.support.ports import free_port, wait_listening  # noqa: E402
from tests.support.workspace import add, new_workspace  # noqa: E402

TARGET = 0.70


def make_dataset(ws: Path, megabytes: int, files: int) -> Path:
    add(ws, root("big", ["id BIGINT", "payload STRING"], read="Parquet"))
    rows_per_file = max(1, megabytes * (1 << 20) // files // 1100)
    for i in range(files):
        ids = pa.array(range(i * rows_per_file, (i + 1) * rows_per_file), pa.int64())
        payload = pa.array([os.urandom(800).hex()[:1024] for _ in range(rows_per_file)])
        path = ws / f"part{i}.parquet"
        pq.write_table(pa.table({"id": ids, "payload": payload}), path, compression="none")
        ok(ws, "ingest", "big", str(path))
        path.unlink()
    return Workspace(ws).open_dataset("big").layout.root


def serve(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=directory,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_listening(port, "http.server", process=proc)
    return proc, f"http://127.0.0.1:{port}"


def plain_download(url: str, keys: list[str], into: Path, threads: int) -> int:
    """Every key fetched into a file, ``threads`` at a time; returns the bytes."""
    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_maxsize=threads)
    session.mount("http://", adapter)

    def one(key: str) -> int:
        target = into / key.replace("/", "_")
        size = 0
        with session.get(f"{url}/{key}", stream=True, timeout=60) as r:
            r.raise_for_status()
            with open(target, "wb") as f:
                for chunk in r.iter_content(1 << 20):
                    f.write(chunk)
                    size += len(chunk)
        return size

    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(one, keys))
    session.close()
    return total


def hash_ceiling(files: list[Path], threads: int) -> float:
    """Bytes per second of the physical hash alone over the data files (read from the page
    cache), ``threads`` at a time: the bound a validating clone cannot beat on this machine."""

    def one(path: Path) -> int:
        physical_hash_file(path)
        return path.stat().st_size

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(one, files))
    return total / (time.perf_counter() - started)


def hash_per_cpu_second(path: Path) -> float:
    """Bytes of the physical hash per CPU second of one thread (best of 3): its cost."""
    size, best = path.stat().st_size, 0.0
    for _ in range(3):
        started = time.thread_time()
        physical_hash_file(path)
        best = max(best, size / max(time.thread_time() - started, 1e-9))
    return best


@dataclass
class Side:
    """One side's runs: throughput (bytes per second) and CPU seconds (this process, all its
    threads, plus the server's) of each."""

    name: str
    rates: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def timed(self, size: int, cpu_now: Callable[[], float], work: Callable[[], int]) -> None:
        cpu_before, started = cpu_now(), time.perf_counter()
        got = work()
        elapsed = time.perf_counter() - started
        assert got == size, f"{self.name}: {got} bytes, expected {size}"
        self.rates.append(size / elapsed)
        self.cpu.append(cpu_now() - cpu_before)


def cpu_seconds(server_pid: int) -> Callable[[], float]:
    """CPU seconds used so far by this process and the server process together."""
    ticks = os.sysconf("SC_CLK_TCK")

    def now() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        fields = Path(f"/proc/{server_pid}/stat").read_text().rsplit(")", 1)[1].split()
        return own.ru_utime + own.ru_stime + (int(fields[11]) + int(fields[12])) / ticks

    return now


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=220, help="size of the dataset's data")
    parser.add_argument("--files", type=int, default=8, help="data files (one ingest each)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--parallel", type=int, default=DEFAULT_PARALLEL)
    args = parser.parse_args()
    plain = Side("plain parallel download")
    ours = Side("odf clone (validated)")
    hashing: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-sharing-") as tmp_name:
        tmp = Path(tmp_name)
        source_ws = new_workspace(tmp / "a")
        dataset_dir = make_dataset(source_ws, args.mb, args.files)
        ds = Dataset(dataset_dir)
        keys = ["refs/head"] + [f"blocks/{h}" for h, _ in ds.iter_blocks()]
        data_files = sorted((dataset_dir / "data").iterdir())
        keys += [f"data/{p.name}" for p in data_files]
        all_bytes = sum((dataset_dir / k).stat().st_size for k in keys)
        data_bytes = sum(p.stat().st_size for p in data_files)
        print(
            f"dataset: {len(keys) - 1} objects ({len(data_files)} data files,"
            f" {data_bytes / 1e6:.1f} MB), {os.cpu_count()} cores,"
            f" {args.parallel} threads on both sides"
        )
        if data_bytes < 200e6:
            print("error: the dataset is under 200 MB; raise --mb", file=sys.stderr)
            return 1
        server, base = serve(dataset_dir.parent)
        url = f"{base}/{dataset_dir.name}"
        cpu_now = cpu_seconds(server.pid)
        print(f"{'run':>3}  {'plain MB/s':>10}  {'clone MB/s':>10}  {'SHA3-256 MB/s':>13}  load")
        try:
            for run in range(args.runs):
                into = tmp / f"plain{run}"
                into.mkdir()

                def download(into: Path = into) -> int:
                    return plain_download(url, keys, into, args.parallel)

                plain.timed(all_bytes, cpu_now, download)
                shutil.rmtree(into)

                ws = Workspace(new_workspace(tmp / f"b{run}"))

                def clone(ws: Workspace = ws) -> int:
                    done = Sharing(ws).pull_remote(
                        url, Options(parallel=args.parallel), as_name="big"
                    )
                    return done.result.bytes

                ours.timed(data_bytes, cpu_now, clone)
                shutil.rmtree(ws.root)
                hashing.append(hash_ceiling(data_files, args.parallel))
                print(
                    f"{run + 1:>3}  {plain.rates[-1] / 1e6:>10.0f}  {ours.rates[-1] / 1e6:>10.0f}"
                    f"  {hashing[-1] / 1e6:>13.0f}  {os.getloadavg()[0]:.1f}"
                )
            sha3_cost = data_bytes / hash_per_cpu_second(data_files[0])
            cli_ws = new_workspace(tmp / "cli")
            started = time.perf_counter()
            result = odf(cli_ws, "pull", url, "--as", "big")
            cli_elapsed = time.perf_counter() - started
            if result.returncode != 0:
                print(f"error: odf pull failed: {result.stderr}", file=sys.stderr)
                return 1
        finally:
            server.terminate()
            server.wait(timeout=10)
    best_plain, best_ours = max(plain.rates), max(ours.rates)
    ratio = best_ours / best_plain
    print(f"best of {args.runs} (the machine is shared: the least disturbed run of each side)")
    for side in (plain, ours):
        print(
            f"  {side.name:<25} {max(side.rates) / 1e6:>5.0f} MB/s"
            f"   CPU {min(side.cpu):.2f} s (client + server, least of the runs)"
        )
    print(
        f"  {'odf pull as a process':<25} {data_bytes / cli_elapsed / 1e6:>5.0f} MB/s"
        f"   ({cli_elapsed:.2f} s, interpreter start and imports included)"
    )
    print(
        f"  {'SHA3-256 alone':<25} {max(hashing) / 1e6:>5.0f} MB/s"
        f"   ({args.parallel} threads, page cache: the bound of any validating clone)"
    )
    print(
        f"CPU: SHA3-256 costs {sha3_cost:.2f} s for these {data_bytes / 1e6:.0f} MB (one thread,"
        f" {data_bytes / sha3_cost / 1e6:.0f} MB per CPU second); on cores kept busy by other"
        f" work a side's throughput follows its CPU need: clone/plain = "
        f"{min(plain.cpu) / min(ours.cpu):.2f}"
    )
    print(f"ratio: {ratio:.2f} (target >= {TARGET:.2f})")
    if ratio < TARGET:
        print(
            f"error: the clone missed its target ({best_ours / 1e6:.0f} MB/s <"
            f" {TARGET:.2f} x {best_plain / 1e6:.0f} MB/s)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
