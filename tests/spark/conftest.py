"""One local SparkSession for the whole test run, with quiet settings (see docs/spark.md)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

QUIET_LOG4J = Path(__file__).with_name("log4j2-quiet.properties")
SPARK_DIR = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/spark carries the ``spark`` marker."""
    for item in items:
        if SPARK_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)


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
