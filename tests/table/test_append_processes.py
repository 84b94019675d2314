"""Append tables under real concurrency: appender processes and compactions of the same table never conflict
(an append only adds files, a compaction only replaces files no append touches)."""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.compaction.job import BucketPlan
from mergetable.metadata.models import CommitMessage

pytestmark = pytest.mark.slow
SCHEMA = pa.schema([("id", pa.int64()), ("w", pa.int64())])
APPENDS = 12


def _append(uri: str, worker: int, go: str) -> None:
    t = mt.open_table(uri)
    while not Path(go).exists():  # start together, so that commits race the compactions
        time.sleep(0.01)
    for i in range(APPENDS):
        t.write(pa.table({"id": [worker * 1000 + i, worker * 1000 + i], "w": [worker, worker]}, schema=SCHEMA))


def test_appender_processes_never_conflict_with_compactions(tmp_path: Path) -> None:
    uri, go = str(tmp_path / "t"), str(tmp_path / "go")
    opts = {"write-only": "true", "commit.max-retries": "200", "commit.max-retry-wait": "100 ms"}
    t = mt.create_table(uri, SCHEMA, options=opts)
    for i in range(5):
        t.write(pa.table({"id": [i], "w": [0]}, schema=SCHEMA))
    ctx = mp.get_context("spawn")

    # one append lands from another process between a compaction's plan and its commit
    job = t.compaction_job()
    run_here = job.executor

    def append_meanwhile(plans: Sequence[BucketPlan]) -> list[CommitMessage]:
        Path(go).touch()
        p = ctx.Process(target=_append, args=(uri, 9, go))
        p.start()
        p.join(120)
        assert p.exitcode == 0
        return run_here(plans)

    job.executor = append_meanwhile
    snap = job.run()
    assert snap is not None and snap.commit_kind.name == "COMPACT"
    Path(go).unlink()

    # then appenders and compactions run at the same time
    procs = [ctx.Process(target=_append, args=(uri, w, go)) for w in (1, 2)]
    for p in procs:
        p.start()
    time.sleep(1)
    Path(go).touch()
    compactions = 0
    while any(p.is_alive() for p in procs) or compactions < 2:
        if mt.open_table(uri).compact(full=True, progress=False) is not None:  # never a CommitConflictError
            compactions += 1
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs)
    assert compactions >= 2

    got = mt.open_table(uri).read().to_pydict()
    expected = {0: [0, 1, 2, 3, 4]} | {w: [x for i in range(APPENDS) for x in (w * 1000 + i,) * 2] for w in (9, 1, 2)}
    for w, ids in expected.items():  # every row once, each appender's rows in the order it committed them
        assert [i for i, ww in zip(got["id"], got["w"], strict=True) if ww == w] == ids
    assert len(got["id"]) == sum(map(len, expected.values()))
    kinds = [s.commit_kind.name for s in mt.open_table(uri).snapshots()]
    assert kinds.count("APPEND") == 5 + 3 * APPENDS and kinds.count("COMPACT") == compactions + 1
