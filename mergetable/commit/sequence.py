"""Commit-time sequence numbers: the order of a key's updates is the order of their commits.

A writer numbers its records per (partition, bucket) from 0, in input order: *writer-local* numbers that
say nothing about other writers. The committer turns them into the table's numbers on every attempt of its
retry loop, against the snapshot the attempt builds on (so after losing a race, the numbers are assigned
again above the commit that won):

* the latest snapshot's ``nextSequenceNumber`` (version 1 snapshots: one past the largest live sequence
  number) is where this commit starts;
* each message's new data and changelog files get one ``sequenceOffset`` so that the message's records
  take the next consecutive numbers, in message order (two messages of one bucket, e.g. two Spark tasks,
  get disjoint ranges); the files' ``min/maxSequenceNumber`` become the effective numbers;
* the snapshot records where the next commit starts.

Every commit's records therefore number above every earlier commit's, whatever snapshot their writer
started from; within a commit, a key's records keep their input order (a writer's run holds one record per key
and stores one number per file, :func:`mergetable.write.files.numbered`). Readers, compaction and changelog producers
read ``_SEQUENCE_NUMBER + sequenceOffset``; compaction writes the effective numbers (offset 0).

With ``sequence.snapshot-ordering`` (Paimon's option) the numbers of a data commit's files are instead the
snapshot id itself: every record of an appended file has the number of the snapshot that committed it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mergetable.metadata.models import CommitMessage, DataFileMeta, ManifestEntry, Snapshot


def next_sequence_number(latest: Snapshot | None, live: Iterable[ManifestEntry]) -> int:
    """Where the next data commit's numbers start, on top of ``latest`` (whose live files are ``live``)."""
    if latest is None:
        return 0
    if latest.next_sequence_number is not None:
        return latest.next_sequence_number
    return max((e.file.max_sequence_number for e in live), default=-1) + 1


def _shifted(f: DataFileMeta, offset: int) -> DataFileMeta:
    return f.model_copy(
        update={
            "min_sequence_number": f.min_sequence_number + offset,
            "max_sequence_number": f.max_sequence_number + offset,
            "sequence_offset": f.stored_sequence_offset + offset or None,
        }
    )


def _stamped(f: DataFileMeta, snapshot_id: int) -> DataFileMeta:
    return f.model_copy(update={"min_sequence_number": snapshot_id, "max_sequence_number": snapshot_id})


def assign_sequence_numbers(
    messages: Sequence[CommitMessage], start: int, snapshot_id: int | None = None
) -> tuple[list[CommitMessage], int]:
    """The messages with committed sequence numbers from ``start`` on, and where the next commit starts.

    ``snapshot_id`` set: ``sequence.snapshot-ordering``, every new file is stamped with that id instead.
    """
    out: list[CommitMessage] = []
    cursor = start
    for m in messages:
        files = (*m.new_files, *m.changelog_files)
        if not files:
            out.append(m)
            continue
        if snapshot_id is not None:
            cursor = max(cursor, snapshot_id + 1)
            out.append(
                m.model_copy(
                    update={
                        "new_files": tuple(_stamped(f, snapshot_id) for f in m.new_files),
                        "changelog_files": tuple(_stamped(f, snapshot_id) for f in m.changelog_files),
                    }
                )
            )
            continue
        low = min(f.min_sequence_number for f in files)
        high = max(f.max_sequence_number for f in files)
        offset = cursor - low
        out.append(
            m.model_copy(
                update={
                    "new_files": tuple(_shifted(f, offset) for f in m.new_files),
                    "changelog_files": tuple(_shifted(f, offset) for f in m.changelog_files),
                }
            )
        )
        cursor += high - low + 1
    return out, cursor
