"""Discarding uncommitted files: the one place that deletes what writers and compactions wrote but did not publish."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import CommitMessage


def discard_uncommitted(
    fileio: FileIO,
    schema: TableSchema,
    messages: Iterable[CommitMessage | None],
    keep: Collection[str] = (),
    protect_latest: bool = False,
) -> list[str]:
    """Delete the files ``messages`` added (data, changelog, compaction output) and return their paths.

    Never deleted: a compaction's upgraded inputs (the same file at a new level), file names in ``keep``
    and, with ``protect_latest``, the files live in the latest snapshot (for messages that may have been
    committed after all). Deletion is best effort: a file that cannot be deleted is an orphan, which
    ``remove_orphan_files`` deletes later.

    Args:
        fileio: The table's storage.
        schema: The table schema (it places the files: partition keys and default partition name).
        messages: Commit messages whose files were not published; None entries are skipped.
        keep: Names of files that must stay.
        protect_latest: Also keep every file the latest snapshot references.
    """
    kept = set(keep)
    if protect_latest:
        latest = SnapshotManager(fileio).latest()
        kept.update(e.file.file_name for e in ManifestIO(fileio).live_entries(latest))
        kept.update(e.index_file.file_name for e in IndexManifestIO(fileio).entries(latest))
    paths = PathFactory.for_table(fileio.root, schema)
    doomed = []
    for m in messages:
        if m is None:
            continue
        upgraded = {f.file_name for f in m.compact_before}
        for f in (*m.new_files, *m.changelog_files, *m.compact_after, *m.compact_changelog_files):
            if f.file_name not in kept and f.file_name not in upgraded:
                doomed.append(paths.data_file(m.partition, m.bucket, f.file_name))
        written = (*m.compact_index_files, *m.new_index_files)
        doomed += [paths.index_file(f.file_name) for f in written if f.file_name not in kept]
    fileio.delete_quietly(doomed)
    return doomed
