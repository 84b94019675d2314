"""Shared fixtures and markers.

Every Spark test of a run (of each pytest-xdist worker) shares one local SparkSession (the ``spark``
fixture) and every S3 test one local S3-compatible server (``s3_server``). A test that asks for either
fixture carries the ``spark`` or ``s3`` marker without saying so, and a test without the ``spark`` marker
that starts a SparkContext fails: so ``-m "not spark and not s3 and not slow"`` (``make test-fast``) never
starts a JVM.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

QUIET_LOG4J = Path(__file__).parent / "spark" / "log4j2-quiet.properties"
SPARK_FIXTURES = {"spark"}
S3_FIXTURES = {"s3_server", "make_bucket"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the fixtures it uses (``spark``, ``s3``)."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & SPARK_FIXTURES:
            item.add_marker(pytest.mark.spark)
        if used & S3_FIXTURES:
            item.add_marker(pytest.mark.s3)


def _spark_running() -> bool:
    """Whether this process has started Spark's JVM (it stays up after ``stop()``) or holds a SparkContext."""
    context = sys.modules.get("pyspark.context")
    spark_context = getattr(context, "SparkContext", None)
    return any(getattr(spark_context, name, None) is not None for name in ("_gateway", "_active_spark_context"))


@pytest.fixture(autouse=True)
def _spark_needs_its_marker(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that starts Spark without the ``spark`` marker fails (it would slip into ``make test-fast``)."""
    before = _spark_running()
    yield
    if not before and _spark_running() and request.node.get_closest_marker("spark") is None:
        pytest.fail(f"{request.node.nodeid} starts Spark but has no spark marker", pytrace=False)


@pytest.fixture
def table_uri(tmp_path: Path) -> str:
    """A fresh local table location."""
    return str(tmp_path / "table")


@pytest.fixture
def memory_uri() -> Iterator[str]:
    """A fresh location on fsspec's in-memory file system."""
    uri = f"memory://mt-{uuid.uuid4().hex}"
    yield uri
    import fsspec

    fs = fsspec.filesystem("memory")
    if fs.exists(uri):
        fs.rm(uri, recursive=True)


def quiet_session(app: str = "mergetable-tests", test_jvm: bool = True) -> Any:
    """A local[2] session: no UI, 2 shuffle partitions, errors-only logging, fast-starting JVM flags."""
    from pyspark.sql import SparkSession

    import mergetable.spark  # noqa: F401  (first: it silences PySpark's warning about pandas 3)

    java = f"-Dlog4j2.configurationFile=file:{QUIET_LOG4J} -XX:+UseSerialGC"
    if test_jvm:
        java += " -XX:TieredStopAtLevel=1"
    return (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.extraJavaOptions", java)
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = quiet_session()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[dict[str, Any]]:
    """A local S3-compatible server (moto) on loopback for the whole run: its s3fs storage options."""
    s3fs = pytest.importorskip("s3fs")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    exe = shutil.which("moto_server")
    cmd = [exe] if exe else [sys.executable, "-m", "moto.server"]
    proc = subprocess.Popen(
        [*cmd, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    opts: dict[str, Any] = {
        "key": "test",
        "secret": "test",
        "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "eu-west-1"},
    }
    try:
        deadline = time.time() + 30
        while True:
            try:
                s3fs.S3FileSystem(**opts).ls("")
                break
            except Exception:  # the server is still starting
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        yield opts
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="session")
def make_bucket(s3_server: dict[str, Any]) -> Callable[[str], dict[str, Any]]:
    """Create a bucket on the local S3 server (if missing); returns the storage options."""

    def make(name: str) -> dict[str, Any]:
        import s3fs

        fs = s3fs.S3FileSystem(**s3_server)
        if not fs.exists(name):
            fs.mkdir(name)
        return s3_server

    return make
