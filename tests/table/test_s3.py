"""The table on a real S3-compatible server (moto, on loopback): conditional-put commits included."""

from __future__ import annotations

import multiprocessing as mp
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest

import mergetable as mt

pytestmark = pytest.mark.s3
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_options() -> Iterator[dict[str, object]]:
    pytest.importorskip("s3fs")
    port = _free_port()
    exe = shutil.which("moto_server") or [sys.executable, "-m", "moto.server"]
    cmd = [exe] if isinstance(exe, str) else exe
    proc = subprocess.Popen(
        [*cmd, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    endpoint = f"http://127.0.0.1:{port}"
    opts: dict[str, object] = {
        "key": "test",
        "secret": "test",
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "eu-west-1"},
    }
    try:
        import s3fs

        deadline = time.time() + 30
        while True:
            try:
                fs = s3fs.S3FileSystem(**opts)
                fs.mkdir("mergetable-test")
                break
            except Exception:  # the server is still starting
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        yield opts
    finally:
        proc.terminate()
        proc.wait(10)


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
