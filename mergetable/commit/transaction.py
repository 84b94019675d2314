"""The writer lifecycle: write, prepare, then commit on success or discard on failure, in one object.

Every writer of the table goes through a :class:`WriteTransaction` (``Table.writing`` makes one): the
table facade's ``write``/``commit``/``abort``, row-level operations (DML), the Spark writers (batch and
streaming) and the compaction job. What it wrote is committed whole or deleted (best effort: a file that
cannot be deleted is an orphan for ``remove_orphan_files``), and never reported as failed once committed:

* ``with tx: ...`` commits on a normal exit and discards everything it wrote (or adopted) on an exception;
  :meth:`~WriteTransaction.commit` and :meth:`~WriteTransaction.discard` may also be called explicitly.
* A failed commit leaves the table unchanged and deletes the files (every file the latest snapshot
  references kept), unless the outcome is unknown (:class:`~mergetable.core.errors.CommitStateUnknownError`):
  then the files are kept, as the snapshot may reference them. A committed transaction ignores later
  failures: the hook run after the commit (compaction) is logged when it fails, never raised, and so is
  the snapshot expiration that follows it (:func:`~mergetable.commit.maintenance.expire_after_commit`;
  skipped when :attr:`~WriteTransaction.expires` is false: a ``write-only`` writer).
* Work split across processes uses the same object on each side: a task writes and hands its messages
  off (:meth:`~WriteTransaction.hand_off`; it then owns nothing), the driver adopts them all
  (:meth:`~WriteTransaction.adopt`) and commits or discards them as one.
* ``precondition(messages, latest)`` runs in every attempt of the data commit, against the snapshot it
  builds on; what it raises aborts the commit (row-level operations check for concurrent changes there).
"""

from __future__ import annotations

import enum
import functools
import itertools
import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from types import TracebackType
from typing import Any, TypedDict, Unpack

import pyarrow as pa

from mergetable.commit.bucket_index import LatestHashIndex, hash_files
from mergetable.commit.committer import Committer
from mergetable.commit.cross_partition import key_route_guard, remember_keys
from mergetable.commit.discard import discard_uncommitted
from mergetable.commit.maintenance import expire_after_commit
from mergetable.commit.overwrite import check_overwrite, check_partitions, overwrite_spec
from mergetable.commit.postpone import batch_bucket_counts
from mergetable.core.errors import CommitConflictError, CommitStateUnknownError, MergeTableError, UnsupportedError
from mergetable.core.fileio import FileIO
from mergetable.core.schema import TableSchema
from mergetable.core.txn import Txn
from mergetable.merge import MergeFunction
from mergetable.metadata.models import CommitMessage, Snapshot
from mergetable.write.append import AppendWriter
from mergetable.write.bucket_assign import DynamicBucketAssigner, PartitionHashes
from mergetable.write.cross_partition import KeyBootstrap, router_for
from mergetable.write.input import RowKindArg
from mergetable.write.writer import MergeRuns, TableWriter

log = logging.getLogger(__name__)
_identifiers = itertools.count(1)

WritePrecondition = Callable[[Sequence[CommitMessage], Snapshot | None], None]
"""``precondition(messages, latest)``: raise to abort the commit of ``messages`` on top of ``latest``."""
RetractRecords = Callable[["WriteTransaction", pa.Table], object]
"""Apply an append table's ``-D`` rows (left by its writer) to the stored records: stage the changes in the
transaction, before it commits (:func:`mergetable.dml.append.retract_records`)."""
AfterCommit = Callable[[Sequence[CommitMessage], Snapshot], object]
"""Run once the messages are committed as the snapshot (the compaction a write triggers)."""


class CommitArgs(TypedDict, total=False):
    """How a :class:`WriteTransaction` commits: its keyword arguments but ``overwrite`` and ``after_commit``."""

    commit_user: str | None
    identifier: int | None
    properties: dict[str, str] | None
    txn: Txn | None
    precondition: WritePrecondition | None


class TxState(enum.Enum):
    """Where a :class:`WriteTransaction` is: only an ``OPEN`` one writes, commits or discards."""

    OPEN = "open"
    COMMITTED = "committed"
    DISCARDED = "discarded"
    HANDED_OFF = "handed off"
    UNKNOWN = "outcome unknown"


def open_writer(
    fileio: FileIO, schema: TableSchema, merge_function: MergeFunction, overwrite: bool = False, batch: bool = False
) -> TableWriter:
    """A table writer whose ``abort`` deletes its files through :func:`discard_uncommitted` (an
    :class:`AppendWriter` for a table without a primary key). ``overwrite``: its rows replace the partitions
    they are in, so a dynamic-bucket table places them against an empty index there. ``batch``: a batch write,
    which a postpone table writes into fixed buckets (:mod:`mergetable.commit.postpone`); other writes into it
    are postponed."""
    discard = functools.partial(discard_uncommitted, fileio, schema)
    if schema.is_append_table:
        out: TableWriter = AppendWriter(fileio, schema, merge_function, discard)
    else:
        loader = (lambda _: PartitionHashes()) if overwrite else LatestHashIndex(fileio)
        assigner = DynamicBucketAssigner(fileio, schema, loader) if schema.is_dynamic_bucket else None
        out = TableWriter(fileio, schema, merge_function, discard, assigner=assigner)
    if batch:
        out.bucket_counts = batch_bucket_counts(fileio, schema)
    return out


class WriteTransaction:
    """One writer's lifecycle: files written (or adopted) here are committed as one snapshot, or deleted.

    Args:
        fileio, schema, merge_function: The table (``schema`` is the one the commit is made with; a
            compaction that adopts a newer schema while it runs sets :attr:`schema`).
        overwrite: As in :meth:`mergetable.Table.write`; a partition spec is checked on the input first.
        commit_user, identifier: Name the commit (default: a fresh user, a process-wide counter).
        properties: Stored in the snapshot.
        txn: An application transaction (:mod:`mergetable.commit.txn`): a version already committed
            raises :class:`~mergetable.core.errors.AlreadyCommittedError` (files deleted, table unchanged).
        precondition: See :data:`WritePrecondition` and the module docstring.
        after_commit: See :data:`AfterCommit`; its failures are logged, never raised.

    Example:
        >>> import tempfile, pyarrow as pa, mergetable as mt
        >>> t = mt.create_table(tempfile.mkdtemp(), pa.schema([("id", pa.int64())]), ["id"])
        >>> with t.writing(properties={"job": "load"}) as w:
        ...     w.write(pa.table({"id": [1, 2]}))
        >>> w.state.name, w.snapshot.properties, t.read().num_rows
        ('COMMITTED', {'job': 'load'}, 2)
    """

    def __init__(
        self,
        fileio: FileIO,
        schema: TableSchema,
        merge_function: MergeFunction,
        *,
        overwrite: bool | dict[str, Any] = False,
        after_commit: AfterCommit | None = None,
        **args: Unpack[CommitArgs],
    ) -> None:
        check_overwrite(overwrite)
        self.fileio = fileio
        self.schema = schema
        self.merge_function = merge_function
        self.overwrite = overwrite
        self.commit_user = args.get("commit_user") or str(uuid.uuid4())
        identifier = args.get("identifier")
        self.identifier = identifier if identifier is not None else next(_identifiers)
        self.properties = args.get("properties")
        self.txn = args.get("txn")
        self.precondition = args.get("precondition")
        self.after_commit = after_commit
        self.retract_records: RetractRecords | None = None
        """Set by :meth:`mergetable.Table.writing`: where an append table's ``-D`` rows are applied."""
        self.merge_runs: MergeRuns | None = None
        self.key_index: KeyBootstrap | None = None
        """Set by :meth:`mergetable.Table.writing`: the key locations a cross-partition table's rows are routed
        against (:mod:`mergetable.write.cross_partition`)."""
        """Given to the writer (:attr:`TableWriter.merge_runs`): how it merges a bucket's spilled runs."""
        self.expires = not schema.table_options.write_only
        """Whether a commit is followed by the options' snapshot expiration (the compaction job sets it)."""
        self.state = TxState.OPEN
        self.snapshot: Snapshot | None = None
        """The last snapshot the commit made (None: not committed, or nothing to commit)."""
        self.committed_messages: list[CommitMessage] = []
        """The messages the commit published (empty until committed)."""
        self._writer: TableWriter | None = None
        self._messages: list[CommitMessage] = []
        self._adopted = False  # messages with HASH index files from writers we do not know

    # -- collecting files ----------------------------------------------------------------------------
    def write(
        self, data: Any, row_kind: RowKindArg = None, target_columns: Sequence[str] | None = None, cast: bool = False
    ) -> None:
        """Write rows (see :meth:`mergetable.Table.write`); nothing is visible before :meth:`commit`."""
        self.writer.write(data, row_kind, target_columns, cast)

    @property
    def writer(self) -> TableWriter:
        """The transaction's table writer, opened on first use (a Spark task sets its ``assigner`` before it
        writes: :mod:`mergetable.spark.dynamic`)."""
        self._require_open("write")
        if self._writer is None:
            self._writer = open_writer(
                self.fileio, self.schema, self.merge_function, self.overwrite is not False, batch=True
            )
            self._writer.merge_runs = self.merge_runs
            self._writer.router = router_for(self.schema, self.key_index, self.overwrite)
            if isinstance(self.overwrite, dict):
                self._writer.partition_check = functools.partial(
                    check_partitions, self.schema, overwrite=self.overwrite
                )
        return self._writer

    def prepare(self) -> list[CommitMessage]:
        """Flush what :meth:`write` buffered; returns every message the transaction holds."""
        self._require_open("prepare")
        if self._writer is not None:
            self._messages.extend(self._writer.prepare_commit())
        return list(self._messages)

    def adopt(self, messages: Sequence[CommitMessage]) -> None:
        """Take over messages prepared elsewhere (a task's, a compaction's): committed or discarded with ours."""
        self._require_open("adopt messages")
        self._messages.extend(messages)
        self._adopted = self._adopted or any(hash_files(m.new_index_files) for m in messages)

    def drop(self, messages: Sequence[CommitMessage]) -> None:
        """Forget ``messages`` (held by this transaction) and delete their files."""
        self._require_open("drop messages")
        ids = {id(m) for m in messages}
        self._messages = [m for m in self._messages if id(m) not in ids]
        discard_uncommitted(self.fileio, self.schema, messages)

    def hand_off(self) -> list[CommitMessage]:
        """Prepare and give every message to whoever commits them (a driver); this transaction is then done."""
        messages = self.prepare()
        self._messages = []
        self.state = TxState.HANDED_OFF
        return messages

    # -- ending ----------------------------------------------------------------------------------------
    def commit(self, keep_on_conflict: bool = False) -> Snapshot | None:
        """Publish the messages as one data snapshot (plus a COMPACT one for compaction files).

        Nothing is published when there is nothing to write and no overwrite. On failure the files are
        deleted (see the module docstring); ``keep_on_conflict``: a
        :class:`~mergetable.core.errors.CommitConflictError` leaves the transaction open instead, for the
        caller to drop what conflicted and commit again.

        Returns:
            The last snapshot made, None when there was nothing to commit.
        """
        self._require_open("commit")
        try:
            self._apply_retracts()
            messages = self.prepare()
        except BaseException:
            self.discard()
            raise
        if not messages and self.overwrite is False:
            self.state = TxState.COMMITTED
            return None
        guard: Callable[[Snapshot | None], None] | None = None
        if self.precondition is not None:
            guard = functools.partial(self.precondition, messages)
        router = None if self._writer is None else self._writer.router
        if router is not None and router.routed_rows:
            guard = key_route_guard(self.fileio, router.base_snapshot_id, guard)
        try:
            spec = overwrite_spec(self.schema, messages, self.overwrite)
            committer = Committer(self.fileio, self.schema, self.commit_user)
            if self._writer is not None and not self._adopted:
                committer.index_bases = self._writer.index_bases
            snaps = committer.commit(messages, self.identifier, spec, self.properties, self.txn, guard)
        except CommitStateUnknownError:
            self.state = TxState.UNKNOWN  # the snapshot may reference the files: keep them
            raise
        except CommitConflictError:
            if not keep_on_conflict:
                self.discard(protect_latest=True)
            raise
        except BaseException:
            self.discard(protect_latest=True)
            raise
        self.state = TxState.COMMITTED
        self.committed_messages = messages
        self.snapshot = snaps[-1] if snaps else None
        if router is not None and snaps:
            remember_keys(self.key_index, router, snaps[0])
        if self.snapshot is not None and self.after_commit is not None:
            try:
                self.after_commit(messages, self.snapshot)
            except Exception as exc:  # the data is committed: never report the write as failed
                log.warning("after snapshot %d was committed: %s", self.snapshot.id, exc)
        if self.snapshot is not None and self.expires:
            expire_after_commit(self.fileio, self.schema)  # never raises
        return self.snapshot

    def _apply_retracts(self) -> None:
        """Hand an append table's ``-D`` rows left by the writer to :attr:`retract_records`."""
        retracts = self._writer.take_retracts() if isinstance(self._writer, AppendWriter) else None
        if retracts is None:
            return
        if self.retract_records is None or self.overwrite is not False:
            what = "an overwrite" if self.overwrite is not False else "this writer"
            raise UnsupportedError(f"-D rows of an append table cannot be written by {what}; use Table.write()")
        self.retract_records(self, retracts)

    def discard(self, keep: Collection[str] = (), protect_latest: bool = False) -> list[str]:
        """Delete every file written or adopted (but ``keep``, and with ``protect_latest`` the latest
        snapshot's files); a transaction that is not open has nothing to discard. Returns the paths."""
        if self.state is not TxState.OPEN:
            return []
        self.state = TxState.DISCARDED
        if self._writer is not None:
            self._writer.abort()
        messages, self._messages = self._messages, []
        return discard_uncommitted(self.fileio, self.schema, messages, keep, protect_latest)

    def __enter__(self) -> WriteTransaction:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.state is not TxState.OPEN:
            return
        if exc_type is None:
            self.commit()
        else:
            self.discard()

    def _require_open(self, action: str) -> None:
        if self.state is not TxState.OPEN:
            raise MergeTableError(f"cannot {action}: the write transaction is {self.state.value}")


__all__ = ["AfterCommit", "RetractRecords", "TxState", "WritePrecondition", "WriteTransaction", "open_writer"]
