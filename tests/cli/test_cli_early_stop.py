"""``mergetable read`` stopped early (``--limit``, a closed pipe) exits 0 with its full output, every time: its
reader threads are stopped and waited for, none is left inside Arrow when the process exits (which aborted it
with status 134, "terminate called without an active exception", in some runs)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mergetable as mt

ROOT = Path(__file__).resolve().parents[2]
RUNS = 10  # without the fix, 3 to 5 runs of 10 aborted in each mode
LIMIT = 5

pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mergetable.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two buckets of three overlapping runs: a merged read with threads per bucket and per file."""
    path = str(tmp_path_factory.mktemp("early") / "t")
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    table = mt.create_table(path, schema, ["id"], options={"bucket": "2"})
    n = 50_000
    for i in range(3):
        ids = pa.array(range(i * 1000, i * 1000 + n), pa.int64())
        table.write(pa.table({"id": ids, "v": pa.array([f"x{i}-{j}" for j in range(n)])}, schema=schema))
    return path


def _runs(args: list[str]) -> list[subprocess.CompletedProcess[str]]:
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda _: _cli(*args), range(RUNS)))


def _all_ok(done: list[subprocess.CompletedProcess[str]]) -> None:
    codes = [d.returncode for d in done]
    assert codes == [0] * RUNS, next(d.stderr for d in done if d.returncode)


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_csv_with_a_limit_exits_0_with_every_row(uri: str, json_flag: list[str]) -> None:
    done = _runs([*json_flag, "read", uri, "--format", "csv", "--limit", str(LIMIT)])
    _all_ok(done)
    for d in done:
        rows = list(csv.reader(io.StringIO(d.stdout)))
        assert rows[0] == ["id", "v"] and len(rows) == LIMIT + 1


def test_json_with_a_limit_exits_0_with_every_row(uri: str) -> None:
    done = _runs(["--json", "read", uri, "--limit", str(LIMIT)])
    _all_ok(done)
    assert all(len(json.loads(d.stdout)) == LIMIT for d in done)


def test_parquet_output_with_a_limit_exits_0_with_every_row(uri: str, tmp_path: Path) -> None:
    outputs = [tmp_path / f"out{i}.parquet" for i in range(RUNS)]
    with ThreadPoolExecutor(2) as pool:
        args = [["read", uri, "--format", "parquet", "--output", str(o), "--limit", str(LIMIT)] for o in outputs]
        done = list(pool.map(lambda a: _cli(*a), args))
    _all_ok(done)
    assert all(pq.read_table(o).num_rows == LIMIT for o in outputs)


def test_a_reader_that_closes_the_pipe_early_leaves_exit_status_0(uri: str) -> None:
    """``mergetable read T --format csv --limit 0 | head -2``: the command sees a closed pipe mid-output."""

    def one(_: int) -> tuple[int, list[str], str]:
        command = [sys.executable, "-m", "mergetable.cli.main", "read", uri, "--format", "csv", "--limit", "0"]
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=ROOT, text=True
        )
        assert proc.stdout is not None and proc.stderr is not None
        head = [proc.stdout.readline(), proc.stdout.readline()]
        proc.stdout.close()
        err = proc.stderr.read()
        return proc.wait(timeout=120), head, err

    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(one, range(RUNS)))
    assert [rc for rc, _, _ in done] == [0] * RUNS, next(err for rc, _, err in done if rc)
    for _, head, _ in done:
        rows = list(csv.reader(io.StringIO("".join(head))))
        assert rows[0] == ["id", "v"] and len(rows[1]) == 2
