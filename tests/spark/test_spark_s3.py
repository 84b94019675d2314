"""Spark reads and writes a table on a local S3-compatible server (moto), storage options passed as options."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import SparkSession

import mergetable as mt

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def s3(make_bucket: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    return make_bucket("mergetable-spark")


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
