"""Writer processes on one cross-partition upsert table, routing the same key against the same snapshot into
different partitions: one commit lands, the other is refused and lands when written again, and the key is live
in one partition."""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from pathlib import Path

import pyarrow as pa

import mergetable as mt

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])


def _wait(path: Path) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def _writer(uri: str, dt: str, folder: str) -> None:
    base = Path(folder)
    t = mt.open_table(uri)
    rows = pa.table({"id": [1, 9], "dt": [dt, dt], "v": [ord(dt), ord(dt)]}, schema=SCHEMA)
    outcome = "committed"
    try:
        with t.writing() as w:
            w.write(rows)  # routed now: key 1 lives in 'a', 9 is new
            w.prepare()
            (base / f"ready-{dt}").touch()
            _wait(base / "go")
            if dt == "c":
                _wait(base / "done-b")  # commit after the other: this one must be refused
    except mt.BucketAssignmentConflictError as exc:
        outcome = f"refused: {exc}"
        t.write(rows)  # written again: routed against the other's commit
    (base / f"done-{dt}").touch()
    (base / f"{dt}.json").write_text(json.dumps(outcome))


def test_two_writers_never_leave_a_key_live_in_two_partitions(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, SCHEMA, ["id"], ["dt"])
    t.write(pa.table({"id": [1, 2], "dt": ["a", "a"], "v": [0, 0]}, schema=SCHEMA))
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(uri, dt, str(tmp_path))) for dt in ("b", "c")]
    for p in procs:
        p.start()
    _wait(tmp_path / "ready-b")
    _wait(tmp_path / "ready-c")
    (tmp_path / "go").touch()
    for p in procs:
        p.join(240)
    assert [p.exitcode for p in procs] == [0, 0]
    assert json.loads((tmp_path / "b.json").read_text()) == "committed"
    refused = json.loads((tmp_path / "c.json").read_text())
    assert refused.startswith("refused: ") and "cross-partition" in refused
    got = mt.open_table(uri).read().sort_by("id").to_pydict()
    assert got == {"id": [1, 2, 9], "dt": ["c", "a", "c"], "v": [99, 0, 99]}
    for dt, ids in (("a", [2]), ("b", []), ("c", [1, 9])):  # each partition merged on its own
        assert sorted(t.read(filter=[("dt", "=", dt)]).column("id").to_pylist()) == ids
