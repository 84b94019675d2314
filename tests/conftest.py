"""Shared fixtures. Every Spark test of a run shares one local SparkSession (the ``spark`` fixture)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

QUIET_LOG4J = Path(__file__).parent / "spark" / "log4j2-quiet.properties"


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
