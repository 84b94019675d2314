"""Spark reads and writes a table on a local S3-compatible server (moto), storage options passed as options."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

import mergetable as mt

pytestmark = pytest.mark.s3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, Any]]:
    s3fs = pytest.importorskip("s3fs")
    port = _free_port()
    exe = shutil.which("moto_server")
    cmd = [exe] if exe else [sys.executable, "-m", "moto.server"]
    proc = subprocess.Popen(
        [*cmd, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    opts: dict[str, Any] = {
        "key": "test",
        "secret": "test",
        "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "eu-west-1"},
    }
    try:
        deadline = time.time() + 30
        while True:
            try:
                s3fs.S3FileSystem(**opts).mkdir("mergetable-spark")
                break
            except Exception:  # the server is still starting
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        yield opts
    finally:
        proc.terminate()
        proc.wait(10)


def test_read_and_write_on_s3_with_storage_options(spark: SparkSession, s3: dict[str, Any]) -> None:
    uri = f"s3://mergetable-spark/{uuid.uuid4().hex}/orders"
    options = {
        "storage.key": s3["key"],
        "storage.secret": s3["secret"],
        "storage.client_kwargs": json.dumps(s3["client_kwargs"]),
    }
    df = spark.createDataFrame([(i, f"v{i}") for i in range(50)], "id bigint, v string")
    df.write.format("mergetable").mode("append").options(**options).option("primary-key", "id").option(
        "bucket", "2"
    ).save(uri)
    df.limit(5).selectExpr("id", "'new' AS v").write.format("mergetable").mode("append").options(**options).save(uri)
    back = spark.read.format("mergetable").options(**options).load(uri)
    assert back.count() == 50 and back.where("v = 'new'").count() == 5
    assert len(mt.open_table(uri, s3).snapshots()) >= 2
    as_json = {"storage-options": json.dumps(s3)}
    assert spark.read.format("mergetable").options(**as_json).option("snapshot-id", "1").load(uri).count() == 50
