"""OS processes racing rollbacks (or restores) with two writers, snapshot expiration and orphan cleaning.

Afterwards every snapshot must read, every file a snapshot or tag holds must exist, the ids must have no gap,
and every snapshot's rows must equal the oracle: writers' commits applied in snapshot order, a rollback's or
restore's snapshot equal to its target's state.
"""

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
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager

pytestmark = pytest.mark.slow
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])
KEYS = 12
SECONDS = 5.0
ORPHAN_AGE_MS = 4_000  # files of commits in flight are younger than this
OPTIONS = {
    "bucket": "2",
    "write-only": "true",
    "commit.max-retries": "400",
    "commit.min-retry-wait": "1 ms",
    "commit.max-retry-wait": "30 ms",
    "commit.timeout": "1500 ms",
}


def _until(stop: str, deadline: float) -> bool:
    return time.time() < deadline and not os.path.exists(stop)


def _writer(uri: str, w: int, deadline: float, stop: str, out: str) -> None:
    t = mt.open_table(uri)
    rnd = random.Random(w)
    log: dict[int, list[tuple[int, str]]] = {}
    failed = n = 0
    while _until(stop, deadline):
        n += 1
        keys = rnd.sample(range(KEYS), rnd.randint(1, 4))
        rows = [(k, f"w{w}.{n}.{i}") for i, k in enumerate(keys)]
        writer = t.new_writer()
        writer.write(pa.table({"k": [k for k, _ in rows], "v": [v for _, v in rows]}, schema=SCHEMA))
        try:
            snap = t.commit(writer.prepare_commit(), commit_user=f"writer-{w}", identifier=n)
        except mt.CommitConflictError:  # gave up after commit.timeout: nothing committed, files removed
            failed += 1
            continue
        assert snap is not None
        log[snap.id] = rows
    Path(out).write_text(json.dumps({"log": log, "failed": failed}))


def _rewinder(uri: str, op: str, deadline: float, stop: str, out: str) -> None:
    t = mt.open_table(uri)
    rnd = random.Random(7)
    log: dict[int, int] = {}
    missed = 0
    while _until(stop, deadline):
        ids = SnapshotManager(t.fileio).list_ids()
        target = rnd.choice(ids[-6:])
        try:
            if op == "rollback":
                committed = t.rollback_to(snapshot_id=target).committed
            else:
                snap = t.restore(snapshot_id=target)
                committed = snap.id if snap is not None else None
        except (mt.SnapshotNotFoundError, mt.CommitConflictError):  # expired meanwhile, or starved: typed
            missed += 1
            continue
        if committed is not None:
            log[committed] = target
        time.sleep(0.05)
    Path(out).write_text(json.dumps({"log": log, "missed": missed}))


def _expirer(uri: str, deadline: float, stop: str, out: str) -> None:
    t = mt.open_table(uri)
    expired = 0
    while _until(stop, deadline):
        expired += len(t.expire_snapshots(retain_last=4).expired_snapshots)
        time.sleep(0.02)
    Path(out).write_text(json.dumps({"expired": expired}))


def _cleaner(uri: str, deadline: float, stop: str, out: str) -> None:
    t = mt.open_table(uri)
    deleted = 0
    while _until(stop, deadline):
        cutoff = int(time.time() * 1000) - ORPHAN_AGE_MS
        deleted += len(t.remove_orphan_files(older_than_ms=cutoff, force=True))
        time.sleep(0.05)
    Path(out).write_text(json.dumps({"deleted": deleted}))


def _live_files_exist(t: mt.Table) -> None:
    manifests = ManifestIO(t.fileio)
    holders: list[Any] = [*SnapshotManager(t.fileio).snapshots(), *t.tags().values()]
    for snap in holders:
        entries = [*manifests.live_entries(snap), *manifests.changelog_entries(snap)]
        missing = [e.file.file_name for e in entries if not os.path.exists(t.path_factory.data_file(
            e.partition, e.bucket, e.file.file_name))]  # fmt: skip
        assert missing == [], f"snapshot {snap.id} holds deleted files"


@pytest.mark.parametrize("op", ["rollback", "restore"])
def test_rewinding_races_writers_expiration_and_orphan_cleaning(tmp_path: Path, op: str) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, SCHEMA, primary_key=["k"], options=OPTIONS)
    t.write(pa.table({"k": list(range(KEYS)), "v": ["init"] * KEYS}, schema=SCHEMA))
    ctx = mp.get_context("spawn")
    stop = str(tmp_path / "stop")
    deadline = time.time() + SECONDS + 3.0  # the processes take a moment to start
    outs = {name: str(tmp_path / f"{name}.json") for name in ("w0", "w1", "rewind", "expire", "clean")}
    procs = [
        ctx.Process(target=_writer, args=(uri, 0, deadline, stop, outs["w0"])),
        ctx.Process(target=_writer, args=(uri, 1, deadline, stop, outs["w1"])),
        ctx.Process(target=_rewinder, args=(uri, op, deadline, stop, outs["rewind"])),
        ctx.Process(target=_expirer, args=(uri, deadline, stop, outs["expire"])),
        ctx.Process(target=_cleaner, args=(uri, deadline, stop, outs["clean"])),
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    Path(stop).touch()
    assert [p.exitcode for p in procs] == [0] * len(procs)
    res = {name: json.loads(Path(path).read_text()) for name, path in outs.items()}

    states: dict[int, dict[int, str]] = {1: dict.fromkeys(range(KEYS), "init")}
    writes = {int(i): rows for w in ("w0", "w1") for i, rows in res[w]["log"].items()}
    rewinds = {int(i): target for i, target in res["rewind"]["log"].items()}
    t = mt.open_table(uri)
    latest = t.latest_snapshot_id()
    assert latest is not None and writes and rewinds, res
    for sid in range(2, latest + 1):
        if sid in writes:
            states[sid] = {**states[sid - 1], **dict(writes[sid])}
        else:
            assert sid in rewinds, f"snapshot {sid} was made by nobody"
            states[sid] = dict(states[rewinds[sid]])
    kept = [s.id for s in SnapshotManager(t.fileio).snapshots()]
    assert kept == list(range(kept[0], latest + 1))  # no gap: ids only grow
    for sid in kept:
        got = {r["k"]: r["v"] for r in t.read(snapshot_id=sid).to_pylist()}
        assert got == states[sid], f"snapshot {sid}"
    _live_files_exist(t)
    assert res["expire"]["expired"] > 0, res
    t.expire_snapshots(retain_last=1)
    _live_files_exist(t)
    assert {r["k"]: r["v"] for r in t.read().to_pylist()} == states[latest]
