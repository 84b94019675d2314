"""Storage faults at every storage call of a write on the local S3 server (moto on loopback).

Each trial writes one new key while call number k of the write fails in one of the ways object storage
fails (refused, applied with the response lost, applied then timed out, lost with failing read-backs,
lost with every later read failing). Whatever happens: an acknowledged write is visible, a write reported
failed is not, only a truly unknown outcome may go either way, every snapshot stays readable, and
orphan cleaning leaves exactly the files the snapshots reference.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pyarrow as pa
import pytest
from faulty_fs import MODES, FaultyFS

import mergetable as mt
from mergetable.commit.maintenance import used_files

pytestmark = pytest.mark.s3
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
OPTIONS = {"bucket": "1", "write-only": "true", "commit.min-retry-wait": "1 ms", "commit.max-retry-wait": "20 ms"}


@pytest.fixture(scope="module")
def s3_options(make_bucket: Callable[[str], dict[str, object]]) -> dict[str, object]:
    return make_bucket("mergetable-faults")


def _visible(uri: str, opts: dict[str, object]) -> set[int]:
    return set(mt.open_table(uri, storage_options=opts).read().column("id").to_pylist())


def _write_with_fault(t: mt.Table, faulty: FaultyFS, key: int, at: int, mode: str) -> str:
    faulty.arm(at, mode)
    try:
        t.write(pa.table({"id": [key], "v": [f"{mode}@{at}"]}))
    except mt.CommitStateUnknownError:
        return "unknown"
    except (mt.MergeTableError, OSError):
        return "failed"
    finally:
        faulty.disarm()
    return "acked"


def test_faults_at_every_storage_call_of_a_write(s3_options: dict[str, object]) -> None:
    uri = f"s3://mergetable-faults/{uuid.uuid4().hex}"
    t = mt.create_table(uri, SCHEMA, primary_key=["id"], options=OPTIONS, storage_options=s3_options)
    t.write(pa.table({"id": [0], "v": ["base"]}))
    faulty = FaultyFS(t.fileio.fs)
    t.fileio.fs = faulty

    acked, failed, unknown = {0}, set(), set()
    seen: dict[tuple[str, str], int] = {}
    key = 1
    for mode in MODES:
        at = 0
        while True:  # call number `at` of a write, until a write makes fewer calls
            outcome = _write_with_fault(t, faulty, key, at, mode)
            fired = faulty.fired
            {"acked": acked, "failed": failed, "unknown": unknown}[outcome].add(key)
            visible = set(mt.open_table(uri, storage_options=s3_options).read(columns=["id"]).column("id").to_pylist())
            assert acked <= visible, f"{mode} at {fired}: an acknowledged write is lost"
            assert not (failed & visible), f"{mode} at {fired}: a write reported failed is visible"
            if fired is not None and fired[0] == "pipe_file" and "/snapshot/snapshot-" in fired[1]:
                # the snapshot create itself: resolved unless every read-back fails
                assert outcome == ("unknown" if mode == "unknown" else "acked"), (mode, outcome)
                assert (key in visible) == (mode != "fail" or outcome == "acked")
            seen[(mode, outcome)] = seen.get((mode, outcome), 0) + 1
            key += 1
            if key % 4 == 0:
                t.compact(full=True)  # keep the table small, so the checks stay fast
            if fired is None:
                break
            at += 1

    assert {m for m, o in seen if o == "unknown"} == {"unknown"}  # only when every read-back fails
    assert all(seen.get((m, "acked")) for m in MODES) and seen.get(("fail", "failed"))
    table = mt.open_table(uri, storage_options=s3_options)
    used = used_files(table.fileio, table.table_schema)  # reads every manifest of every snapshot and tag
    present = {p for p, _ in table.fileio.walk_files(table.fileio.root)}
    assert used <= present, "a snapshot references a missing file"
    before = table.read()
    removed = table.remove_orphan_files(older_than_ms=int(time.time() * 1000) + 60_000, force=True)
    assert table.read().equals(before)
    left = {p for p, _ in table.fileio.walk_files(table.fileio.root) if "/manifest/" in p or "/bucket-" in p}
    assert left <= used and (present - set(removed)) >= used
