"""A writer process and compactor processes hammering one table: nothing is lost or resurrected."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from compaction_support import SCHEMA, apply_full_row_changelog, changelog_snapshots, state, upper_levels_state

import mergetable as mt
from mergetable.metadata.models import CommitKind

pytestmark = pytest.mark.slow
COMMITS = 25


def _writer(uri: str, out: str, seed: int) -> None:
    t = mt.open_table(uri)
    rnd = random.Random(seed)
    oracle: dict[int, list[Any]] = {}
    states: dict[int, dict[int, list[Any]]] = {}
    for n in range(COMMITS):
        keys = rnd.sample(range(60), rnd.randint(1, 12))
        kinds = [rnd.choice(["+I", "+I", "+U", "-D"]) for _ in keys]
        values = [n * 100 + i for i in range(len(keys))]
        data = pa.table({"k": keys, "v": values, "s": [f"w{n}"] * len(keys)}, schema=SCHEMA)
        snap = t.write(data, row_kind=kinds)
        for k, kind, v in zip(keys, kinds, values, strict=True):
            if kind == "-D":
                oracle.pop(k, None)
            else:
                oracle[k] = [v, f"w{n}"]
        assert snap is not None
        states[snap.id] = dict(oracle)
    Path(out).write_text(json.dumps({str(k): {str(a): b for a, b in v.items()} for k, v in states.items()}))


def _compactor(uri: str, stop: str, out: str, seed: int) -> None:
    t = mt.open_table(uri)
    rnd = random.Random(seed)
    done = conflicts = 0
    while not os.path.exists(stop):
        try:
            if t.compact(full=rnd.random() < 0.4) is not None:
                done += 1
        except mt.CommitConflictError:
            conflicts += 1
        time.sleep(rnd.uniform(0, 0.02))
    Path(out).write_text(json.dumps({"done": done, "conflicts": conflicts}))


@pytest.mark.parametrize("producer", ["none", "lookup"])
def test_writer_and_two_compactors(tmp_path: Path, producer: str) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(
        uri,
        SCHEMA,
        primary_key=["k"],
        options={
            "bucket": "2",
            "changelog-producer": producer,
            "num-sorted-run.compaction-trigger": "3",
            "commit.max-retries": "60",
            "commit.max-retry-wait": "200 ms",
        },
    )
    ctx = mp.get_context("spawn")
    stop = str(tmp_path / "stop")
    writer = ctx.Process(target=_writer, args=(uri, str(tmp_path / "writer.json"), 7))
    compactors = [
        ctx.Process(target=_compactor, args=(uri, stop, str(tmp_path / f"compactor{i}.json"), i)) for i in range(2)
    ]
    for p in (writer, *compactors):
        p.start()
    writer.join(120)
    Path(stop).touch()
    for p in compactors:
        p.join(60)
    assert writer.exitcode == 0 and all(p.exitcode == 0 for p in compactors)

    expected = {
        int(sid): {int(k): tuple(v) for k, v in st.items()}
        for sid, st in json.loads((tmp_path / "writer.json").read_text()).items()
    }
    stats = [json.loads((tmp_path / f"compactor{i}.json").read_text()) for i in range(2)]
    snaps = t.snapshots()
    assert [s.id for s in snaps] == list(range(1, len(snaps) + 1))
    assert sum(s.commit_kind is CommitKind.APPEND for s in snaps) == COMMITS
    assert sum(s["done"] for s in stats) > 0, stats
    # every data snapshot holds what the writer wrote; every compaction leaves the data as it was
    current: dict[int, tuple[Any, ...]] = {}
    for snap in snaps:
        got = state(t, snap.id)
        if snap.commit_kind is CommitKind.COMPACT:
            assert got == current, f"compaction {snap.id} changed the data"
        else:
            assert got == expected[snap.id], f"snapshot {snap.id}"
            current = got
    assert state(t) == expected[max(expected)]
    if producer == "lookup":
        view: dict[int, tuple[Any, ...]] = {}
        previous = 0
        for snap in changelog_snapshots(t):
            apply_full_row_changelog(view, t.changelog(previous, snap.id).to_pylist())
            previous = snap.id
            # other buckets may hold level-0 data whose compaction lost a race: compare what levels > 0 hold
            assert view == upper_levels_state(t, snap.id), f"changelog up to snapshot {snap.id}"
        t.compact(full=True)  # consumes any level 0 left: the changelog then covers the whole table
        latest = t.latest_snapshot()
        assert latest is not None
        apply_full_row_changelog(view, t.changelog(previous, latest.id).to_pylist())
        assert view == state(t)
    # losing compactions removed what they wrote: every data file on disk belongs to some snapshot
    referenced = {
        e.file.file_name for snap in t.snapshots() for e in (*t.delta_entries(snap), *t.changelog_entries(snap))
    }
    on_disk = {p.name for p in (tmp_path / "t").glob("bucket-*/*.parquet")}
    assert on_disk <= referenced
