"""Flushing several buckets at once (``mergetable.write.flushing``): order, memory budget, errors, and a table
written with parallel flushes reads the same as one written one bucket at a time."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mergetable as mt
import mergetable.write.flushing as flushing
from mergetable.write.flushing import bounded_map


class _Probe:
    """Counts how many calls run at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.started: list[int] = []

    def __call__(self, item: int) -> int:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.started.append(item)
        time.sleep(0.05)
        with self.lock:
            self.now -= 1
        if item < 0:
            raise ValueError(f"item {item}")
        return item * 10


def test_results_come_back_in_order_from_several_threads() -> None:
    probe = _Probe()
    assert list(bounded_map(probe, list(range(8)), [1] * 8, free=100, threads=4)) == [i * 10 for i in range(8)]
    assert probe.most > 1


def test_items_run_at_once_only_while_their_copies_fit_in_the_free_bytes() -> None:
    probe = _Probe()
    assert list(bounded_map(probe, [1, 2], [10, 10], free=5, threads=4)) == [10, 20]
    assert probe.most == 1  # the second fits only once the first gave back its rows and its copy
    probe = _Probe()
    list(bounded_map(probe, [1, 2], [10, 10], free=25, threads=4))
    assert probe.most == 2
    probe = _Probe()
    list(bounded_map(probe, [1, 2, 3, 4], [10, 10, 10, 10], free=100, threads=2))
    assert probe.most == 2  # no more than ``threads``


def test_a_failure_stops_new_items_hands_out_the_running_ones_then_raises() -> None:
    probe = _Probe()
    out: list[int] = []
    with pytest.raises(ValueError, match="item -1"):
        for r in bounded_map(probe, [1, -1, 2, 3, 4, 5], [1] * 6, free=100, threads=2):
            out.append(r)
    assert out == [10, 20]  # item 2 was running beside the failed one: its result is handed out
    assert sorted(probe.started) == [-1, 1, 2]


def test_one_thread_runs_inline() -> None:
    seen: list[str] = []

    def fn(item: int) -> int:
        seen.append(threading.current_thread().name)
        return item

    assert list(bounded_map(fn, [1, 2], [1, 1], free=0, threads=1)) == [1, 2]
    assert set(seen) == {threading.current_thread().name}


def test_flush_threads_from_three_cores() -> None:
    assert (flushing.flush_threads(1), flushing.flush_threads(2), flushing.flush_threads(3)) == (1, 1, 3)


@pytest.mark.parametrize("options", [{"bucket": "4"}, {"dynamic-bucket.target-row-num": "500"}])
def test_parallel_flushes_write_what_serial_ones_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, str]
) -> None:
    rng = np.random.default_rng(5)
    batches = [
        pa.table({"id": rng.integers(0, 3000, 2000), "p": rng.integers(0, 3, 2000), "v": rng.random(2000)})
        for _ in range(3)
    ]
    got = {}
    for threads in (1, 4):
        monkeypatch.setattr(flushing, "flush_threads", lambda cores=None, n=threads: n)
        t = mt.create_table(str(tmp_path / f"t{threads}"), batches[0].schema, ["id", "p"], ["p"], options=options)
        for b in batches:
            t.write(b)
        t.update([("v", "<", 0.3)], {"v": pc.field("v") * 2})
        splits = t.plan()
        files = sorted(
            (s.partition, s.bucket, f.row_count) for s in splits for sec in s.sections for r in sec for f in r
        )
        got[threads] = (t.read().sort_by([("p", "ascending"), ("id", "ascending")]), files)
    assert got[1][0].equals(got[4][0])
    assert got[1][1] == got[4][1]
