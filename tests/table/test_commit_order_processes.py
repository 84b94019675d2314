"""OS processes upserting the same keys, with and without a full-compaction process: every snapshot holds
exactly what replaying its commits in snapshot order gives, and the last committed value of a key wins."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.metadata.models import CommitKind

pytestmark = pytest.mark.slow
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])
WRITERS = 4
COMMITS = 30
KEYS = 20


def _writer(uri: str, w: int, out: str) -> None:
    t = mt.open_table(uri)
    rnd = random.Random(w)
    log: dict[int, list[tuple[int, str, str]]] = {}
    for n in range(1, COMMITS + 1):
        keys = rnd.sample(range(KEYS), rnd.randint(1, 8))
        kinds = [rnd.choice(["+I", "+U", "+U", "-D"]) for _ in keys]
        values = [f"w{w}.{n}.{i}" for i in range(len(keys))]
        writer = t.new_writer()
        writer.write(pa.table({"k": keys, "v": values}, schema=SCHEMA), row_kind=kinds)
        t.commit(writer.prepare_commit(), commit_user=f"writer-{w}", identifier=n)
        log[n] = list(zip(keys, kinds, values, strict=True))
    Path(out).write_text(json.dumps(log))


def _compactor(uri: str, stop: str, out: str) -> None:
    t = mt.open_table(uri)
    done = conflicts = 0
    while not os.path.exists(stop):
        try:
            if t.compact(full=True) is not None:
                done += 1
        except mt.CommitConflictError:
            conflicts += 1
        time.sleep(0.005)
    Path(out).write_text(json.dumps({"done": done, "conflicts": conflicts}))


@pytest.mark.parametrize("compactor", [False, True], ids=["writers", "writers+compactor"])
def test_every_snapshot_equals_the_commit_order_oracle(tmp_path: Path, compactor: bool) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(
        uri,
        SCHEMA,
        primary_key=["k"],
        options={"bucket": "2", "commit.max-retries": "200", "commit.max-retry-wait": "100 ms"},
    )
    ctx = mp.get_context("spawn")
    stop = str(tmp_path / "stop")
    procs = [ctx.Process(target=_writer, args=(uri, w, str(tmp_path / f"w{w}.json"))) for w in range(WRITERS)]
    if compactor:
        procs.append(ctx.Process(target=_compactor, args=(uri, stop, str(tmp_path / "compactor.json"))))
    for p in procs:
        p.start()
    for p in procs[:WRITERS]:
        p.join(120)
    Path(stop).touch()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0

    logs = {
        f"writer-{w}": {int(n): c for n, c in json.loads((tmp_path / f"w{w}.json").read_text()).items()}
        for w in range(WRITERS)
    }
    oracle: dict[int, str] = {}
    applied = 0
    compactions = 0
    for snap in t.snapshots():
        if snap.commit_kind is CommitKind.COMPACT:
            compactions += 1
        else:
            for k, kind, v in logs[snap.commit_user][snap.commit_identifier]:
                if kind == "-D":
                    oracle.pop(k, None)
                else:
                    oracle[k] = v
            applied += 1
        got = {r["k"]: r["v"] for r in t.read(snapshot_id=snap.id).to_pylist()}
        assert got == oracle, f"snapshot {snap.id} ({snap.commit_kind.value} by {snap.commit_user})"
    assert applied == WRITERS * COMMITS
    if compactor:
        stats: dict[str, Any] = json.loads((tmp_path / "compactor.json").read_text())
        assert stats["done"] > 0, stats
    # the final state is the last committed value of every key
    last: dict[int, str | None] = {}
    for snap in t.snapshots():
        if snap.commit_kind is not CommitKind.COMPACT:
            for k, kind, v in logs[snap.commit_user][snap.commit_identifier]:
                last[k] = None if kind == "-D" else v
    assert {r["k"]: r["v"] for r in t.read().to_pylist()} == {k: v for k, v in last.items() if v is not None}
    assert compactions > 0
