"""The table on a real S3-compatible server (moto, on loopback): conditional-put commits included."""

from __future__ import annotations

import multiprocessing as mp
import uuid
from collections.abc import Callable

import pyarrow as pa
import pytest

import mergetable as mt

pytestmark = pytest.mark.s3
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


@pytest.fixture(scope="module")
def s3_options(make_bucket: Callable[[str], dict[str, object]]) -> dict[str, object]:
    return make_bucket("mergetable-test")


def test_write_read_time_travel_on_s3(s3_options: dict[str, object]) -> None:
    uri = f"s3://mergetable-test/{uuid.uuid4().hex}"
    t = mt.create_table(uri, SCHEMA, primary_key=["id"], options={"bucket": "2"}, storage_options=s3_options)
    t.write(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    t.write(pa.table({"id": [2, 3], "v": ["B", "c"]}))
    t2 = mt.open_table(uri, storage_options=s3_options)
    assert {r["id"]: r["v"] for r in t2.read().to_pylist()} == {1: "a", 2: "B", 3: "c"}
    assert sorted(t2.read(snapshot_id=1).column("id").to_pylist()) == [1, 2]
    assert t2.read(filter=[("id", "=", 3)]).column("v").to_pylist() == ["c"]


def test_conditional_put_refuses_to_overwrite(s3_options: dict[str, object]) -> None:
    from mergetable.core.fileio import FileIO

    fio = FileIO(f"s3://mergetable-test/{uuid.uuid4().hex}", s3_options)
    path = fio.join("snapshot/snapshot-1")
    assert fio.write_if_absent(path, b"first")
    assert not fio.write_if_absent(path, b"second")
    assert fio.read_bytes(path) == b"first"


def _writer(uri: str, opts: dict[str, object], w: int) -> None:
    t = mt.open_table(uri, storage_options=opts)
    for n in range(4):
        t.write(pa.table({"id": [w * 100 + n], "v": [f"{w}-{n}"]}))


def test_concurrent_writers_on_s3(s3_options: dict[str, object]) -> None:
    uri = f"s3://mergetable-test/{uuid.uuid4().hex}"
    mt.create_table(uri, SCHEMA, primary_key=["id"], options={"commit.max-retries": "100"}, storage_options=s3_options)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(uri, s3_options, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    t = mt.open_table(uri, storage_options=s3_options)
    snaps = t.snapshots()
    assert [s.id for s in snaps] == list(range(1, len(snaps) + 1))
    assert sum(1 for s in snaps if s.commit_kind.value == "APPEND") == 16
    assert t.read().num_rows == 16
