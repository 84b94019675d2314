"""Deletion-vector index files and the index manifest that a snapshot references (``indexManifest``).

A compaction of a deletion-vector table replaces every index file of the bucket it compacts: it writes the
bucket's vectors after the compaction (:meth:`IndexManifestIO.write_vectors`, rolled at
``deletion-vector.index-file.target-size``) and names the files it replaces; the commit folds both into the
latest snapshot's index manifest (:meth:`IndexManifestIO.updated`) and publishes the new manifest with the data
files in one snapshot. A snapshot whose index files did not change keeps its predecessor's manifest.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from mergetable.commit.manifests import _cached, _remember
from mergetable.core.buckets import Partition
from mergetable.core.deletion_vectors import (
    DELETION_VECTORS_INDEX,
    DeletionFile,
    Vector,
    load_vector,
    rolled_index_files,
)
from mergetable.core.errors import CommitConflictError, CorruptMetadataError
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory
from mergetable.metadata.models import (
    CommitMessage,
    DeletionVectorMeta,
    FileKind,
    IndexFileMeta,
    IndexManifest,
    IndexManifestEntry,
    Snapshot,
)

BucketId = tuple[Partition, int]


class IndexManifestIO:
    """Reads and writes the index manifests and deletion-vector index files of one table."""

    def __init__(self, fileio: FileIO) -> None:
        self.fileio = fileio
        self.paths = PathFactory(fileio.root)

    def entries(self, snapshot: Snapshot | None) -> tuple[IndexManifestEntry, ...]:
        """The live index files of ``snapshot`` (none without an index manifest)."""
        if snapshot is None or snapshot.index_manifest is None:
            return ()
        name = snapshot.index_manifest
        key = (self.fileio.uri, name)
        hit = _cached(key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        path = self.paths.manifest_file(name)
        try:
            text = self.fileio.read_bytes(path)
        except FileNotFoundError:
            raise CorruptMetadataError(path, "index manifest is missing") from None
        entries = IndexManifest.from_json(text, path).entries
        _remember(key, entries)
        return entries

    def write(self, entries: Sequence[IndexManifestEntry]) -> str:
        """Write an index manifest of ``entries``; its file name."""
        name = self.paths.new_index_manifest_name()
        self.fileio.write_bytes(
            self.paths.manifest_file(name), IndexManifest(entries=tuple(entries)).to_json().encode()
        )
        return name

    def updated(
        self,
        latest: Snapshot | None,
        messages: Iterable[CommitMessage],
        dropped: Iterable[Partition] = (),
        compaction: bool = True,
        live_files: Collection[tuple[Partition, int, str]] | None = None,
    ) -> list[IndexManifestEntry] | None:
        """The index entries after ``messages``' index changes (a compaction's with ``compaction``, else a
        row-level operation's; and without the index files of the ``dropped`` partitions, which an overwrite
        empties) on top of ``latest``; None when nothing changes.

        Raises :class:`CommitConflictError` when a concurrent commit changed the vectors of a bucket the
        messages write vectors for (an index file they replace is no longer live, or the bucket has one they do
        not replace), or when a vector they write marks a data file that is not in ``live_files`` (the data
        files live after the commit; a concurrent commit removed it)."""
        messages = list(messages)
        current = list(self.entries(latest))
        gone = set(dropped)

        def deleted_of(m: CommitMessage) -> tuple[IndexFileMeta, ...]:
            return _vectors(m.compact_deleted_index_files if compaction else m.deleted_index_files)

        def added_of(m: CommitMessage) -> tuple[IndexFileMeta, ...]:
            return _vectors(m.compact_index_files if compaction else m.new_index_files)

        removed = {(m.partition, m.bucket, f.file_name) for m in messages for f in deleted_of(m)}
        added = [
            IndexManifestEntry(kind=FileKind.ADD, partition=m.partition, bucket=m.bucket, index_file=f)
            for m in messages
            for f in added_of(m)
        ]
        if not removed and not added and not any(e.partition in gone for e in current):
            return None
        # a dynamic bucket's HASH index files are folded by the commit (commit.bucket_index), not checked here
        live = {(e.partition, e.bucket, e.index_file.file_name) for e in current if _is_vectors(e.index_file)}
        for partition, bucket, name in sorted(removed - live, key=str):
            raise CommitConflictError(
                f"index file {name} (bucket {bucket}, partition {list(partition)}) is no longer live: a concurrent "
                "commit changed the bucket's deletion vectors"
            )
        written = {(e.partition, e.bucket) for e in added}
        for partition, bucket, name in sorted(live - removed, key=str):
            if (partition, bucket) in written and partition not in gone:
                raise CommitConflictError(
                    f"index file {name} (bucket {bucket}, partition {list(partition)}) was added by a concurrent "
                    "commit that changed the bucket's deletion vectors"
                )
        if live_files is not None:
            for e in added:
                for r in e.index_file.deletion_vectors_ranges:
                    if (e.partition, e.bucket, r.data_file_name) not in live_files:
                        raise CommitConflictError(
                            f"data file {r.data_file_name} (bucket {e.bucket}, partition {list(e.partition)}) is no "
                            "longer live: a concurrent commit removed the file whose rows a deletion vector marks"
                        )
        kept = [
            e
            for e in current
            if (e.partition, e.bucket, e.index_file.file_name) not in removed and e.partition not in gone
        ]
        return [*kept, *added]

    # -- index files ------------------------------------------------------------------------------
    def write_vectors(self, vectors: Mapping[str, Vector], bitmap64: bool, target_size: int) -> list[IndexFileMeta]:
        """Write ``vectors`` (data file name → vector; empty ones left out) into new index files."""
        metas: list[IndexFileMeta] = []
        kept = {name: v for name, v in sorted(vectors.items()) if len(v)}
        try:
            for data, ranges in rolled_index_files(kept, bitmap64, target_size):
                name = self.paths.new_index_file_name()
                self.fileio.write_bytes(self.paths.index_file(name), data)
                metas.append(
                    IndexFileMeta(
                        index_type=DELETION_VECTORS_INDEX,
                        file_name=name,
                        file_size=len(data),
                        row_count=len(ranges),
                        deletion_vectors_ranges=tuple(
                            DeletionVectorMeta(
                                data_file_name=r.data_file, offset=r.offset, length=r.length, cardinality=r.cardinality
                            )
                            for r in ranges
                        ),
                    )
                )
        except BaseException:
            self.delete_files(metas)
            raise
        return metas

    def delete_files(self, metas: Iterable[IndexFileMeta]) -> None:
        """Delete index files that will not be committed."""
        self.fileio.delete_quietly([self.paths.index_file(m.file_name) for m in metas])

    def deletion_files(self, snapshot: Snapshot | None) -> dict[BucketId, dict[str, DeletionFile]]:
        """Per bucket, where each data file's vector lies."""
        out: dict[BucketId, dict[str, DeletionFile]] = {}
        for e in self.entries(snapshot):
            if e.index_file.index_type != DELETION_VECTORS_INDEX:
                continue
            files = out.setdefault((e.partition, e.bucket), {})
            for r in e.index_file.deletion_vectors_ranges:
                files[r.data_file_name] = DeletionFile(e.index_file.file_name, r.offset, r.length, r.cardinality)
        return out

    def bucket_index_files(self, snapshot: Snapshot | None, partition: Partition, bucket: int) -> list[IndexFileMeta]:
        return [e.index_file for e in self.entries(snapshot) if e.partition == partition and e.bucket == bucket]

    def vectors(self, deletion_files: Mapping[str, DeletionFile]) -> dict[str, Vector]:
        """The vectors themselves, by data file name."""
        index_dir = self.paths.index_dir
        return {name: load_vector(self.fileio, index_dir, d) for name, d in deletion_files.items()}


def _is_vectors(f: IndexFileMeta) -> bool:
    return f.index_type == DELETION_VECTORS_INDEX


def _vectors(files: tuple[IndexFileMeta, ...]) -> tuple[IndexFileMeta, ...]:
    return tuple(f for f in files if _is_vectors(f))


def marks_rows(m: CommitMessage) -> bool:
    """Whether a write's message changes deletion vectors (a row-level operation on an append table): its rows
    are then marked deleted, and the commit is an overwrite. A dynamic bucket's HASH index files do not count."""
    return bool(_vectors(m.new_index_files) or _vectors(m.deleted_index_files))


__all__ = ["BucketId", "IndexManifestIO", "marks_rows"]
