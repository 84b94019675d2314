"""An append table against a list oracle: random appends, deletes, updates, merges, keyless-changelog ``-D`` rows,
compactions and overwrites hold the same multiset of rows as a Python list given the same operations, and appends
keep their commit order; with copy-on-write and with deletion vectors."""

from __future__ import annotations

import tempfile
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
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
    OPTIONS: dict[str, str] = {}

    def __init__(self) -> None:
        super().__init__()
        self.table = mt.create_table(
            tempfile.mkdtemp() + "/t",
            SCHEMA,
            partition_keys=["p"],
            options={"compaction.min.file-num": "3", "snapshot.num-retained.min": "2", **self.OPTIONS},
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

    @rule(inserted=rows_strategy, picks=st.lists(st.integers(0, 30), max_size=6), extra=rows_strategy)
    def changelog(self, inserted: list[Row], picks: list[int], extra: list[Row]) -> None:
        """A keyless changelog: +I rows, then -D rows of stored records (some twice) and of absent ones."""
        stored = self.oracle + inserted
        retracted = [stored[i % len(stored)] for i in picks] if stored else []
        retracted += extra[:2]
        kinds = ["+I"] * len(inserted) + ["-D"] * len(retracted)
        self.table.write(as_table(inserted + retracted), row_kind=kinds)
        for r in retracted:  # each -D removes one equal record, if one is left
            if r in stored:
                stored.remove(r)
        self.oracle = stored
        self.appended_only = self.appended_only and not retracted

    @rule(source=st.dictionaries(st.integers(-5, 25), st.sampled_from(["m", None]), max_size=5), delete=st.booleans())
    def merge(self, source: dict[int, str | None], delete: bool) -> None:
        src = pa.table({"p": [v % 3 for v in source], "v": list(source), "s": list(source.values())}, schema=SCHEMA)
        m = self.table.merge(src, on="v")
        m = m.when_matched_delete() if delete else m.when_matched_update({"s": pc.field("source.s")})
        m.when_not_matched_insert_all().execute()
        present = {r[1] for r in self.oracle}
        if delete:
            self.oracle = [r for r in self.oracle if r[1] not in source]
        else:
            self.oracle = [(p, v, source[v]) if v in source else (p, v, s) for p, v, s in self.oracle]
        self.oracle += [(v % 3, v, t) for v, t in source.items() if v not in present]
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


class VectorAppendTableMachine(AppendTableMachine):
    """The same with ``deletion-vectors.enabled``: deletes, updates, merges and -D rows mark rows instead."""

    OPTIONS = {"deletion-vectors.enabled": "true"}


VectorAppendTableMachine.TestCase.settings = AppendTableMachine.TestCase.settings
TestVectorAppendTable = VectorAppendTableMachine.TestCase
