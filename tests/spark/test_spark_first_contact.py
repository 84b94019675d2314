"""What a Spark user meets first: where mergetable's error sentence appears, catalog tables refused with a
pointer to register_view, one registration per session, and no warning about pandas at session start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import mergetable.spark as mts
from mergetable.core.errors import OptionsError

HIDE_TRACEBACK = "spark.sql.execution.pyspark.udf.hideTraceback.enabled"


def _message(action: Any) -> str:
    with pytest.raises(PySparkException) as err:
        action()
    return str(err.value)


def _head(message: str, lines: int = 4) -> str:
    return "\n".join(message.splitlines()[:lines])


def test_the_error_sentence_is_in_the_first_lines(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write = spark.range(3).write.format("mergetable").mode("append")
    no_bucket_key = _message(lambda: write.option("bucket", "4").save(uri))  # an append table needs bucket-key
    assert "option 'bucket-key'" in _head(no_bucket_key), no_bucket_key
    assert "writer.py" not in no_bucket_key  # mergetable's own frames are left out, the sentence stays
    spark.range(3).write.format("mergetable").mode("append").option("primary-key", "id").save(uri)
    reads = {
        "timestampasof": {"timestampAsOf": "yesterday"},
        "filter": {"filter": "id > 1"},  # SQL text, where JSON is expected
    }
    for option, options in reads.items():
        message = _message(lambda o=options: spark.read.format("mergetable").options(**o).load(uri).collect())
        assert f"OptionsError: option '{option}'" in _head(message), message
    with pytest.raises(OptionsError, match="timestampasof"):  # the helpers check options in this process
        mts.read(spark, uri, timestampAsOf="yesterday")
    spark.conf.set(HIDE_TRACEBACK, "true")  # PySpark sends no traceback: the sentence is the first line
    try:
        message = _message(lambda: spark.read.format("mergetable").option("filter", "id > 1").load(uri).collect())
        assert "option 'filter': is not JSON" in message.splitlines()[0]
    finally:
        spark.conf.unset(HIDE_TRACEBACK)


def test_catalog_tables_are_refused_pointing_to_register_view(spark: SparkSession, tmp_path: Path) -> None:
    warehouse = Path(str(spark.conf.get("spark.sql.warehouse.dir")).removeprefix("file:"))
    had_warehouse = warehouse.exists()  # the session catalog creates it on first use
    try:
        refused = _message(lambda: spark.sql("CREATE TABLE mt_nocols USING mergetable"))
        assert "register_view" in _head(refused) and "CREATE TABLE" in refused
        assert not spark.catalog.tableExists("mt_nocols")
        # with columns Spark calls nothing of the data source at CREATE: every later use says what to do
        spark.sql(f"CREATE TABLE mt_cols (id BIGINT) USING mergetable LOCATION '{tmp_path / 'b'}'")
        for statement in ("SELECT * FROM mt_cols", "INSERT INTO mt_cols VALUES (1)"):
            message = _message(lambda s=statement: spark.sql(s).collect())
            assert "register_view" in _head(message), statement
    finally:
        for name in ("mt_nocols", "mt_cols"):
            spark.sql(f"DROP TABLE IF EXISTS {name}")
        if not had_warehouse and warehouse.is_dir() and not any(warehouse.iterdir()):
            warehouse.rmdir()


def test_helpers_register_the_format_once_per_session(spark: SparkSession, tmp_path: Path) -> None:
    session = spark.newSession()  # a session of its own: the helpers register the format there
    manager = session._jsparkSession.sessionState().dataSourceManager()
    identity = session._jvm.java.lang.System.identityHashCode

    def registered() -> int:
        return int(identity(manager.lookupDataSource("mergetable")))

    mts.register(session)
    first = registered()
    uri = str(tmp_path / "t")
    mts.write(session.range(2), uri, primary_key="id")
    mts.register_view(session, "once", uri)
    assert sorted(r.id for r in mts.read(session, uri, native=False).collect()) == [0, 1]
    mts.register(session)
    assert registered() == first  # the same registration: Spark logged no "replaced a previously registered"
    assert mts.api.has_format(session)


def test_a_session_started_after_importing_mergetable_spark_does_not_warn_about_pandas(
    spark: SparkSession,
) -> None:
    """Every SparkSession start imports ``pyspark.testing.utils``, which warns about pandas 3; importing
    mergetable.spark first silences that warning (and no other). Run in a fresh interpreter, the warning
    being given once per process; the import is the one a session start does, without a second JVM."""
    pandas = pytest.importorskip("pandas")
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    start = "import pyspark.testing.utils"  # what SparkSession.builder.getOrCreate() imports (through py4j)

    def stderr(code: str) -> str:
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        return run.stderr

    assert "FutureWarning" not in stderr(f"import mergetable.spark; {start}")
    if int(pandas.__version__.split(".")[0]) >= 3:  # the warning exists: without mergetable.spark it shows
        assert "PySpark does not yet fully support pandas" in stderr(start)
    kept = stderr("import warnings, mergetable.spark; warnings.warn('mine', FutureWarning)")
    assert "FutureWarning: mine" in kept  # other FutureWarnings are untouched
