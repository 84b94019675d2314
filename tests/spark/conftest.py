"""Spark tests: every test here carries the ``spark`` marker; the session fixture is in tests/conftest.py."""

from __future__ import annotations

from pathlib import Path

import pytest

SPARK_DIR = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/spark carries the ``spark`` marker."""
    for item in items:
        if SPARK_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)
