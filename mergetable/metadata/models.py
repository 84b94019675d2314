"""Persisted metadata: data file meta, manifest entries, manifest lists, snapshots, tags.

All models are frozen pydantic with camelCase JSON (Paimon's field names without the leading
underscore). The JSON Schema of each is published in ``spec/`` and kept in sync by a test.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from mergetable.core.model import FORMAT_VERSION as FORMAT_VERSION
from mergetable.core.model import JsonModel, Versioned
from mergetable.core.names import check_stored_name

FileName = Annotated[str, AfterValidator(check_stored_name)]
"""A file name recorded in metadata: a bare, visible name, so every path is the table root plus it."""


class FileKind(IntEnum):
    ADD = 0
    DELETE = 1


class FileSource(IntEnum):
    APPEND = 0
    COMPACT = 1


class CommitKind(StrEnum):
    APPEND = "APPEND"
    COMPACT = "COMPACT"
    OVERWRITE = "OVERWRITE"


class SimpleStats(JsonModel):
    """Per-column min, max and null count, in the order of the owning file's stats columns.

    Values are JSON forms: numbers and strings as is, temporal values as their integer storage
    (days, or units since epoch/midnight), decimals as strings, binary as base64. ``None`` = unknown.
    """

    min_values: tuple[Any, ...] = ()
    max_values: tuple[Any, ...] = ()
    null_counts: tuple[int | None, ...] = ()


class DataFileMeta(JsonModel):
    """One data or changelog file of a bucket."""

    file_name: FileName
    file_size: int
    row_count: int
    min_key: tuple[Any, ...]
    max_key: tuple[Any, ...]
    key_stats: SimpleStats
    value_stats: SimpleStats
    value_stats_cols: tuple[str, ...] | None = None
    min_sequence_number: int
    """Smallest sequence number of the file's records: the committed (effective) number once the file is
    in a manifest; a writer-local number in a :class:`CommitMessage` that is not committed yet."""
    max_sequence_number: int
    schema_id: int
    level: int
    extra_files: tuple[FileName, ...] = ()
    creation_time: int
    delete_row_count: int | None = None
    file_source: FileSource = FileSource.APPEND
    write_cols: tuple[str, ...] | None = None
    """Columns this file actually carries values for (a partial write); None = every column."""
    sequence_offset: int | None = None
    """Added to every ``_SEQUENCE_NUMBER`` stored in the file to give the record's sequence number, which
    the committer assigns when the file is committed (format version 2); None = 0 (numbers stored as is)."""

    @property
    def stored_sequence_offset(self) -> int:
        return self.sequence_offset or 0

    def upgrade(self, level: int) -> DataFileMeta:
        """The same file moved to another level (no rewrite)."""
        return self.model_copy(update={"level": level})


class ManifestEntry(JsonModel):
    kind: FileKind
    partition: tuple[str | None, ...]
    """Partition values in their string form (as in the directory name, unescaped); None = null."""
    bucket: int
    total_buckets: int
    file: DataFileMeta

    @property
    def identifier(self) -> tuple[tuple[str | None, ...], int, int, str]:
        return (self.partition, self.bucket, self.file.level, self.file.file_name)


class ManifestFile(Versioned):
    """Content of ``manifest/manifest-<uuid>-<n>``."""

    entries: tuple[ManifestEntry, ...]


class PartitionStats(JsonModel):
    min_values: tuple[str | None, ...] = ()
    max_values: tuple[str | None, ...] = ()
    null_counts: tuple[int, ...] = ()


class ManifestFileMeta(JsonModel):
    """One row of a manifest list."""

    file_name: FileName
    file_size: int
    num_added_files: int
    num_deleted_files: int
    partition_stats: PartitionStats
    schema_id: int
    min_bucket: int
    max_bucket: int
    min_level: int
    max_level: int


class ManifestList(Versioned):
    """Content of ``manifest/manifest-list-<uuid>-<n>``."""

    manifests: tuple[ManifestFileMeta, ...]


class DeletionVectorMeta(JsonModel):
    """Where one data file's deletion vector lies in an index file (Paimon's ``DeletionVectorMeta``)."""

    data_file_name: FileName
    offset: int
    """Where the vector starts: its big-endian size field."""
    length: int
    """The size field's value for a 32-bit vector; every byte of a 64-bit one (see ``core.deletion_vectors``)."""
    cardinality: int | None = None
    """How many rows it deletes."""


class IndexFileMeta(JsonModel):
    """One index file of a bucket (Paimon's ``IndexFileMeta``): ``index/<file_name>``."""

    index_type: str
    """``DELETION_VECTORS`` (a bucket's deletion vectors) or ``HASH`` (a dynamic bucket's key hashes)."""
    file_name: FileName
    file_size: int
    row_count: int
    """How many vectors (``DELETION_VECTORS``) or key hashes (``HASH``) it holds."""
    deletion_vectors_ranges: tuple[DeletionVectorMeta, ...] = ()


class IndexManifestEntry(JsonModel):
    """One row of an index manifest (Paimon's ``IndexManifestEntry``)."""

    kind: FileKind
    partition: tuple[str | None, ...]
    bucket: int
    index_file: IndexFileMeta


class IndexManifest(Versioned):
    """Content of ``manifest/index-manifest-<uuid>-<n>``: every live index file of the snapshot (ADD entries)."""

    entries: tuple[IndexManifestEntry, ...]


class Snapshot(Versioned):
    """Content of ``snapshot/snapshot-<id>``: the state of the table after one commit."""

    id: int
    schema_id: int
    base_manifest_list: FileName
    base_manifest_list_size: int | None = None
    delta_manifest_list: FileName
    delta_manifest_list_size: int | None = None
    changelog_manifest_list: FileName | None = None
    changelog_manifest_list_size: int | None = None
    commit_user: str
    commit_identifier: int
    commit_kind: CommitKind
    time_millis: int
    total_record_count: int
    delta_record_count: int
    changelog_record_count: int | None = None
    watermark: int | None = None
    properties: dict[str, str] | None = None
    next_sequence_number: int | None = None
    """Every sequence number below it is taken: the next data commit numbers its records from here
    (format version 2; absent in version 1 snapshots, where it is one past the largest live number)."""
    index_manifest: FileName | None = None
    """The index manifest listing the live deletion-vector index files; None: the table has none."""


class Tag(Snapshot):
    """Content of ``tag/tag-<name>``: a snapshot plus when the tag was made."""

    tag_create_time: int = Field(default=0)
    tag_time_retained: int | None = None

    def to_snapshot(self) -> Snapshot:
        return Snapshot.model_validate(self.model_dump(exclude={"tag_create_time", "tag_time_retained"}))


class CommitMessage(JsonModel):
    """What one writer (or compaction task) produced for one (partition, bucket). Picklable and JSON-able.

    ``new_files``/``deleted_files`` are the write's data increment (level-0 files; deleted files only for
    overwrite bookkeeping); ``compact_before``/``compact_after`` the compaction increment;
    ``changelog_files`` / ``compact_changelog_files`` the changelog of each. ``new_index_files`` /
    ``deleted_index_files``: the deletion vectors a row-level operation on an append table changed (Paimon's
    ``DataIncrement`` index files), committed with the data increment.
    """

    partition: tuple[str | None, ...]
    bucket: int
    total_buckets: int
    new_files: tuple[DataFileMeta, ...] = ()
    deleted_files: tuple[DataFileMeta, ...] = ()
    changelog_files: tuple[DataFileMeta, ...] = ()
    compact_before: tuple[DataFileMeta, ...] = ()
    compact_after: tuple[DataFileMeta, ...] = ()
    compact_changelog_files: tuple[DataFileMeta, ...] = ()
    compact_index_files: tuple[IndexFileMeta, ...] = ()
    """Deletion-vector index files the compaction wrote: the bucket's vectors after it."""
    compact_deleted_index_files: tuple[IndexFileMeta, ...] = ()
    """The bucket's index files the compaction replaces."""
    new_index_files: tuple[IndexFileMeta, ...] = ()
    """Index files the write adds to the bucket: its HASH index file of a dynamic bucket (every key hash of the
    bucket after the write), or the deletion-vector index files a row-level operation on an append table wrote
    (the bucket's vectors after it)."""
    deleted_index_files: tuple[IndexFileMeta, ...] = ()
    """The bucket's index files of the same type those replace (HASH: those the rows were assigned against)."""

    @property
    def is_empty(self) -> bool:
        return not (
            self.new_index_files
            or self.deleted_index_files
            or self.compact_index_files
            or self.compact_deleted_index_files
            or self.new_files
            or self.deleted_files
            or self.changelog_files
            or self.compact_before
            or self.compact_after
            or self.compact_changelog_files
        )


class ConsumerProgress(JsonModel):
    """Content of ``consumer/consumer-<id>``: the first snapshot a named streaming reader has not read yet."""

    next_snapshot: int
    table_id: str | None = None
    """The identity of the table it was recorded for (``mergetable.commit.schemas.table_identity``); a stream
    refuses a record of another table (one deleted and re-created at this path). None: recorded before
    consumers carried it."""
    full_scan: bool | None = None
    """True while the consumer's first batch, the full read of snapshot ``nextSnapshot`` (a ``*-full`` scan
    mode), has not completed: a stream resuming from the record reads that snapshot in full again. The record is
    written when the stream plans, so expiration keeps the snapshot from then on. None: no full read pending."""


MODELS: tuple[type[JsonModel], ...] = (
    DataFileMeta,
    IndexFileMeta,
    IndexManifestEntry,
    IndexManifest,
    ManifestEntry,
    ManifestFile,
    ManifestFileMeta,
    ManifestList,
    Snapshot,
    Tag,
    ConsumerProgress,
    CommitMessage,
)
