"""Packing splits into Spark partitions (pure planning: no Spark session)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mergetable as mt
from mergetable.core.option_values import MIB
from mergetable.metadata.models import DataFileMeta
from mergetable.read.scan import Split
from mergetable.spark.packing import MIN_PARTITION_BYTES, OPEN_COST, pack_splits


@pytest.fixture(scope="module")
def file_meta(tmp_path_factory: pytest.TempPathFactory) -> DataFileMeta:
    """The metadata of a real data file (its size is then set per split)."""
    t = mt.create_table(str(tmp_path_factory.mktemp("pack") / "t"), pa.schema([("k", pa.int64())]), primary_key=["k"])
    t.write(pa.table({"k": [1, 2]}))
    return next(f for _, _, f in t.files())


def _split(bucket: int, size: int, template: DataFileMeta) -> Split:
    meta = template.model_copy(update={"file_size": size})
    return Split(snapshot_id=1, partition=(), bucket=bucket, sections=(((meta,),),))


@given(
    sizes=st.lists(st.integers(0, 300 * MIB), max_size=40),
    target=st.sampled_from([8 * MIB, 128 * MIB]),
    cores=st.integers(1, 16),
)
def test_every_split_lands_in_exactly_one_partition_within_the_limit(
    sizes: list[int], target: int, cores: int, file_meta: DataFileMeta
) -> None:
    splits = [_split(i, s, file_meta) for i, s in enumerate(sizes)]
    groups = pack_splits(splits, target, cores)
    assert sorted(s.bucket for g in groups for s in g) == list(range(len(sizes)))
    total = sum(s + OPEN_COST for s in sizes)
    limit = min(target, max(MIN_PARTITION_BYTES, total // cores))
    costs = [[s.size + OPEN_COST for s in g] for g in groups]
    for c in costs:  # a split at or over the limit is a task of its own; others fill up to about the limit
        assert len(c) == 1 or (max(c) < limit and sum(c) - max(c) < limit)
    small = [s + OPEN_COST for s in sizes if s + OPEN_COST < limit]
    large = len(sizes) - len(small)
    assert len(groups) == large + -(-sum(small) // limit)  # as few partitions as the limit allows
    shared = [sum(c) for c in costs if max(c) < limit]
    if shared:  # balanced: within one split of each other
        assert max(shared) - min(shared) <= max(small)


def test_small_splits_share_tasks_and_large_ones_spread_over_cores(file_meta: DataFileMeta) -> None:
    small = [_split(i, 3 * MIB, file_meta) for i in range(16)]  # a compacted 5M-row table of 8 x 2 buckets
    assert len(pack_splits(small, 128 * MIB, 2)) == 2
    assert len(pack_splits(small, 128 * MIB, 8)) == 8
    big = [_split(i, 200 * MIB, file_meta) for i in range(3)]
    assert len(pack_splits(big, 128 * MIB, 2)) == 3
    assert pack_splits([], 128 * MIB, 2) == []
