"""A writer killed with SIGKILL at each storage step of a commit leaves the table at the old or new snapshot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import mergetable as mt

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import pyarrow as pa
    import mergetable as mt
    from mergetable.core import fileio

    kill_at = int(sys.argv[2])
    calls = 0

    def dying(original):
        def wrapper(self, *args, **kwargs):
            global calls
            calls += 1
            if calls == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return original(self, *args, **kwargs)
        return wrapper

    for name in ("write_bytes", "write_if_absent", "makedirs", "delete"):
        setattr(fileio.FileIO, name, dying(getattr(fileio.FileIO, name)))
    t = mt.open_table(sys.argv[1])
    t.write(pa.table({"id": [2, 3], "v": ["new", "new"]}))
    print("completed")
    """
)


def _index_files_exist(t: mt.Table) -> None:
    for row in t.system_table("table_indexes").to_pylist():
        assert os.path.exists(os.path.join(t.uri, "index", row["file_name"])), row
    if t.table_schema.is_dynamic_bucket:
        assert {r["bucket"] for r in t.system_table("table_indexes").to_pylist()} == {b for _, b, _ in t.files()}


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [{"bucket": "2"}, {"bucket": "-1", "dynamic-bucket.target-row-num": "2"}],
    ids=["fixed", "dynamic"],
)
def test_sigkill_at_every_step(tmp_path: object, options: dict[str, str]) -> None:
    step = 1
    while True:
        uri = os.path.join(str(tmp_path), f"t{step}")
        t = mt.create_table(uri, SCHEMA, primary_key=["id"], options=options)
        t.write(pa.table({"id": [1, 2], "v": ["old", "old"]}))
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, uri, str(step)], capture_output=True, text=True, timeout=120
        )
        reopened = mt.open_table(uri)
        rows = {r["id"]: r["v"] for r in reopened.read().to_pylist()}
        if proc.returncode == 0:
            assert "completed" in proc.stdout
            assert rows == {1: "old", 2: "new", 3: "new"}
            break
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        latest = reopened.latest_snapshot()
        assert latest is not None
        if latest.id == 1:
            assert rows == {1: "old", 2: "old"}
        else:
            assert latest.id == 2 and rows == {1: "old", 2: "new", 3: "new"}
        _index_files_exist(reopened)  # a dynamic table's HASH index files are those of the snapshot
        # the table stays writable after the crash
        reopened.write(pa.table({"id": [9, 2], "v": ["after", "after"]}))
        assert reopened.read(filter=[("id", "=", 9)]).num_rows == 1
        assert reopened.read(filter=[("id", "=", 2)]).column("v").to_pylist() == ["after"]  # one live copy
        _index_files_exist(reopened)
        step += 1
        assert step < 50
    assert step > 3  # the commit really went through several storage steps
