"""Data-file encodings and spilled writes: values round-trip, a writer's file stores one sequence number,
files of the earlier encoding stay readable, and a stream spilled in many sorted runs reads back the same
as one in-memory write, its runs merged into one per bucket (``write-buffer-spillable``) or not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mergetable as mt
from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("f", pa.float64()),
        ("g", pa.float32()),
        ("cat", pa.string()),
        ("uniq", pa.string()),
        ("small", pa.int32()),
        ("big", pa.int64()),
        ("b", pa.binary()),
    ]
)


def _rows(ids: np.ndarray, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = len(ids)
    f = rng.standard_normal(n)
    f[: min(n, 4)] = [np.nan, -0.0, np.inf, -np.inf][: min(n, 4)]
    return pa.table(
        {
            "id": ids,
            "f": pa.array(f, mask=np.arange(n) % 7 == 3),
            "g": rng.standard_normal(n).astype(np.float32),
            "cat": pa.array([["a", "b", "", "ccc"][i % 4] for i in range(n)], mask=np.arange(n) % 5 == 1),
            "uniq": pa.array([f"row-{i}-{seed}" for i in ids]),
            "small": rng.integers(0, 3, n, dtype=np.int32),
            "big": rng.integers(-(2**62), 2**62, n),
            "b": pa.array([bytes([i % 256, 0]) * (i % 3) for i in range(n)], pa.binary()),
        },
        schema=SCHEMA,
    )


def _files(t: mt.Table) -> list[str]:
    return [t.path_factory.data_file(p, b, f.file_name) for p, b, f in t.files()]


def _sorted(table: pa.Table) -> pa.Table:
    return table.cast(SCHEMA).sort_by("id").combine_chunks()


def _same(got: pa.Table, expected: pa.Table) -> bool:
    """Equal rows (in key order), floats compared bit for bit: NaN equals NaN, -0.0 differs from 0.0."""
    a, b = _sorted(got), _sorted(expected)
    if a.num_rows != b.num_rows:
        return False
    for name in SCHEMA.names:
        x, y = a.column(name).chunk(0), b.column(name).chunk(0)
        if pa.types.is_floating(x.type):
            valid = np.asarray(x.is_valid())
            if not (valid == np.asarray(y.is_valid())).all():
                return False
            bits = np.int64 if x.type == pa.float64() else np.int32
            xs = np.asarray(x.fill_null(0).to_numpy()).view(bits)
            ys = np.asarray(y.fill_null(0).to_numpy()).view(bits)
            if not (xs[valid] == ys[valid]).all():
                return False
        elif not x.equals(y):
            return False
    return True


def _encodings(path: str) -> dict[str, set[str]]:
    md = pq.read_metadata(path)
    out: dict[str, set[str]] = {}
    for rg in range(md.num_row_groups):
        for c in range(md.num_columns):
            col = md.row_group(rg).column(c)
            out.setdefault(col.path_in_schema, set()).update(col.encodings)
    return out


def test_values_round_trip_and_columns_take_their_encodings(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["id"])
    data = _rows(np.random.default_rng(0).permutation(5000).astype(np.int64))
    t.write(data)
    got = t.read()
    assert _same(got, data)  # NaN, -0.0, infinities, nulls, empty strings and bytes
    (path,) = _files(t)
    enc = _encodings(path)
    assert "RLE_DICTIONARY" in enc[SEQUENCE_NUMBER]  # one number for the whole file
    assert "DELTA_BINARY_PACKED" in enc["id"]
    assert "BYTE_STREAM_SPLIT" in enc["f"] and "BYTE_STREAM_SPLIT" in enc["g"]
    assert "RLE_DICTIONARY" in enc["cat"] and "RLE_DICTIONARY" in enc["small"]
    assert "RLE_DICTIONARY" in enc[VALUE_KIND]
    assert "DELTA_BYTE_ARRAY" in enc["uniq"]
    assert "RLE_DICTIONARY" not in enc["big"]


def test_files_carry_a_page_index_and_no_float_bounds(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["id"])
    t.write(_rows(np.arange(50_000, dtype=np.int64)))
    (path,) = _files(t)
    md = pq.read_metadata(path)
    for c in range(md.num_columns):
        col = md.row_group(0).column(c)
        floating = col.path_in_schema in ("f", "g")
        # NaN sits in no Arrow min/max while Spark orders it last: a float bound would let readers skip NaN rows
        assert (col.statistics is not None and col.statistics.has_min_max) != floating, col.path_in_schema
        assert col.has_column_index != floating and col.has_offset_index, col.path_in_schema


def test_a_run_stores_one_number_per_file_inside_its_block(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["id"], options={"bucket": "2"})
    ids = np.random.default_rng(1).permutation(3000).astype(np.int64)
    t.write(_rows(np.concatenate([ids, ids[:500]]), seed=2))  # 500 keys twice: the later row wins
    for p, b, meta in t.files():
        f = pq.read_table(t.path_factory.data_file(p, b, meta.file_name), columns=["id", SEQUENCE_NUMBER])
        seq = np.asarray(f.column(SEQUENCE_NUMBER)) + meta.stored_sequence_offset
        assert (np.diff(np.asarray(f.column("id"))) > 0).all()
        assert (seq == meta.min_sequence_number).all() and meta.min_sequence_number == meta.max_sequence_number
    later = _rows(np.concatenate([ids, ids[:500]]), seed=2).slice(3000)
    got = t.read(filter=[("id", "in", later.column("id").to_pylist())])
    assert _same(got, later)
    t.write(_rows(ids[:100], seed=3))  # the next commit's file numbers above the first's, in the same bucket
    for b in (0, 1):
        nums = sorted((f.min_sequence_number, f.max_sequence_number) for _, bb, f in t.files() if bb == b)
        assert len(nums) == 2 and nums[0][1] < nums[1][0]
    assert _same(t.read(filter=[("id", "in", ids[:100].tolist())]), _rows(ids[:100], seed=3))


def _rewrite_the_earlier_way(path: str) -> None:
    """Rewrite a data file as the earlier writer did: 64K-row groups, plain numbers, dictionary strings,
    sequence numbers in input order (a permutation inside the run)."""
    table = pq.read_table(path)
    seq = np.asarray(table.column(SEQUENCE_NUMBER))
    shuffled = np.random.default_rng(3).permutation(seq)
    table = table.set_column(table.schema.get_field_index(SEQUENCE_NUMBER), SEQUENCE_NUMBER, pa.array(shuffled))
    strings = [f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_binary(f.type)]
    pq.write_table(
        table, path, row_group_size=64 * 1024, use_dictionary=strings, compression="zstd", write_page_checksum=True
    )


def test_files_of_the_earlier_encoding_stay_readable(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, primary_key=["id"], options={"bucket": "2"})
    first = _rows(np.arange(0, 4000, dtype=np.int64), seed=4)
    t.write(first)
    for path in _files(t):
        _rewrite_the_earlier_way(path)
    second = _rows(np.arange(2000, 6000, dtype=np.int64), seed=5)
    t.write(second)  # new-style files over old-style ones: the merge reads both
    expected = pa.concat_tables([first.slice(0, 2000), second])
    assert _same(t.read(), expected)
    t.compact(full=True)
    assert _same(t.read(), expected)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 9)), max_size=30), min_size=1, max_size=6),
    st.sampled_from(["1", "3"]),
)
def test_a_spilled_stream_reads_back_like_one_in_memory_write(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[tuple[int, int]]], buckets: str
) -> None:
    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    base = tmp_path_factory.mktemp("spill")
    tiny = {"bucket": buckets, "write-buffer-size": "64 b", "write-only": "true"}
    # write-buffer-spillable (default): the spilled runs of a bucket are merged into one at commit
    merged = mt.create_table(str(base / "m"), schema, primary_key=["k"], options=tiny)
    spilled = mt.create_table(
        str(base / "s"), schema, primary_key=["k"], options={**tiny, "write-buffer-spillable": "false"}
    )
    whole = mt.create_table(str(base / "w"), schema, primary_key=["k"], options={"bucket": buckets})
    tables = [pa.table({"k": [r[0] for r in b], "v": [r[1] for r in b]}, schema=schema) for b in batches]
    for t in (merged, spilled):
        t.write(pa.RecordBatchReader.from_batches(schema, [b for tb in tables for b in tb.to_batches()]))
    whole.write(pa.concat_tables(tables))
    oracle = {k: v for b in batches for k, v in b}  # within one commit, a later row of a key is newer
    for t in (merged, spilled, whole):
        got = t.read().to_pydict()
        assert dict(zip(got["k"], got["v"], strict=True)) == oracle
    if sum(len(b) for b in batches) > 16:  # several sorted runs were spilled
        assert len(list(spilled.files())) > len({(p, b) for p, b, _ in spilled.files()})
    # one run (here one file) per bucket, its records all stored with one number, and no spilled file left behind
    for p, b, f in merged.files():
        assert f.level == 0 and f.max_sequence_number == f.min_sequence_number
        stored = pq.read_table(merged.path_factory.data_file(p, b, f.file_name), columns=[SEQUENCE_NUMBER])
        assert set(stored.column(0).to_pylist()) == {f.min_sequence_number - f.stored_sequence_offset}
    assert len(list(merged.files())) == len({(p, b) for p, b, _ in merged.files()})
    on_disk = {p.name for p in (base / "m").rglob("data-*.parquet")}
    assert on_disk == {f.file_name for _, _, f in merged.files()}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=1, max_size=8), st.integers(1, 4), st.sampled_from([512, 2048, 8192]))
def test_the_buffer_and_the_copy_of_its_largest_bucket_stay_within_write_buffer_size(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], buckets: int, buffer: int
) -> None:
    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    opts = {"bucket": str(buckets), "write-buffer-size": f"{buffer} b", "write-only": "true"}
    t = mt.create_table(str(tmp_path_factory.mktemp("room") / "t"), schema, primary_key=["k"], options=opts)
    w = t.new_writer()
    start = 0
    for n in sizes:
        w.write(pa.table({"k": np.arange(start, start + n), "v": np.arange(n)}, schema=schema))
        start += n
        largest = max(w._bucket_bytes.values(), default=0)
        assert w._buffer_bytes + largest <= buffer  # what a flush of the largest bucket would hold at once
    t.commit(w.prepare_commit())
    assert t.read().num_rows == start


def test_a_commit_below_the_buffer_spills_in_no_bucket(tmp_path: Path) -> None:
    """Four buckets hold four fifths of ``write-buffer-size`` before they spill (one bucket: half)."""
    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    rows = pa.table({"k": np.arange(40_000), "v": np.arange(40_000)}, schema=schema)  # 0.68 MB with row kinds
    opts = {"write-buffer-size": "1 mb", "write-only": "true", "write-buffer-spillable": "false"}
    four = mt.create_table(str(tmp_path / "four"), schema, primary_key=["k"], options={**opts, "bucket": "4"})
    one = mt.create_table(str(tmp_path / "one"), schema, primary_key=["k"], options={**opts, "bucket": "1"})
    four.write(rows)
    one.write(rows)
    assert len(four.files()) == 4  # one run per bucket: no spill
    assert len(one.files()) > 1  # the rows and their sorted copy would not fit: spilled
    assert four.read().num_rows == one.read().num_rows == 40_000
