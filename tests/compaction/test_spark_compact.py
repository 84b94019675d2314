"""``mergetable.spark.compact``: buckets compacted in Spark tasks, one commit on the driver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.metadata.models import CommitKind

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])


def test_spark_compaction_commits_once(spark: Any, tmp_path: Path) -> None:
    from mergetable.spark.compact import compact

    uri = str(tmp_path / "t")
    t = mt.create_table(
        uri,
        SCHEMA,
        ["id", "dt"],
        ["dt"],
        options={"bucket": "2", "write-only": "true", "changelog-producer": "full-compaction"},
    )
    for i in range(5):
        for dt in ("a", "b"):
            t.write(pa.table({"id": [i, i + 1, i + 2], "dt": [dt] * 3, "v": [i] * 3}, schema=SCHEMA))
    before = t.read().sort_by([("dt", "ascending"), ("id", "ascending")])
    buckets = {(p, b) for p, b, _ in t.files()}

    snap = compact(spark, uri, partitions=[{"dt": "a"}], full=True)
    assert snap is not None and snap.commit_kind is CommitKind.COMPACT
    assert {p for p, _, f in t.files() if f.level == 5} == {("a",)}

    snap = compact(spark, uri, full=True, parallelism=2)
    assert snap is not None and snap.commit_kind is CommitKind.COMPACT
    assert [s.commit_kind for s in t.snapshots()].count(CommitKind.COMPACT) == 2  # one commit per job
    assert {f.level for _, _, f in t.files()} == {5} and {(p, b) for p, b, _ in t.files()} == buckets
    assert t.read().sort_by([("dt", "ascending"), ("id", "ascending")]).equals(before)
    assert snap.properties == {"mergetable.full-compaction": "true"}
    changes = t.changelog(0, snap.id)
    assert set(changes.column("_row_kind").to_pylist()) == {"+I"} and changes.num_rows == before.num_rows
    assert compact(spark, uri, full=True) is None
