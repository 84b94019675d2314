"""Orphan-file cleaning that only ever deletes mergetable's own files.

The table directory may hold other things: a README, hidden files, another engine's ``_delta_log``, a
user's CSV next to the data, a whole table nested in a partition directory. Cleaning therefore walks only
mergetable's own layout and considers only names mergetable makes:

* ``manifest/manifest-*`` (manifests and manifest lists);
* ``[<k1>=<v>/…/<kn>=<v>/]bucket-<N>/<data-file.prefix|changelog-file.prefix>*.parquet``, with exactly the
  table's partition keys, in order;
* temporary files of an interrupted write of one of those (``[.]<name>.<32 hex>.tmp``), also in
  ``snapshot/``;
* ``_spark_staging/<job id>/<partition>-<attempt>-<task attempt>``: the marker of a Spark task attempt
  that was still running when its job committed or aborted (a job removes its own markers when it ends);
* every file under ``_spark_staging/<job id>/parquet/``: the Parquet files of an append table's write by Spark's
  own writer whose driver stopped before it moved them out (a write removes the directory when it ends).

Schema, snapshot, hint, tag and consumer files are never deleted; no other name or directory starting with
``.`` or ``_`` is entered or deleted (other than the temporary files above); a directory holding ``schema/`` or
``snapshot/`` is another table and is skipped whole. A file is deleted only when no snapshot or tag
references it and it is older than the cutoff, which must leave at least :data:`MIN_AGE_MS` for commits
in flight (a writer's files exist before its snapshot does) unless ``force`` is given.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from mergetable.core import paths
from mergetable.core.errors import OptionsError
from mergetable.core.fileio import FileIO
from mergetable.core.names import is_hidden, is_own_temp_name
from mergetable.core.schema import TableSchema

DAY_MS = 86_400_000
MIN_AGE_MS = DAY_MS
"""The youngest cutoff allowed without ``force``: as Iceberg and Delta, one day."""
_TABLE_MARKERS = frozenset({paths.SCHEMA_DIR, paths.SNAPSHOT_DIR})

Candidate = tuple[str, float | None]


def check_cutoff(older_than_ms: int | None, force: bool, now_ms: int | None = None) -> int:
    """The cutoff to use: ``older_than_ms`` (default one day ago), refused when younger than the minimum age."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    cutoff = older_than_ms if older_than_ms is not None else now - DAY_MS
    if cutoff > now - MIN_AGE_MS and not force:
        raise OptionsError(
            "older_than_ms",
            f"{cutoff} is less than {MIN_AGE_MS // 3_600_000} h ago: files of commits in flight could be deleted "
            "(pass force=True, or --force on the command line, to do it anyway)",
        )
    return cutoff


def candidates(fileio: FileIO, schema: TableSchema) -> Iterator[Candidate]:
    """(path, mtime in seconds) of every file under the table that mergetable could have made and may delete."""
    opts = schema.table_options
    factory = paths.PathFactory.for_table(fileio.root, schema)
    manifest = (paths.MANIFEST_PREFIX, paths.INDEX_MANIFEST_PREFIX)
    yield from _files(fileio, factory.manifest_dir, lambda n: n.startswith(manifest), manifest)
    index = (paths.INDEX_FILE_PREFIX,)
    yield from _files(fileio, factory.index_dir, lambda n: n.startswith(index), index)
    snapshot = (paths.SNAPSHOT_PREFIX, paths.LATEST, paths.EARLIEST)
    yield from _files(fileio, factory.snapshot_dir, lambda n: False, snapshot)
    prefixes = (opts.data_file_prefix, opts.changelog_file_prefix)

    def data_name(name: str) -> bool:
        return name.startswith(prefixes) and name.endswith(paths.DATA_FILE_EXTENSION)

    keys = [paths.escape_partition_value(k) + "=" for k in schema.partition_keys]
    for directory in _partition_dirs(fileio, fileio.root, keys):
        for name, is_dir, _ in fileio.list_entries(directory):
            bucket = name[len(paths.BUCKET_PREFIX) :]
            if is_dir and name.startswith(paths.BUCKET_PREFIX) and (bucket.isdigit() or bucket == "postpone"):
                yield from _files(fileio, f"{directory}/{name}", data_name, prefixes)
    for job, is_dir, _ in fileio.list_entries(factory.staging_dir()):
        if is_dir and not is_hidden(job):
            yield from _files(fileio, factory.staging_dir(job), paths.is_attempt_marker, ())
            yield from fileio.walk_files(factory.staged_parquet_dir(job))


def prune_staging(fileio: FileIO, deleted: list[str]) -> None:
    """Remove the job directories under ``_spark_staging/`` whose files ``deleted`` held, once they hold no file,
    then that directory if it is empty too (local tables: object stores have no directories to remove)."""
    staging = paths.PathFactory(fileio.root).staging_dir()
    jobs = {path[len(staging) + 1 :].split("/", 1)[0] for path in deleted if path.startswith(staging + "/")}
    if not fileio.is_local or not jobs:
        return
    for job in sorted(jobs):
        job_dir = f"{staging}/{job}"
        if not any(True for _ in fileio.walk_files(job_dir)):
            with contextlib.suppress(OSError):
                fileio.fs.rm(job_dir, recursive=True)
    if not fileio.list_names(staging):
        with contextlib.suppress(OSError):
            fileio.fs.rmdir(staging)


def _partition_dirs(fileio: FileIO, directory: str, keys: list[str]) -> Iterator[str]:
    """The directories of complete partitions (``directory`` itself when no keys remain)."""
    if not keys:
        yield directory
        return
    for name, is_dir, _ in fileio.list_entries(directory):
        if is_dir and name.startswith(keys[0]) and not is_hidden(name):
            child = f"{directory}/{name}"
            if not _is_table(fileio, child):
                yield from _partition_dirs(fileio, child, keys[1:])


def _is_table(fileio: FileIO, directory: str) -> bool:
    return any(is_dir and name in _TABLE_MARKERS for name, is_dir, _ in fileio.list_entries(directory))


def _files(fileio: FileIO, directory: str, own: Callable[[str], bool], temp_of: tuple[str, ...]) -> Iterator[Candidate]:
    """Files directly in ``directory`` that are ours: ``own(name)``, or temporary files of names starting
    with one of ``temp_of``."""
    for name, is_dir, mtime in fileio.list_entries(directory):
        if is_dir:
            continue
        if is_hidden(name) or name.endswith(".tmp"):
            if any(is_own_temp_name(name, prefix) for prefix in temp_of):
                yield f"{directory}/{name}", mtime
            continue
        if own(name):
            yield f"{directory}/{name}", mtime
