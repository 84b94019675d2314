"""Where every file of a table lives: :class:`PathFactory`, the one place that names them.

```
schema/schema-<id>                     snapshot/snapshot-<id>, snapshot/LATEST, snapshot/EARLIEST
manifest/manifest-<uuid>-<n>           manifest/manifest-list-<uuid>-<n>
manifest/index-manifest-<uuid>-<n>     index/index-<uuid>-<n>   (deletion-vector index files)
tag/tag-<name>                         consumer/consumer-<id>
[<k>=<v>/…]/bucket-<N>/data-<uuid>-<n>.parquet
[<k>=<v>/…]/bucket-<N>/changelog-<uuid>-<n>.parquet
<dir>/.<name>.<uuid>.tmp               (a file being written, before it is published under <name>)
_spark_staging/<job id>/<marker>       (markers of a Spark write job's task attempts, removed by its commit)
_spark_staging/<job id>/parquet/…      (an append table's rows as Spark's Parquet writer wrote them, moved to
                                        their buckets before the job's commit)
```

Every method returns an absolute path (the table root joined with the relative one), in the form
:class:`mergetable.core.fileio.FileIO` methods take.
"""

from __future__ import annotations

import re
import urllib.parse
import uuid
from collections.abc import Sequence

from mergetable.core.buckets import PartitionValues
from mergetable.core.errors import CorruptMetadataError, SchemaError
from mergetable.core.names import MAX_NAME_BYTES, check_stored_name
from mergetable.core.schema import TableSchema

SCHEMA_DIR = "schema"
SNAPSHOT_DIR = "snapshot"
MANIFEST_DIR = "manifest"
TAG_DIR = "tag"
CONSUMER_DIR = "consumer"
INDEX_DIR = "index"
STAGING_DIR = "_spark_staging"
STAGED_PARQUET_DIR = "parquet"
LATEST = "LATEST"
EARLIEST = "EARLIEST"
SCHEMA_PREFIX = "schema-"
SNAPSHOT_PREFIX = "snapshot-"
TAG_PREFIX = "tag-"
CONSUMER_PREFIX = "consumer-"
MANIFEST_PREFIX = "manifest-"
MANIFEST_LIST_PREFIX = "manifest-list-"
INDEX_MANIFEST_PREFIX = "index-manifest-"
INDEX_FILE_PREFIX = "index-"
BUCKET_PREFIX = "bucket-"
DATA_FILE_EXTENSION = ".parquet"
DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"
_TAG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def join(root: str, *parts: str) -> str:
    """``root/part/…`` with the parts' surrounding slashes removed and empty parts skipped."""
    return "/".join([root, *[p.strip("/") for p in parts if p]])


_ATTEMPT_MARKER = re.compile(r"[0-9]+-[0-9]+-[0-9]+")


def attempt_marker(partition_id: int, attempt: int, task_attempt_id: int) -> str:
    """The name of the marker a Spark task attempt leaves under its job's staging directory.

    Example:
        >>> attempt_marker(3, 0, 41), is_attempt_marker("3-0-41"), is_attempt_marker("3-0-41.tmp")
        ('3-0-41', True, False)
    """
    return f"{partition_id}-{attempt}-{task_attempt_id}"


def is_attempt_marker(name: str) -> bool:
    """Whether ``name`` is one :func:`attempt_marker` makes."""
    return _ATTEMPT_MARKER.fullmatch(name) is not None


def temp_path(path: str) -> str:
    """A hidden, unique sibling of ``path`` to write before publishing it under ``path``."""
    parent, _, name = path.rpartition("/")
    return f"{parent}/.{name}.{uuid.uuid4().hex}.tmp" if parent else f".{name}.{uuid.uuid4().hex}.tmp"


def is_temp_name(name: str) -> bool:
    """Whether a base name is one :func:`temp_path` makes (or another hidden file)."""
    return name.startswith(".")


def new_file_name(prefix: str, counter: int = 0, extension: str = "") -> str:
    """``<prefix><uuid>-<n><extension>``, Paimon's data and manifest file naming."""
    return f"{prefix}{uuid.uuid4()}-{counter}{extension}"


def valid_tag_name(name: str) -> bool:
    """Letters, digits, ``_``, ``-`` and ``.``; all digits too (as in Paimon, which restricts only branch names:
    where a name could be a snapshot id, a tag of that name wins, see :mod:`mergetable.commit.travel`).

    >>> valid_tag_name("2024"), valid_tag_name("v1.0"), valid_tag_name("../x")
    (True, True, False)
    """
    return bool(_TAG_NAME.match(name))


def escape_partition_value(value: str) -> str:
    return urllib.parse.quote(value, safe=" -_.~:+@,;")


def _bare(name: str) -> str:
    """``name`` if it is a safe stored file name (:func:`mergetable.core.names.check_stored_name`).

    Metadata models refuse unsafe names when they are parsed (naming the file that holds them); this is
    the last line: no path the factory makes can leave its directory.
    """
    try:
        return check_stored_name(name)
    except ValueError as exc:
        raise CorruptMetadataError(name[:80], str(exc)) from None


def _numbered(prefix: str, name: str) -> int | None:
    rest = name[len(prefix) :]
    return int(rest) if name.startswith(prefix) and rest.isdigit() else None


class PathFactory:
    """The paths of every file of one table, under ``root`` (a :attr:`FileIO.root`).

    Args:
        root: The table root as the file system sees it (no scheme).
        partition_keys: The table's partition columns, in order (data and changelog directories).
        default_partition_name: The directory name of a null partition value.
    """

    def __init__(
        self, root: str, partition_keys: Sequence[str] = (), default_partition_name: str = DEFAULT_PARTITION_NAME
    ) -> None:
        self.root = root
        self.partition_keys = tuple(partition_keys)
        self.default_partition_name = default_partition_name

    @classmethod
    def for_table(cls, root: str, schema: TableSchema) -> PathFactory:
        """The factory of a table with ``schema`` (its partition keys and ``partition.default-name``)."""
        return cls(root, schema.partition_keys, schema.table_options.partition_default_name)

    def __repr__(self) -> str:
        return f"PathFactory({self.root!r}, partition_keys={list(self.partition_keys)})"

    def join(self, *parts: str) -> str:
        return join(self.root, *parts)

    # -- schemas ----------------------------------------------------------------------------------
    @property
    def schema_dir(self) -> str:
        return self.join(SCHEMA_DIR)

    def schema_file(self, schema_id: int) -> str:
        return self.join(SCHEMA_DIR, f"{SCHEMA_PREFIX}{schema_id}")

    @staticmethod
    def schema_id(file_name: str) -> int | None:
        """The id of a ``schema-<id>`` file name (None for any other name)."""
        return _numbered(SCHEMA_PREFIX, file_name)

    # -- snapshots --------------------------------------------------------------------------------
    @property
    def snapshot_dir(self) -> str:
        return self.join(SNAPSHOT_DIR)

    def snapshot_file(self, snapshot_id: int) -> str:
        return self.join(SNAPSHOT_DIR, f"{SNAPSHOT_PREFIX}{snapshot_id}")

    @staticmethod
    def snapshot_id(file_name: str) -> int | None:
        """The id of a ``snapshot-<id>`` file name (None for any other name)."""
        return _numbered(SNAPSHOT_PREFIX, file_name)

    @property
    def latest_hint(self) -> str:
        return self.join(SNAPSHOT_DIR, LATEST)

    @property
    def earliest_hint(self) -> str:
        return self.join(SNAPSHOT_DIR, EARLIEST)

    # -- manifests --------------------------------------------------------------------------------
    @property
    def manifest_dir(self) -> str:
        return self.join(MANIFEST_DIR)

    def manifest_file(self, name: str) -> str:
        """A manifest or manifest list by its file name (as snapshots and manifest lists record it)."""
        return self.join(MANIFEST_DIR, _bare(name))

    @staticmethod
    def new_manifest_name() -> str:
        return new_file_name(MANIFEST_PREFIX)

    @staticmethod
    def new_manifest_list_name() -> str:
        return new_file_name(MANIFEST_LIST_PREFIX)

    @staticmethod
    def new_index_manifest_name() -> str:
        return new_file_name(INDEX_MANIFEST_PREFIX)

    # -- index files (deletion vectors) -----------------------------------------------------------
    @property
    def index_dir(self) -> str:
        return self.join(INDEX_DIR)

    def index_file(self, name: str) -> str:
        """An index file by the name its index manifest entry records."""
        return self.join(INDEX_DIR, _bare(name))

    @staticmethod
    def new_index_file_name() -> str:
        return new_file_name(INDEX_FILE_PREFIX)

    # -- tags and consumers -----------------------------------------------------------------------
    @property
    def tag_dir(self) -> str:
        return self.join(TAG_DIR)

    def tag_file(self, name: str) -> str:
        return self.join(TAG_DIR, f"{TAG_PREFIX}{name}")

    @staticmethod
    def tag_name(file_name: str) -> str | None:
        """The tag of a ``tag-<name>`` file name (None for any other name)."""
        return file_name[len(TAG_PREFIX) :] if file_name.startswith(TAG_PREFIX) else None

    @property
    def consumer_dir(self) -> str:
        return self.join(CONSUMER_DIR)

    def consumer_file(self, consumer_id: str) -> str:
        return self.join(CONSUMER_DIR, f"{CONSUMER_PREFIX}{consumer_id}")

    def staging_dir(self, job_id: str | None = None) -> str:
        """Where a write job's task attempts leave their markers (all jobs' when ``job_id`` is None)."""
        return self.join(STAGING_DIR, job_id or "")

    def staged_parquet_dir(self, job_id: str) -> str:
        """Where Spark's Parquet writer writes an append table's rows for a job (``mergetable.spark.native_write``)."""
        return self.join(STAGING_DIR, job_id, STAGED_PARQUET_DIR)

    # -- data and changelog files -----------------------------------------------------------------
    def partition_path(self, partition: PartitionValues) -> str:
        """Hive-style ``k1=v1/k2=v2`` (relative; a null value is the default partition name, empty when the
        table is not partitioned)."""
        parts = []
        for k, v in zip(self.partition_keys, partition, strict=True):
            value = self.default_partition_name if v is None else escape_partition_value(v)
            part = f"{escape_partition_value(k)}={value}"
            if len(part.encode("utf-8")) > MAX_NAME_BYTES:
                raise SchemaError(
                    f"partition value {str(v)[:40]!r}... makes a directory name longer than {MAX_NAME_BYTES} bytes", k
                )
            parts.append(part)
        return "/".join(parts)

    def bucket_dir(self, partition: PartitionValues, bucket: int) -> str:
        """A bucket's directory: ``bucket-<N>``, or Paimon's ``bucket-postpone`` for postponed rows (bucket -2)."""
        return self.join(self.partition_path(partition), f"{BUCKET_PREFIX}{'postpone' if bucket == -2 else bucket}")

    def data_file(self, partition: PartitionValues, bucket: int, file_name: str) -> str:
        """A data or changelog file of a bucket, by the name its :class:`DataFileMeta` records."""
        return f"{self.bucket_dir(partition, bucket)}/{_bare(file_name)}"

    @staticmethod
    def new_data_file_name(prefix: str) -> str:
        """A fresh ``<prefix><uuid>-0.parquet`` (``prefix``: ``data-file.prefix`` or ``changelog-file.prefix``)."""
        return new_file_name(prefix, 0, DATA_FILE_EXTENSION)
