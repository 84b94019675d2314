"""Shared fixtures. Spark tests share one local SparkSession per test run (see tests/spark/conftest.py)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


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
