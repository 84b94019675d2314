"""Several OS processes committing to one table at once."""

from __future__ import annotations

import multiprocessing as mp

import pyarrow as pa
import pytest

import mergetable as mt

SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.int32()), ("n", pa.int32())])
WRITERS = 6
COMMITS = 8


def _writer(uri: str, w: int) -> None:
    t = mt.open_table(uri)
    for n in range(COMMITS):
        ids = [w * 1000 + n * 10 + i for i in range(5)]
        t.write(pa.table({"id": ids, "writer": [w] * 5, "n": [n] * 5}, schema=SCHEMA))


@pytest.mark.slow
def test_concurrent_processes_lose_nothing(table_uri: str) -> None:
    mt.create_table(
        table_uri,
        SCHEMA,
        primary_key=["id"],
        options={
            "bucket": "2",
            "commit.max-retries": "200",
            "commit.max-retry-wait": "200ms",
            "manifest.merge-min-count": "4",
        },
    )
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(table_uri, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    t = mt.open_table(table_uri)
    snaps = t.snapshots()
    assert [s.id for s in snaps] == list(range(1, len(snaps) + 1))
    appends = [s for s in snaps if s.commit_kind.value == "APPEND"]
    assert len(appends) == WRITERS * COMMITS
    assert len({(s.commit_user, s.commit_identifier) for s in appends}) == WRITERS * COMMITS
    ids = sorted(t.read().column("id").to_pylist())
    assert ids == sorted(w * 1000 + n * 10 + i for w in range(WRITERS) for n in range(COMMITS) for i in range(5))
    assert snaps[-1].total_record_count == WRITERS * COMMITS * 5
