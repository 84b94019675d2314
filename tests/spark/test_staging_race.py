"""Markers of Spark jobs that start while another job of the same table ends (no Spark needed: real threads)."""

from __future__ import annotations

import threading
from pathlib import Path

from mergetable.core.fileio import FileIO
from mergetable.spark.staging import leave_marker, remove_staging


def test_a_marker_survives_another_job_removing_the_empty_staging_directory(tmp_path: Path) -> None:
    fileio = FileIO(str(tmp_path / "t"))
    errors: list[BaseException] = []

    def job(name: str) -> None:
        try:
            for i in range(400):
                job_id = f"{name}{i}"
                leave_marker(fileio, job_id, "0-0-0")
                assert (tmp_path / "t" / "_spark_staging" / job_id / "0-0-0").exists()
                remove_staging(fileio, job_id)  # removes _spark_staging too when no other job uses it
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(name,)) for name in ("a", "b", "c")]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert not (tmp_path / "t" / "_spark_staging").exists()
