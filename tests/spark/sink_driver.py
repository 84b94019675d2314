"""A Spark driver process running one streaming query into a mergetable sink (used by the crash tests).

usage: sink_driver.py SOURCE_DIR CHECKPOINT TABLE_URI [CRASH_BATCH MARKER]

Streams the Parquet files of SOURCE_DIR (one file per micro-batch) into TABLE_URI (an aggregation table
summing ``v`` per ``id``) with trigger availableNow. With CRASH_BATCH, the sink commits that batch to
the table, then writes MARKER and hangs before Spark can record the batch in the checkpoint's commit
log: the test kills the process group with SIGKILL at that point.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from mergetable.spark import MergeTableDataSource
from mergetable.spark.sink import MergeTableStreamWriter

SCHEMA = "id long, v long"
SINK_OPTIONS = {
    "primary-key": "id",
    "bucket": "2",
    "merge-engine": "aggregation",
    "fields.v.aggregate-function": "sum",
}


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from conftest import quiet_session  # the tests' root conftest (run as a script, not under pytest)

    source, checkpoint, uri = sys.argv[1:4]
    crash_batch = int(sys.argv[4]) if len(sys.argv) > 4 else -1
    marker = sys.argv[5] if len(sys.argv) > 5 else ""

    class CrashingWriter(MergeTableStreamWriter):
        def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
            super().commit(messages, batchId)
            if batchId == crash_batch:
                Path(marker).write_text(str(batchId))
                time.sleep(600)  # killed here: committed to the table, not to the checkpoint

    class CrashingSource(MergeTableDataSource):
        @classmethod
        def name(cls) -> str:
            return "mergetable_crashing"

        def streamWriter(self, schema: StructType, overwrite: bool) -> MergeTableStreamWriter:
            return CrashingWriter(super().streamWriter(schema, overwrite).job)

    spark = quiet_session("stream-driver")
    spark.dataSource.register(CrashingSource)
    df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(source)
    query = (
        df.writeStream.format("mergetable_crashing")
        .options(**SINK_OPTIONS)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(uri)
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
