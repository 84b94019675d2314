"""``mergetable.spark.compact(..., rescale_bucket=N)``: partitions rescaled in Spark tasks, one commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.commit.manifests import ManifestIO
from mergetable.metadata.models import CommitKind

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
ORDER = [("dt", "ascending"), ("id", "ascending")]


def test_spark_rescale_commits_once_and_keeps_every_row(spark: Any, tmp_path: Path) -> None:
    from mergetable.spark import compact

    uri = str(tmp_path / "t")
    t = mt.create_table(uri, SCHEMA, ["id", "dt"], ["dt"], options={"bucket": "2", "write-only": "true"})
    for i in range(4):
        for dt in ("a", "b", "c"):
            ids = list(range(i * 5, i * 5 + 30))
            t.write(pa.table({"id": ids, "dt": [dt] * 30, "v": [i] * 30}, schema=SCHEMA))
    before = t.read().sort_by(ORDER)
    tmp_before = {p.name for p in (tmp_path / "t").rglob("*.parquet")}

    snap = compact(spark, uri, rescale_bucket=3, partitions=[{"dt": "a"}])
    assert snap is not None and snap.commit_kind is CommitKind.OVERWRITE
    t = mt.open_table(uri)
    assert t.options["bucket"] == "2" and t.read().sort_by(ORDER).equals(before)

    snap = compact(spark, uri, rescale_bucket=3, parallelism=2)
    t = mt.open_table(uri)
    assert snap is not None and snap.properties == {"mergetable.rescale": "3"}
    assert [s.commit_kind for s in t.snapshots()].count(CommitKind.OVERWRITE) == 2  # one commit per job
    assert t.options["bucket"] == "3" and t.read().sort_by(ORDER).equals(before)
    totals = {e.total_buckets for e in ManifestIO(t.fileio).live_entries(t.latest_snapshot())}
    assert totals == {3} and {b for _, b, _ in t.files()} == {0, 1, 2}
    # nothing but the live files and those the old snapshots reference: no intermediate run is left
    live = {f.file_name for _, _, f in t.files()}
    assert {p.name for p in (tmp_path / "t").rglob("*.parquet")} == tmp_before | live
    assert compact(spark, uri, rescale_bucket=3) is None


def test_spark_compaction_moves_postponed_rows_and_batch_writes_get_fixed_buckets(spark: Any, tmp_path: Path) -> None:
    from mergetable.spark import compact

    uri = str(tmp_path / "p")
    t = mt.create_table(uri, SCHEMA, ["id", "dt"], ["dt"], options={"bucket": "-2", "write-only": "true"})
    w = t.new_writer()  # not a batch write: staged
    w.write(pa.table({"id": [1, 2, 3], "dt": ["a"] * 3, "v": [1, 2, 3]}, schema=SCHEMA))
    t.commit(w.prepare_commit())
    spark.createDataFrame([(4, "b", 4)], "id long, dt string, v long").write.format("mergetable").mode("append").save(
        uri
    )
    assert t.read().sort_by(ORDER).column("id").to_pylist() == [4]  # the batch write is in a fixed bucket at once
    snap = compact(spark, uri)
    assert snap is not None and snap.commit_kind is CommitKind.COMPACT
    assert t.read().sort_by(ORDER).column("id").to_pylist() == [1, 2, 3, 4]
    assert -2 not in {b for _, b, _ in t.files()}
