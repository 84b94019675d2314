"""Writer processes on one dynamic-bucket table, new keys overlapping: no key is ever live in two buckets, and
every write that committed is in the table."""

from __future__ import annotations

import json
import multiprocessing as mp
import random
import time
from pathlib import Path

import pyarrow as pa
from test_dynamic_buckets import SCHEMA, assert_one_bucket_per_key, hash_index, keys_by_bucket

import mergetable as mt
from mergetable.core.dynamic_buckets import key_hashes

WRITERS = 3
COMMITS = 8


def _writer(uri: str, out: str, seed: int, go: str) -> None:
    t = mt.open_table(uri)
    while not Path(go).exists():  # start together, so that commits race
        time.sleep(0.01)
    rnd = random.Random(seed)
    committed: list[int] = []
    conflicts = 0
    for _ in range(COMMITS):
        keys = rnd.sample(range(150), 15)
        data = pa.table({"id": keys, "v": [f"v{k}" for k in keys]}, schema=SCHEMA)
        for _attempt in range(20):
            try:
                t.write(data)
            except mt.BucketAssignmentConflictError:
                conflicts += 1  # another writer placed one of these new keys first: write them again
                continue
            committed += keys
            break
    Path(out).write_text(json.dumps({"committed": committed, "conflicts": conflicts}))


def test_writer_processes_never_put_a_key_in_two_buckets(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(
        uri,
        SCHEMA,
        ["id"],
        options={"dynamic-bucket.target-row-num": "12", "commit.max-retries": "100", "commit.max-retry-wait": "100 ms"},
    )
    ctx = mp.get_context("spawn")
    go = str(tmp_path / "go")
    procs = [ctx.Process(target=_writer, args=(uri, str(tmp_path / f"w{i}.json"), i, go)) for i in range(WRITERS)]
    for p in procs:
        p.start()
    time.sleep(1)
    Path(go).touch()
    for p in procs:
        p.join(240)
    assert all(p.exitcode == 0 for p in procs)
    results = [json.loads((tmp_path / f"w{i}.json").read_text()) for i in range(WRITERS)]
    committed = {k for r in results for k in r["committed"]}
    assert len([s for s in t.snapshots() if s.commit_kind.name == "APPEND"]) == sum(
        len(r["committed"]) // 15 for r in results
    )
    got = t.read().sort_by("id").to_pydict()
    assert got["id"] == sorted(committed)  # no committed write lost, nothing else
    assert got["v"] == [f"v{k}" for k in sorted(committed)]
    assert_one_bucket_per_key(t)
    index = hash_index(t)
    for (partition, bucket), ids in keys_by_bucket(t).items():
        assert set(key_hashes([pa.array(sorted(ids), pa.int64())]).tolist()) <= set(index[(partition, bucket)].tolist())
    # writers that fill one bucket at the same time may take it past the target together, each to it at most
    assert len(index) > 1 and max(len(h) for h in index.values()) <= WRITERS * 12
