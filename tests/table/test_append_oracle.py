"""An append table against a list oracle: random appends, deletes, updates, compactions and overwrites hold the
same multiset of rows as a Python list given the same operations, and appends keep their commit order."""

from __future__ import annotations

import tempfile
from collections import Counter

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import mergetable as mt

SCHEMA = pa.schema([("p", pa.int64()), ("v", pa.int64()), ("s", pa.string())])
Row = tuple[int, int, str | None]

rows_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.integers(-5, 20), st.sampled_from(["a", "b", None])), min_size=1, max_size=12
)


def as_table(rows: list[Row]) -> pa.Table:
    return pa.table({"p": [r[0] for r in rows], "v": [r[1] for r in rows], "s": [r[2] for r in rows]}, schema=SCHEMA)


class AppendTableMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.table = mt.create_table(
            tempfile.mkdtemp() + "/t",
            SCHEMA,
            partition_keys=["p"],
            options={"compaction.min.file-num": "3", "snapshot.num-retained.min": "2"},
        )
        self.oracle: list[Row] = []
        self.appended_only = True

    @rule(rows=rows_strategy)
    def append(self, rows: list[Row]) -> None:
        self.table.write(as_table(rows))
        self.oracle.extend(rows)

    @rule(bound=st.integers(-5, 20))
    def delete(self, bound: int) -> None:
        result = self.table.delete([("v", "<=", bound)])
        kept = [r for r in self.oracle if not r[1] <= bound]
        assert result.num_deleted_rows == len(self.oracle) - len(kept)
        self.oracle = kept
        self.appended_only = False

    @rule(bound=st.integers(-5, 20), text=st.sampled_from(["x", None]))
    def update(self, bound: int, text: str | None) -> None:
        self.table.update([("v", ">", bound)], new_values={"s": text})
        self.oracle = [(p, v, text) if v > bound else (p, v, s) for p, v, s in self.oracle]
        self.appended_only = False

    @rule(full=st.booleans())
    def compact(self, full: bool) -> None:
        self.table.compact(full=full, progress=False)

    @rule(rows=rows_strategy)
    def overwrite(self, rows: list[Row]) -> None:
        self.table.write(as_table(rows), overwrite=True)  # dynamic: the partitions the rows hold
        replaced = {r[0] for r in rows}
        self.oracle = [r for r in self.oracle if r[0] not in replaced] + rows
        self.appended_only = False

    @invariant()
    def same_rows(self) -> None:
        got = [(r["p"], r["v"], r["s"]) for r in self.table.read().to_pylist()]
        assert Counter(got) == Counter(self.oracle)
        assert self.table.count() == len(self.oracle)
        if self.appended_only:  # per partition, rows come back in the order they were appended
            for p in {r[0] for r in self.oracle}:
                assert [r for r in got if r[0] == p] == [r for r in self.oracle if r[0] == p]
        some = [r for r in self.oracle if r[1] >= 10]
        picked = self.table.read(filter=[("v", ">=", 10)])
        assert Counter((r["p"], r["v"], r["s"]) for r in picked.to_pylist()) == Counter(some)


AppendTableMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=12, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestAppendTable = AppendTableMachine.TestCase
