"""Compaction streams windows into rolling files: same rows as before, metadata equal to the files' own."""

from __future__ import annotations

import datetime
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt
import mergetable.read.reader as reader_module
import mergetable.write.files as files
from mergetable.metadata.models import DataFileMeta, FileSource
from mergetable.write.rolling import RollingKvWriter

SCHEMA = pa.schema(
    [
        ("k", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("l", pa.list_(pa.int32())),
    ]
)
FLOATS = [0.0, -0.0, 1.5, -2.5, float("nan"), float("inf"), float("-inf"), None]

op = st.tuples(
    st.integers(0, 80), st.sampled_from(FLOATS), st.one_of(st.none(), st.text("abc", max_size=3)), st.booleans()
)


@pytest.fixture(autouse=True)
def tiny_row_groups(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(files, "ROW_GROUP_ROWS", 4)
    monkeypatch.setattr(reader_module, "WINDOW_BYTES", 1)
    yield


def rows_of(ops: list[tuple[int, Any, Any, bool]], n: int) -> pa.Table:
    return pa.table(
        {
            "k": [o[0] for o in ops],
            "f": [o[1] for o in ops],
            "s": [o[2] for o in ops],
            "d": [datetime.date(2020, 1, 1 + (o[0] + n) % 28) for o in ops],
            "l": [[o[0], n] for o in ops],
        },
        schema=SCHEMA,
    )


def plain(table: pa.Table) -> list[dict[str, Any]]:
    """Rows with NaN spelled out, so equal tables compare equal."""
    return [{k: "NaN" if isinstance(v, float) and v != v else v for k, v in r.items()} for r in table.to_pylist()]


def own_meta(t: mt.Table, partition: tuple[Any, ...], bucket: int, f: DataFileMeta) -> DataFileMeta:
    """The metadata ``write_kv_files`` gives the rows a data file holds."""
    rows = pq.read_table(t.path_factory.data_file(partition, bucket, f.file_name))
    meta = files._file_meta(t.table_schema, rows, f.file_name, f.file_size, f.level, f.file_source, False, None)
    return meta.model_copy(update={"creation_time": f.creation_time})


def assert_metas_match_files(t: mt.Table, old: set[str]) -> None:
    """Every file written since ``old`` (upgraded files keep their metadata) describes its own rows."""
    for partition, bucket, f in t.files():
        if f.file_name not in old:
            assert f == own_meta(t, partition, bucket, f)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    commits=st.lists(st.lists(op, min_size=1, max_size=25), min_size=2, max_size=6),
    target=st.sampled_from(["1b", "2kb", "128mb"]),
)
def test_streamed_compaction_keeps_rows_and_writes_exact_metadata(
    commits: list[list[tuple[int, Any, Any, bool]]], target: str
) -> None:
    with tempfile.TemporaryDirectory() as root:
        t = mt.create_table(
            f"{root}/t", SCHEMA, ["k"], options={"write-only": "true", "target-file-size": target, "bucket": "1"}
        )
        for n, ops in enumerate(commits):
            t.write(rows_of(ops, n), row_kind=["-D" if o[3] else "+I" for o in ops])
        before = t.read()
        old = {f.file_name for _, _, f in t.files()}
        t.compact(full=True)
        after = t.read()
        assert after.schema == before.schema
        assert plain(after) == plain(before)
        assert all(f.level > 0 for _, _, f in t.files())
        assert_metas_match_files(t, old)


def test_rolling_writer_rolls_and_summarizes(tmp_path: Any) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, ["k"])
    rng = np.random.default_rng(3)
    n = 200
    kv = rows_of(
        [(k, FLOATS[k % len(FLOATS)], f"s{rng.integers(0, 9)}" if k % 5 else None, False) for k in range(n)], 0
    )
    kv = kv.append_column("_SEQUENCE_NUMBER", pa.array(np.arange(n, dtype=np.int64)))
    kv = kv.append_column("_VALUE_KIND", pa.array(np.zeros(n, dtype=np.int8)))
    with RollingKvWriter(t.fileio, t.table_schema, (), 0, 1, FileSource.COMPACT, target_size=600) as writer:
        for start in range(0, n, 37):
            writer.write(kv.slice(start, 37))
        metas = writer.close()
    assert len(metas) > 3
    assert sum(m.row_count for m in metas) == n
    for m in metas:
        assert m == own_meta(t, (), 0, m)
