"""A Spark driver for the crash test: streams a table's changes into one JSON file per micro-batch.

Usage: ``python stream_driver.py URI CHECKPOINT OUT_DIR DELAY_SECONDS``. Each batch is written to
``OUT_DIR/batch-<id>.json`` (temp file + rename, so a replayed batch just rewrites the same file), then the
driver sleeps ``DELAY_SECONDS`` so that a test can kill it between batches.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def main(uri: str, checkpoint: str, out_dir: str, delay: float) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from conftest import quiet_session  # the tests' root conftest (run as a script, not under pytest)

    spark = quiet_session("mergetable-stream-driver")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def write(df: Any, batch_id: int) -> None:
        rows = [r.asDict() for r in df.collect()]
        tmp = out / f".batch-{batch_id}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(rows))
        os.replace(tmp, out / f"batch-{batch_id}.json")
        time.sleep(delay)

    query = (
        spark.readStream.format("mergetable")
        .options(**{"scan.snapshot-id": "1", "max-snapshots-per-trigger": "1", "read.changelog": "true"})
        .load(uri)
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    (out / "DONE").write_text("done")
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
