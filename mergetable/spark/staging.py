"""What a Spark job's task attempts leave behind, and how the driver removes the files of the ones that lost.

Every file a job's tasks write is named with the job's tag (``<data-file.prefix><job tag>-<uuid>-<n>.parquet``,
:func:`tagged_options`), and every task attempt leaves a marker ``_spark_staging/<job id>/<partition>-<attempt>-<task
attempt id>`` before it writes anything (:func:`leave_marker`). The driver knows the attempts whose results it
received; a marker of any other attempt (failed, killed, or a losing speculative copy) means files may be on disk
that no commit references, so the driver sweeps the job's files by their tag, keeping what was committed
(:func:`sweep_tagged_files`), and removes the markers (:func:`remove_staging`).

>>> job_tag("0123456789abcdef0123")
'0123456789abcdef-'
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection
from typing import Any

from mergetable.core import paths
from mergetable.core.fileio import FileIO
from mergetable.core.schema import TableSchema


def job_tag(job_id: str) -> str:
    """The part of a job's file names that tells them apart from every other writer's."""
    return f"{job_id[:16]}-"


def tagged_prefixes(schema: TableSchema, job_id: str) -> tuple[str, str]:
    """(data, changelog) file-name prefixes of the files a job's tasks write."""
    opts = schema.table_options
    return opts.data_file_prefix + job_tag(job_id), opts.changelog_file_prefix + job_tag(job_id)


def tagged_schema(schema: TableSchema, job_id: str) -> TableSchema:
    """``schema`` as a job's tasks write with it: files named with the job's tag (never persisted)."""
    data, changelog = tagged_prefixes(schema, job_id)
    return schema.with_options({**schema.options, "data-file.prefix": data, "changelog-file.prefix": changelog})


def task_marker() -> str:
    """The marker name of the running Spark task attempt (a fixed name outside a task)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return paths.attempt_marker(0, 0, 0)
    return paths.attempt_marker(ctx.partitionId(), ctx.attemptNumber(), ctx.taskAttemptId())


def leave_marker(fileio: FileIO, job_id: str, marker: str) -> None:
    """Record that a task attempt of ``job_id`` is about to write files.

    Another job that ends meanwhile removes ``_spark_staging`` when it finds it empty (:func:`remove_staging`),
    which can happen between creating it and creating this job's directory in it: then both are created again.
    Once this job's directory exists, ``_spark_staging`` is not empty and stays.
    """
    path = f"{paths.PathFactory(fileio.root).staging_dir(job_id)}/{marker}"
    for attempt in range(_MARKER_ATTEMPTS):
        try:
            fileio.write_bytes(path, b"")
            return
        except FileNotFoundError:
            if attempt == _MARKER_ATTEMPTS - 1:
                raise


_MARKER_ATTEMPTS = 100


def unknown_attempts(fileio: FileIO, job_id: str, known: Collection[str]) -> set[str]:
    """Markers of attempts of ``job_id`` whose results the driver did not receive."""
    return set(fileio.list_names(paths.PathFactory(fileio.root).staging_dir(job_id))) - set(known)


def sweep_tagged_files(
    fileio: FileIO, prefixes: tuple[str, ...], keep: Collection[str], live: Callable[[], Collection[str]]
) -> list[str]:
    """Delete every file under the table whose name starts with one of ``prefixes`` and is neither in ``keep``
    (what the job committed) nor in ``live()`` (the files of the latest snapshot, asked for only when there is
    a candidate); returns the deleted paths."""
    candidates = []
    for path, _ in fileio.walk_files(fileio.root):
        name = path.rsplit("/", 1)[-1]
        if name.startswith(prefixes) and name not in keep:
            candidates.append(path)
    if not candidates:
        return []
    kept = live()
    doomed = [p for p in candidates if p.rsplit("/", 1)[-1] not in kept]
    fileio.delete_quietly(doomed)
    return doomed


def remove_staging(fileio: FileIO, job_id: str) -> None:
    """Remove the job's markers, and the staging directory itself once no job uses it (local storage)."""
    staging = paths.PathFactory(fileio.root).staging_dir(job_id)
    with contextlib.suppress(OSError):
        if fileio.fs.exists(staging):
            fileio.fs.rm(staging, recursive=True)
    with contextlib.suppress(OSError):
        parent = paths.PathFactory(fileio.root).staging_dir()
        if fileio.is_local and not fileio.list_names(parent):
            fileio.fs.rmdir(parent)


def wait_for_attempts(spark_context: Any, job_group: str, timeout_s: float) -> bool:
    """Wait until no task attempt of the jobs of ``job_group`` runs any more (a speculative copy that lost is
    killed after the stage succeeded and may still be writing); False when ``timeout_s`` passed first."""
    tracker = spark_context.statusTracker()
    deadline = time.monotonic() + timeout_s
    while True:
        active = 0
        for job_id in tracker.getJobIdsForGroup(job_group):
            info = tracker.getJobInfo(job_id)
            for stage_id in info.stageIds if info is not None else ():
                stage = tracker.getStageInfo(stage_id)
                active += stage.numActiveTasks if stage is not None else 0
        if not active:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


__all__ = [
    "job_tag",
    "leave_marker",
    "remove_staging",
    "sweep_tagged_files",
    "tagged_prefixes",
    "tagged_schema",
    "task_marker",
    "unknown_attempts",
    "wait_for_attempts",
]
