"""Writers whose clock is off: OS processes with their clock moved a day back or ahead are refused with a typed
error naming ``commit.max-clock-skew``; snapshot times are never dragged into the future."""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from pathlib import Path

import pyarrow as pa
import pytest

import mergetable as mt

pytestmark = pytest.mark.slow
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])
DAY_S = 86_400


def _skewed_writer(uri: str, offset_s: float, value: str, out: str) -> None:
    real = time.time
    time.time = lambda: real() + offset_s  # this machine's clock is off by offset_s
    try:
        snap = mt.open_table(uri).write(pa.table({"k": [1], "v": [value]}, schema=SCHEMA))
        result = {"snapshot": snap.id if snap else None, "time": snap.time_millis if snap else None}
    except mt.MergeTableError as exc:
        result = {"error": type(exc).__name__, "message": str(exc)}
    Path(out).write_text(json.dumps(result))


def _run(tmp_path: Path, uri: str, offset_s: float, value: str) -> dict[str, object]:
    out = tmp_path / f"{value}.json"
    p = mp.get_context("spawn").Process(target=_skewed_writer, args=(uri, offset_s, value, str(out)))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    result: dict[str, object] = json.loads(out.read_text())
    return result


def test_a_skewed_writer_is_refused_and_never_drags_snapshot_times(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, SCHEMA, primary_key=["k"])
    first = t.write(pa.table({"k": [1], "v": ["a"]}, schema=SCHEMA))
    assert first is not None
    for offset, value in ((-DAY_S, "behind"), (DAY_S, "ahead")):
        got = _run(tmp_path, uri, offset, value)
        assert got.get("error") == "ClockSkewError", got
        assert "'commit.max-clock-skew'" in str(got["message"])
        assert t.latest_snapshot_id() == first.id  # nothing committed
    assert t.remove_orphan_files(older_than_ms=2**62, force=True) == []  # and nothing left behind
    within = _run(tmp_path, uri, 20, "within")  # 20 s off: inside the default bound of 1 min
    assert within["snapshot"] == 2
    now = int(time.time() * 1000)
    assert t.read(timestamp_ms=now + 60_000).column("v").to_pylist() == ["within"]
    assert t.write(pa.table({"k": [1], "v": ["b"]}, schema=SCHEMA)).snapshot is not None  # a right clock goes on
    assert t.snapshot(3).time_millis >= t.snapshot(2).time_millis  # never back


def test_the_bound_is_an_option(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, SCHEMA, primary_key=["k"], options={"commit.max-clock-skew": "2 d"})
    t.write(pa.table({"k": [1], "v": ["a"]}, schema=SCHEMA))
    got = _run(tmp_path, uri, DAY_S, "ahead")  # accepted: the table allows two days
    assert got["snapshot"] == 2 and int(str(got["time"])) > time.time() * 1000 + DAY_S * 1000 - 60_000
