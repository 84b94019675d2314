"""The Spark compaction job under speculation, on a real standalone cluster of two workers on different
loopback addresses (so that Spark really launches a speculative copy of the slow task on the other worker)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
HERE = Path(__file__).resolve().parent
SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while text not in (log.read_text(errors="replace") if log.exists() else ""):
        assert proc.poll() is None, f"{log.name}: the process ended:\n{log.read_text(errors='replace')[-3000:]}"
        assert time.time() < deadline, f"{log.name}: no {text!r} within {timeout} s"
        time.sleep(0.3)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A standalone master and two one-core workers, on 127.0.0.1 and 127.0.0.2; its URL and environment."""
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_CLASS.parent.parent),
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(p for p in [str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")] if p),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, args: list[str], host: str) -> tuple[Path, subprocess.Popen[bytes]]:
        log = tmp_path / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(SPARK_CLASS), *args], env={**env, "SPARK_LOCAL_IP": host}, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        procs.append(proc)
        return log, proc

    try:
        master = ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)]
        log, proc = start("master", [*master, "--webui-port", str(_free_port())], "127.0.0.1")
        _wait_for(log, "I have been elected leader", proc)
        for i, host in enumerate(["127.0.0.1", "127.0.0.2"]):
            worker = ["org.apache.spark.deploy.worker.Worker", "--host", host, "--cores", "1", "--memory", "1g"]
            args = [*worker, "--webui-port", str(_free_port()), "--work-dir", str(tmp_path / f"work{i}"), url]
            log, proc = start(f"worker{i}", args, host)
            _wait_for(log, "Successfully registered with master", proc)
        yield url, env
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_compaction_job_leaves_no_file_of_a_losing_speculative_attempt(
    cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, env = cluster
    events = tmp_path / "events"
    events.mkdir()
    driver = [sys.executable, str(HERE / "speculation_driver.py"), url, str(tmp_path / "t"), str(events)]
    done = subprocess.run(driver, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-5000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    speculative = [a for a in result["attempts"] if a["speculative"] and a["stage"] > 0]  # stage 0 warms up
    assert speculative, f"Spark launched no speculative attempt in {result['rounds']} rounds: {result['attempts']}"
    assert result["compacted"] and result["same_rows"] and result["rows"] == 2_400_000
    assert result["orphans"] == []  # the losing attempt's files were removed
    assert not result["staging_left"]
