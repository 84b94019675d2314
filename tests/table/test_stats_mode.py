"""metadata.stats-mode: value statistics truncated as Paimon does, key statistics and key pruning exact."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mergetable as mt
from mergetable.core.stats_mode import parse_stats_mode, truncate_max, truncate_min
from mergetable.metadata.stats import column_stats, parquet_bounds

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.string()), ("b", pa.binary()), ("n", pa.int64())])


@given(st.text(max_size=40), st.integers(1, 20))
def test_truncated_bounds_still_bound(value: str, length: int) -> None:
    lo, hi = truncate_min(value, length), truncate_max(value, length)
    assert len(lo) <= length and lo <= value
    assert hi is None or (len(hi) <= length and hi >= value)


@given(st.binary(max_size=40), st.integers(1, 20))
def test_truncated_binary_bounds_still_bound(value: bytes, length: int) -> None:
    lo, hi = truncate_min(value, length), truncate_max(value, length)
    assert len(lo) <= length and lo <= value
    assert hi is None or (len(hi) <= length and hi >= value)


def test_max_rounds_up_and_gives_up_when_it_cannot() -> None:
    assert truncate_max("abcz-long", 4) == "abc{"
    assert truncate_max("\U0010ffff" * 3, 2) is None
    assert truncate_max(b"\x01\xff\xff", 2) == b"\x02"


def test_modes_parse_and_bad_modes_name_the_option(table_uri: str) -> None:
    assert parse_stats_mode("TRUNCATE(8)").length == 8
    with pytest.raises(mt.OptionsError, match=r"metadata\.stats-mode"):
        mt.create_table(table_uri, SCHEMA, primary_key=["k"], options={"metadata.stats-mode": "truncate(0)"})
    with pytest.raises(mt.OptionsError, match=r"fields\.v\.stats-mode"):
        mt.create_table(table_uri, SCHEMA, primary_key=["k"], options={"fields.v.stats-mode": "most"})


def test_a_32_mb_value_makes_small_manifests_and_pruning_stays_exact(table_uri: str) -> None:
    big = "x" * (32 << 20)
    long_key = "k" * 1000
    t = mt.create_table(table_uri, SCHEMA, primary_key=["k"], options={"fields.n.stats-mode": "none"})
    t.write(
        pa.table({"k": [long_key + "a", long_key + "b"], "v": [big, "a"], "b": [b"\xff" * 40, b"\x00"], "n": [1, 2]})
    )
    manifest_bytes = sum(size for p, _ in t.fileio.walk_files(t.fileio.join("manifest")) if (size := t.fileio.size(p)))
    assert manifest_bytes < 64 << 10
    meta = t.files()[0][2]
    assert meta.value_stats.min_values[0] == "a" and meta.value_stats.max_values[0] == "x" * 15 + "y"
    assert meta.value_stats.max_values[1] is None  # 16 bytes of 0xff cannot be rounded up
    assert meta.value_stats.null_counts[2] is None and meta.value_stats.min_values[2] is None
    assert meta.key_stats.max_values == (long_key + "b",) and meta.max_key == (long_key + "b",)
    assert t.read(filter=[("k", "=", long_key + "b")], columns=["n"]).column("n").to_pylist() == [2]
    assert t.read(filter=[("k", ">", long_key + "c")]).num_rows == 0


def test_full_and_counts(table_uri: str) -> None:
    t = mt.create_table(
        table_uri, SCHEMA, primary_key=["k"], options={"metadata.stats-mode": "full", "fields.b.stats-mode": "counts"}
    )
    t.write(pa.table({"k": ["a"], "v": ["y" * 40], "b": [b"z"], "n": [None]}, schema=SCHEMA))
    stats = t.files()[0][2].value_stats
    assert stats.max_values[0] == "y" * 40 and stats.max_values[1] is None and stats.null_counts == (0, 0, 1)


_VALUE = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))


@given(
    ints=st.lists(_VALUE, min_size=1, max_size=30),
    texts=st.lists(st.one_of(st.none(), st.text(max_size=6)), min_size=1, max_size=30),
    group=st.integers(1, 7),
)
def test_bounds_read_from_parquet_statistics_equal_the_computed_ones(
    ints: list[int | None], texts: list[str | None], group: int
) -> None:
    n = min(len(ints), len(texts))
    small = [None if v is None else v % 256 - 128 for v in ints[:n]]
    rows = pa.table(
        {
            "i": pa.array(ints[:n], pa.int64()),
            "b": pa.array(small, pa.int8()),
            "s": pa.array(texts[:n], pa.string()),
            "l": pa.array(texts[:n], pa.large_string()),
            "f": pa.array([None if v is None else v / 3 for v in ints[:n]], pa.float64()),
        }
    )
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, rows.schema, write_page_checksum=True) as writer:
        writer.write_table(rows, row_group_size=group)
    known = parquet_bounds(writer.writer.metadata, rows.schema)
    assert "f" not in known  # floats: NaN and -0.0 order differently in Parquet
    for mode in ("full", "truncate(3)"):
        modes = [parse_stats_mode(mode)] * rows.num_columns
        assert column_stats(rows, rows.column_names, modes, known) == column_stats(rows, rows.column_names, modes)


def test_a_string_too_long_for_parquet_statistics_is_computed_instead() -> None:
    rows = pa.table({"s": ["b", "a" * 5000, "c"], "k": [2, 1, 3]})
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, rows.schema) as writer:
        writer.write_table(rows, row_group_size=1)
    known = parquet_bounds(writer.writer.metadata, rows.schema)
    assert known == {"k": (1, 3)}
    assert column_stats(rows, ["s"], known=known).min_values == ("a" * 5000,)
