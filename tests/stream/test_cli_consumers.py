"""``mergetable consumers`` and ``mergetable changelog --mode``, run as real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

import mergetable as mt

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "mergetable.cli.main", *args], capture_output=True, text=True, env=env, timeout=120
    )


def as_json(*args: str) -> Any:
    done = cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_consumers_list_reset_delete(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("k", pa.int64()), ("v", pa.int64())]), ["k"])
    t.write(pa.table({"k": [1, 2], "v": [1, 2]}))
    t.delete_keys(pa.table({"k": [2]}))
    assert as_json("consumers", t.uri) == []
    next(t.follow({"scan.snapshot-id": "1"}, consumer_id="etl"))
    assert as_json("consumers", t.uri) == [{"consumer": "etl", "next_snapshot": 1}]
    assert as_json("consumers", t.uri, "--reset", "etl", "--snapshot", "2") == {"reset": "etl", "next_snapshot": 2}
    assert t.consumers() == {"etl": 2}
    bad = cli("consumers", t.uri, "--reset", "etl", "--snapshot", "9")
    assert bad.returncode == 1 and "snapshot 9" in bad.stderr and t.consumers() == {"etl": 2}
    assert as_json("consumers", t.uri, "--delete", "etl") == {"deleted": "etl"}
    assert t.consumers() == {}
    changes = as_json("changelog", t.uri, "1", "2", "--mode", "diff")
    assert [(c["_row_kind"], c["k"], c["v"]) for c in changes] == [("-D", 2, 2)]
