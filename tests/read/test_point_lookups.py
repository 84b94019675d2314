"""Point lookups: a filter pinning the first key column reads only the rows of those keys, the same rows as a
full read filtered afterwards (several row groups, several runs, retractions, composite and string keys)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ops_table import build, key_of

import mergetable as mt
import mergetable.read.datafile as datafile
import mergetable.write.files as files
from mergetable.core.filters import bind_filters, to_expression
from mergetable.core.predicates import point_values

op = st.tuples(st.integers(0, 60), st.integers(0, 1), st.one_of(st.none(), st.integers(-9, 9)), st.booleans())


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(files, "ROW_GROUP_ROWS", 5)  # several row groups per file
    monkeypatch.setattr(datafile, "PROBE_ROWS", 2)  # several batches per row group
    monkeypatch.setattr(datafile, "TAKE_ROWS", 3)
    yield


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    commits=st.lists(st.lists(op, min_size=1, max_size=30), min_size=1, max_size=5),
    key_type=st.sampled_from([pa.int64(), pa.int16(), pa.string()]),
    composite=st.booleans(),
    probes=st.lists(st.integers(0, 62), min_size=1, max_size=4),
    compacted=st.booleans(),
)
def test_lookups_return_the_rows_a_filtered_full_read_does(
    commits: list[list[tuple[int, int, Any, bool]]],
    key_type: pa.DataType,
    composite: bool,
    probes: list[int],
    compacted: bool,
) -> None:
    with tempfile.TemporaryDirectory() as root:
        t = build(f"{root}/t", key_type, composite, commits)
        if compacted:
            t.compact(full=True)
        everything = t.read()
        keys = [key_of(k, key_type) for k in probes]
        filters: list[Any] = [
            [("k", "in", keys)],
            [("k", "=", keys[0])],
            [("k", "=", keys[0]), ("v", ">", 0)],
            [[("k", "=", keys[0])], [("k", "in", keys), ("j", "=", 1)]],
        ]
        for f in filters:
            got = t.read(filter=f)
            expected = everything.filter(to_expression(bind_filters(f, t.schema), t.schema))
            assert got.sort_by([("k", "ascending"), ("j", "ascending")]).equals(
                expected.sort_by([("k", "ascending"), ("j", "ascending")])
            ), f
            assert t.count(filter=f) == expected.num_rows


def test_a_lookup_of_a_missing_key_or_of_keys_beyond_every_file_returns_nothing(tmp_path: Any) -> None:
    t = build(str(tmp_path / "t"), pa.int64(), False, [[(k, 0, k, False) for k in range(0, 40, 2)]])
    assert t.read(filter=[("k", "=", 7)]).num_rows == 0
    assert t.read(filter=[("k", "in", [-5, 99])]).num_rows == 0
    assert sorted(t.read(filter=[("k", "in", [4, 7, 38])]).column("v").to_pylist()) == [4, 38]


def test_only_filters_pinning_the_first_key_are_point_lookups() -> None:
    pinned = point_values([[("k", "in", [1, 2]), ("k", "=", 2)]], "k", pa.int64(), 8)
    assert pinned is not None and pinned.to_pylist() == [2]
    assert point_values([[("k", "=", 1)], [("k", ">", 5)]], "k", pa.int64(), 8) is None
    assert point_values([[("j", "=", 1)]], "k", pa.int64(), 8) is None
    assert point_values(None, "k", pa.int64(), 8) is None
    assert point_values([[("k", "in", list(range(9)))]], "k", pa.int64(), 8) is None  # too many to look up
    assert point_values([[("k", "=", 1.5)]], "k", pa.float64(), 8) is None  # floats: NaN, -0.0


def test_rows_of_one_first_key_spanning_batches_and_row_groups_are_all_found(tmp_path: Any) -> None:
    schema = pa.schema([("k", pa.int64()), ("j", pa.int32()), ("v", pa.int64())])
    t = mt.create_table(str(tmp_path / "t"), schema, ["k", "j"], options={"bucket": "1"})
    t.write(pa.table({"k": [1] * 3 + [5] * 9 + [8] * 3, "j": [*range(3), *range(9), *range(3)], "v": range(15)}))
    assert t.read(filter=[("k", "=", 5)]).column("j").to_pylist() == list(range(9))
    assert t.read(filter=[("k", "in", [1, 5])]).num_rows == 12
