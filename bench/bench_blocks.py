"""Throughput of metadata block encoding (+ SHA3 hashing) and decoding.

Workload: a realistic mix of blocks, as in a busy chain: AddData with new data, a checkpoint,
a watermark and source state; ExecuteTransform with two inputs; SetPollingSource with a
fetch, a prepare step, a CSV read, a preprocess query and a merge strategy.

Baselines, measured in the same run on the same blocks:

- the same encoder driving the PyPI ``flatbuffers.Builder`` instead of our fast builder
  (``encode_block_reference``; identical bytes, checked here too);
- the stdlib: ``json.dumps`` of an equivalent dict, then SHA3-256.

The script prints blocks/s for each and the ratios; the target for encode+hash is
5,000 blocks/s.

Run: ``.venv/bin/python bench/bench_blocks.py [--seconds S]``
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import hashlib
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.odf.block import MetadataBlock
from common.odf.events import AddData, ExecuteTransform, SetPollingSource
from common.odf.fragments import (
    Checkpoint,
    CompressionFormat,
    DataSlice,
    ExecuteTransformInput,
    FetchStepUrl,
    MergeStrategyLedger,
    OffsetInterval,
    PrepStepDecompress,
    ReadStepCsv,
    SourceCachingForever,
    SourceState,
    TransformSql,
)
from common.odf.identity import DatasetID
from common.odf.multihash import ARROW0_SHA3_256, Multihash
from common.serde.flatbuffers_codec import (
    block_hash,
    decode_block,
    encode_block,
    encode_block_reference,
)

TARGET_ENCODE_PER_S = 5_000


def realistic_blocks(n: int) -> list[MetadataBlock]:
    """``n`` blocks cycling through the three kinds, all fields varying per block."""
    t0 = datetime(2024, 5, 1, 8, 30, tzinfo=UTC)
    out = []
    for i in range(n):
        prev = Multihash.sha3_256(f"block-{i}".encode())
        when = t0 + timedelta(minutes=i, microseconds=i * 7)
        kind = i % 3
        if kind == 0:
            event: Any = AddData(
                prev_checkpoint=Multihash.sha3_256(f"cp-{i - 1}".encode()),
                prev_offset=i * 1000 - 1 if i else None,
                new_data=DataSlice(
                    logical_hash=Multihash(ARROW0_SHA3_256, hashlib.sha3_256(b"l%d" % i).digest()),
                    physical_hash=Multihash.sha3_256(b"p%d" % i),
                    offset_interval=OffsetInterval(start=i * 1000, end=i * 1000 + 999),
                    size=123_456 + i,
                ),
                new_checkpoint=Checkpoint(physical_hash=Multihash.sha3_256(b"c%d" % i), size=4096),
                new_watermark=when - timedelta(hours=1),
                new_source_state=SourceState(
                    source_name="default", kind="odf/etag", value=f'"etag-{i:08x}"'
                ),
            )
        elif kind == 1:
            event = ExecuteTransform(
                query_inputs=tuple(
                    ExecuteTransformInput(
                        dataset_id=DatasetID.new_seeded(b"input%d" % j),
                        prev_block_hash=Multihash.sha3_256(b"in-prev-%d-%d" % (j, i)),
                        new_block_hash=Multihash.sha3_256(b"in-new-%d-%d" % (j, i)),
                        prev_offset=i * 10 + j,
                        new_offset=i * 10 + j + 9,
                    )
                    for j in range(2)
                ),
                prev_checkpoint=Multihash.sha3_256(b"tcp%d" % i),
                prev_offset=i * 100,
                new_data=DataSlice(
                    logical_hash=Multihash(ARROW0_SHA3_256, hashlib.sha3_256(b"tl%d" % i).digest()),
                    physical_hash=Multihash.sha3_256(b"tp%d" % i),
                    offset_interval=OffsetInterval(start=i * 100 + 1, end=i * 100 + 50),
                    size=9_999,
                ),
                new_checkpoint=Checkpoint(physical_hash=Multihash.sha3_256(b"tc%d" % i), size=77),
                new_watermark=when,
            )
        else:
            event = SetPollingSource(
                fetch=FetchStepUrl(
                    url=f"https://example.org/data/{i}.csv.gz", cache=SourceCachingForever()
                ),
                prepare=(PrepStepDecompress(format=CompressionFormat.GZIP),),
                read=ReadStepCsv(
                    schema=("date TIMESTAMP", "city STRING", "population BIGINT"),
                    header=True,
                    separator=",",
                ),
                preprocess=TransformSql(
                    engine="spark", query="SELECT date AS event_time, city, population FROM input"
                ),
                merge=MergeStrategyLedger(primary_key=("date", "city")),
            )
        out.append(
            MetadataBlock(system_time=when, prev_block_hash=prev, sequence_number=i, event=event)
        )
    return out


def _plain(obj: Any) -> Any:
    """A JSON-ready dict of a model object (the baseline's serialization)."""
    if isinstance(obj, Multihash | DatasetID):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        d = {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        d["kind"] = type(obj).__name__
        return d
    if isinstance(obj, tuple):
        return [_plain(x) for x in obj]
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, enum.Enum):
        return obj.value
    return obj


def json_encode_and_hash(block: MetadataBlock) -> bytes:
    data = json.dumps(_plain(block), separators=(",", ":")).encode()
    return hashlib.sha3_256(data).digest()


def fb_encode_and_hash(block: MetadataBlock) -> bytes:
    return block_hash(encode_block(block)).digest


def reference_encode_and_hash(block: MetadataBlock) -> bytes:
    return block_hash(encode_block_reference(block)).digest


def rate(fn: Callable[[Any], Any], items: list[Any], seconds: float) -> float:
    """Items per second of ``fn`` over ``items`` (cycled), measured for about ``seconds``."""
    for item in items[:30]:
        fn(item)  # warm caches and plans
    done = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for item in items:
            fn(item)
        done += len(items)
        now = time.perf_counter()
        if now >= deadline:
            return done / (now - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    args = parser.parse_args()

    blocks = realistic_blocks(300)
    manifests = [encode_block(b) for b in blocks]
    assert [decode_block(m) for m in manifests] == blocks
    assert [encode_block_reference(b) for b in blocks] == manifests
    sizes = sorted(len(m) for m in manifests)

    baseline = rate(json_encode_and_hash, blocks, args.seconds)
    reference = rate(reference_encode_and_hash, blocks, args.seconds)
    encode = rate(fb_encode_and_hash, blocks, args.seconds)
    decode = rate(decode_block, manifests, args.seconds)

    print(
        f"blocks: {len(blocks)} (AddData / ExecuteTransform / SetPollingSource), "
        f"manifest sizes {sizes[0]}..{sizes[-1]} bytes"
    )
    print(f"baseline json.dumps + sha3   {baseline:10,.0f} blocks/s")
    print(
        f"reference builder + sha3     {reference:10,.0f} blocks/s   "
        f"ratio to baseline {reference / baseline:5.2f}"
    )
    print(
        f"flatbuffers encode + sha3    {encode:10,.0f} blocks/s   "
        f"ratio to baseline {encode / baseline:5.2f}   "
        f"ratio to reference builder {encode / reference:5.2f}   "
        f"target >= {TARGET_ENCODE_PER_S:,}: "
        f"{'OK' if encode >= TARGET_ENCODE_PER_S else 'BELOW'}"
    )
    print(
        f"flatbuffers decode           {decode:10,.0f} blocks/s   "
        f"ratio to baseline {decode / baseline:5.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
