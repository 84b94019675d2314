"""Key-range splits of large sections: disjoint, covering, every run cut at the same keys, same rows."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ops_table import build

import mergetable.read.reader as reader_module
import mergetable.table
import mergetable.write.files as files

op = st.tuples(st.integers(0, 80), st.integers(0, 2), st.one_of(st.none(), st.integers(-9, 9)), st.booleans())


@pytest.fixture(autouse=True)
def tiny_row_groups(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(files, "ROW_GROUP_ROWS", 4)
    monkeypatch.setattr(reader_module, "WINDOW_BYTES", 1)  # files read row group by row group
    yield


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    commits=st.lists(st.lists(op, min_size=1, max_size=40), min_size=1, max_size=6),
    key_type=st.sampled_from([pa.int32(), pa.string()]),
    composite=st.booleans(),
    target=st.sampled_from([1, 300, 1500]),
    compacted=st.booleans(),
)
def test_key_range_splits_are_disjoint_covering_and_read_the_same_rows(
    commits: list[list[tuple[int, int, Any, bool]]],
    key_type: pa.DataType,
    composite: bool,
    target: int,
    compacted: bool,
) -> None:
    with tempfile.TemporaryDirectory() as root:
        t = build(f"{root}/t", key_type, composite, commits)
        if compacted:  # one run per bucket: its key ranges are read without merging, whole row groups unfiltered
            t.compact(full=True)
        whole = t.plan()
        assert all(s.key_range is None for s in whole)
        splits = t.plan(target_split_size=target)
        by_bucket: dict[int, list[Any]] = {}
        for s in splits:
            by_bucket.setdefault(s.bucket, []).append(s)
        for bucket, parts in by_bucket.items():
            # the ranges of a cut section follow each other: open below, each high the next low, open above
            previous_high: Any = None
            inside = False
            for s in parts:
                if s.key_range is None:
                    assert not inside
                    continue
                low, high = s.key_range
                assert low == previous_high if inside else low is None
                assert low is None or high is None or low < high
                inside, previous_high = high is not None, high
            assert not inside
            # every file of the bucket is read by some split
            assert {f.file_name for s in parts for f in s.files} == {
                f.file_name for s in whole if s.bucket == bucket for f in s.files
            }
        reader = t.split_reader()
        expected = pa.Table.from_batches(list(reader.batches(whole)), t.schema)
        got = pa.Table.from_batches(list(reader.batches(splits)), t.schema)
        assert got.equals(expected)
        # read ahead, as ``read()`` does: a single run's files are read whole, their edges trimmed to the range
        assert pa.concat_tables([expected.schema.empty_table(), *reader.read_splits(splits, ahead=None)]).equals(
            expected
        )
        assert t.count() == expected.num_rows
        filtered = t.split_reader(filter=[("v", ">", 0)])
        want = pa.Table.from_batches(list(filtered.batches(whole)), t.schema)
        assert pa.Table.from_batches(list(filtered.batches(splits)), t.schema).equals(want)


def test_a_large_bucket_is_read_by_several_splits(tmp_path: Any) -> None:
    t = build(str(tmp_path / "t"), pa.int64(), False, [[(k, 0, r, False) for k in range(r, 80, 3)] for r in range(3)])
    splits = t.plan(target_split_size=400)
    assert sum(1 for s in splits if s.key_range is not None) > 2
    assert pa.Table.from_batches(list(t.split_reader().batches(splits)), t.schema).equals(t.read())


def test_reads_in_this_process_cut_a_large_bucket_only_when_a_split_size_is_given(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = build(str(tmp_path / "t"), pa.int64(), False, [[(k, 0, r, False) for k in range(r, 80, 3)] for r in range(3)])
    whole = t.plan(target_split_size=400, key_ranges=False)
    assert whole and all(s.key_range is None for s in whole)
    assert pa.Table.from_batches(list(t.split_reader().batches(whole)), t.schema).equals(t.read(split_size=400))
    asked: list[bool] = []
    plan = mergetable.table.Table.plan_bound

    def spy(self: Any, request: Any, dnf: Any, sections: Any = "all", key_ranges: bool = True) -> Any:
        asked.append(key_ranges)
        return plan(self, request, dnf, sections, key_ranges)

    monkeypatch.setattr(mergetable.table.Table, "plan_bound", spy)
    for cores in (2, 4):
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        asked.clear()
        t.read(), t.scan().read_all(), t.read(split_size=400), t.scan(split_size=400).read_all()
        # sections merge on every core instead (mergetable.read.whole, read.parallel.ordered_map), and a cut
        # scan holds a stream per run in every range it reads at once (memory grows with the cores)
        assert asked == [False, False, True, True]
