"""The table facade: create/open, write, read/scan with time travel, tags, maintenance.

Orchestration only: every method delegates to the write, commit, read and compaction tiers (see
``docs/architecture.md``). The examples run as doctests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, Unpack

import pyarrow as pa
from pyroaring import BitMap, BitMap64

from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.result import CommitResult, commit_result
from mergetable.commit.schemas import SchemaManager
from mergetable.commit.store import TableStore
from mergetable.commit.transaction import CommitArgs, WriteTransaction, open_writer
from mergetable.commit.travel import resolve_travel
from mergetable.compaction.mixin import Compacting
from mergetable.compaction.rescale import Rescaling
from mergetable.compaction.spill import spill_merger
from mergetable.core.errors import AlreadyCommittedError, TableExistsError, TableNotFoundError
from mergetable.core.fileio import FileIO
from mergetable.core.filters import bind_filters
from mergetable.core.options import DEFAULT_SPLIT_SIZE
from mergetable.core.predicates import Conjunct, Filters
from mergetable.core.progress import wanted
from mergetable.core.read_options import ReadArgs, ReadRequest
from mergetable.core.schema import TableSchema, check_column
from mergetable.core.txn import Txn, make_txn
from mergetable.dml.api import RowLevelOperations
from mergetable.interop.notebook import SnapshotList
from mergetable.interop.views import DataViews
from mergetable.merge import validate_merge_options
from mergetable.metadata.models import CommitMessage, Snapshot
from mergetable.read.change_api import ChangeData
from mergetable.read.count import count_rows
from mergetable.read.key_index import key_index
from mergetable.read.reader import SplitReader
from mergetable.read.request import diff_batches, plan_request
from mergetable.read.scan import Sections, Split
from mergetable.read.system_tables import system_table
from mergetable.write.input import RowKindArg, with_progress
from mergetable.write.writer import TableWriter

log = logging.getLogger(__name__)


def create_table(
    uri: str,
    schema: pa.Schema,
    primary_key: Sequence[str] | None = None,
    partition_keys: Sequence[str] = (),
    options: dict[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    comment: str | None = None,
    exist_ok: bool = False,
) -> Table:
    """Create a table at ``uri`` and return it: a primary-key table, or without ``primary_key`` an append table
    (rows kept as written, in commit order; Paimon's append table, ``bucket`` -1 by default).

    Args:
        uri: A local path or any fsspec URL (``s3://bucket/warehouse/t``).
        schema: The columns; the primary key columns become NOT NULL.
        primary_key: The key columns; partition keys must be among them. None or empty: an append table.
        partition_keys: Columns whose values name the table's directories.
        options: Table options by Paimon name (``{"bucket": "4", "merge-engine": "partial-update"}``).
        storage_options: Passed to fsspec (credentials, endpoint).
        comment: Free text stored with the schema.
        exist_ok: Return the existing table instead of failing when it has the same primary key.

    Raises:
        TableExistsError: A table exists at ``uri`` (with ``exist_ok``: one with another primary key).
        SchemaError, OptionsError: The schema or the options are invalid.

    Example:
        >>> import tempfile, pyarrow as pa, mergetable as mt
        >>> t = mt.create_table(tempfile.mkdtemp(), pa.schema([("id", pa.int64()), ("v", pa.string())]), ["id"])
        >>> t.primary_key
        ('id',)
        >>> events = mt.create_table(tempfile.mkdtemp(), pa.schema([("event", pa.string())]))
        >>> events.primary_key, events.options["bucket"]
        ((), '-1')
    """
    fileio = FileIO(uri, storage_options)
    table_schema = TableSchema.create(schema, primary_key, partition_keys, options, comment)
    validate_merge_options(table_schema)
    if not SchemaManager(fileio).create(table_schema):
        if exist_ok:
            existing = open_table(uri, storage_options)
            if existing.table_schema.primary_keys != table_schema.primary_keys:
                raise TableExistsError(f"a table with another primary key already exists at {uri}")
            return existing
        raise TableExistsError(f"a table already exists at {uri}")
    return Table(fileio, table_schema)


def open_table(uri: str, storage_options: dict[str, Any] | None = None) -> Table:
    """Open the table at ``uri`` with its newest schema.

    Raises:
        TableNotFoundError: There is no table at ``uri``.
        CorruptMetadataError: Its schema file cannot be read.

    Example:
        >>> import tempfile, pyarrow as pa, mergetable as mt; uri = tempfile.mkdtemp()
        >>> _ = mt.create_table(uri, pa.schema([("id", pa.int64())]), ["id"]); mt.open_table(uri).schema.names
        ['id']
    """
    schema = (manager := SchemaManager(FileIO(uri, storage_options))).latest()
    if schema is None:
        raise TableNotFoundError(manager.not_found())
    return Table(manager.fileio, schema)


def table_exists(uri: str, storage_options: dict[str, Any] | None = None) -> bool:
    """Whether a table was created at ``uri``.

    Example:
        >>> import tempfile, pyarrow as pa, mergetable as mt; uri = tempfile.mkdtemp()
        >>> mt.table_exists(uri), bool(mt.create_table(uri, pa.schema([("k", pa.int8())]), ["k"])), mt.table_exists(uri)
        (False, True, True)
    """
    return SchemaManager(FileIO(uri, storage_options)).exists()


class Table(TableStore, ChangeData, DataViews, RowLevelOperations, Rescaling, Compacting):
    """A table: with a primary key, rows merged per key by its merge engine; without one, an append table whose
    rows are kept in commit order. Either way committed as snapshots.

    Obtain one with :func:`create_table` or :func:`open_table`. A ``Table`` holds no open resources and
    pickles to its location and schema. What it holds (schema, snapshots, tags, files) and their upkeep
    come from :class:`~mergetable.commit.store.TableStore`; this class adds writing, reading and
    compaction; change data (``changelog``, ``audit_log``, ``stream``, ``follow``, consumers) comes from
    :class:`~mergetable.read.change_api.ChangeData`, ``delete``/``update``/``merge``/``history`` from
    :class:`~mergetable.dml.api.RowLevelOperations`, ``rescale`` from
    :class:`~mergetable.compaction.rescale.Rescaling`. The examples of the members use ``t``, the table this
    example makes:

    >>> import tempfile, pyarrow as pa, mergetable as mt
    >>> t = mt.create_table(tempfile.mkdtemp(), pa.schema([("id", pa.int64()), ("v", pa.string())]), ["id"])
    >>> _ = t.write(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    >>> _ = t.write(pa.table({"id": [2], "v": ["B"]}))
    >>> t.read().to_pydict()
    {'id': [1, 2], 'v': ['a', 'B']}

    Attributes:
        fileio: The storage the table lives on.
        table_schema: The persisted schema (columns, keys, options) this object reads and writes with.
    """

    # -- writing ----------------------------------------------------------------------------------
    def writing(self, overwrite: bool | dict[str, Any] = False, **args: Unpack[CommitArgs]) -> WriteTransaction:
        """A write as one transaction: ``with t.writing() as w: w.write(...)`` commits on success (then runs
        the compaction the options ask for) and deletes every file it wrote on failure. Arguments as in
        :meth:`commit`, and a ``precondition`` run in each commit attempt (:mod:`mergetable.commit.transaction`).

        Example:
            >>> with t.writing() as w:
            ...     w.write(pa.table({"id": [3], "v": ["c"]}))
            >>> w.snapshot.id
            3
        """
        tx = WriteTransaction(self.fileio, self.table_schema, self.merge_function, overwrite=overwrite, **args)
        tx.after_commit = lambda messages, snap: self.compaction_job().after_commit(messages, snap)
        tx.merge_runs = spill_merger(self.fileio, self.table_schema, self.merge_function)
        tx.key_index = key_index(self)
        return self._with_retracts(tx)

    def new_writer(self) -> TableWriter:
        """A bare writer, for messages committed by :meth:`commit` (or dropped by :meth:`abort`) later.

        Its records are numbered when committed, above every earlier commit's
        (:mod:`mergetable.commit.sequence`), whichever snapshot was latest when it was opened.

        Example:
            >>> w = t.new_writer()
            >>> w.write(pa.table({"id": [3], "v": ["c"]}))
            >>> t.commit(w.prepare_commit()).id
            3
        """
        writer = open_writer(self.fileio, self.table_schema, self.merge_function)
        writer.merge_runs = spill_merger(self.fileio, self.table_schema, self.merge_function)
        return writer

    def commit(
        self,
        messages: Sequence[CommitMessage],
        overwrite: bool | dict[str, Any] = False,
        commit_user: str | None = None,
        identifier: int | None = None,
        properties: dict[str, str] | None = None,
        txn: Txn | None = None,
    ) -> Snapshot | None:
        """Publish files written by writers as one snapshot (plus a COMPACT one if compaction files are present).

        Then runs the compaction the options ask for after a write. On failure the table is unchanged and
        the messages' files are deleted, unless the outcome is unknown (:class:`CommitStateUnknownError`).

        Args:
            messages: From :meth:`TableWriter.prepare_commit` of one or more writers.
            overwrite: As in :meth:`write`.
            commit_user, identifier: Name the commit; a retry with the same pair finds it (exactly once).
            properties: Stored in the snapshot.
            txn: An application transaction (:mod:`mergetable.commit.txn`): a version already committed
                raises :class:`AlreadyCommittedError` (the messages' files are deleted, the table unchanged).

        Returns:
            The last snapshot made, None when there was nothing to commit.

        Example:
            >>> w = t.new_writer(); w.write(pa.table({"id": [9], "v": ["z"]}))
            >>> t.commit(w.prepare_commit(), properties={"job": "nightly"}).properties
            {'job': 'nightly'}
        """
        tx = self.writing(overwrite, commit_user=commit_user, identifier=identifier, properties=properties, txn=txn)
        tx.adopt(messages)
        return tx.commit()

    def abort(self, messages: Sequence[CommitMessage | None]) -> None:
        """Delete the files of uncommitted messages (never files that the latest snapshot references).

        Example:
            >>> w = t.new_writer(); w.write(pa.table({"id": [7], "v": ["x"]}))
            >>> t.abort(w.prepare_commit())
            >>> 7 in t.read().column("id").to_pylist()
            False
        """
        tx = self.writing()
        tx.adopt([m for m in messages if m is not None])
        tx.discard(protect_latest=True)

    def write(
        self,
        data: Any,
        row_kind: RowKindArg = None,
        overwrite: bool | dict[str, Any] = False,
        target_columns: Sequence[str] | None = None,
        txn_app_id: str | None = None,
        txn_version: int | None = None,
        cast: bool = False,
        progress: bool | None = None,
    ) -> CommitResult:
        """Write rows as one atomic commit.

        Args:
            data: A ``pa.Table``, ``RecordBatch``, iterable of batches or pandas DataFrame with the table's columns.
            row_kind: None (all ``+I``), one of ``"+I"`` ``"-U"`` ``"+U"`` ``"-D"``, or one kind per row.
            overwrite: True replaces the table (partitioned tables: only the partitions present in the data,
                unless ``dynamic-partition-overwrite`` is false), or a partition spec ``{"dt": "2024-01-01"}``.
            target_columns: Write only these columns (a partial write; must include the primary key).
            txn_app_id, txn_version: An idempotent write (Delta's ``txnAppId``/``txnVersion``): when version
                ``txn_version`` or a later one of application ``txn_app_id`` is already committed, nothing is
                written and a warning is logged (:meth:`txn_version` tells the last committed version).
            cast: Also convert what changes a value (parse strings into numbers, round to a decimal's scale);
                without it such data is a :class:`SchemaError` (``mergetable.write.input.cast_column``).
            progress: Show a progress bar over the batches written (default: when run interactively; see
                :mod:`mergetable.core.progress`).

        Returns:
            What it did (:class:`~mergetable.commit.result.CommitResult`: the new snapshot, records and files
            added, files removed); falsy when nothing was written (no rows, or a transaction already committed).

        Example:
            >>> r = t.write(pa.table({"id": [5], "v": ["e"]}), overwrite=True)
            >>> r.snapshot_id, r.num_added_rows, r.num_added_files, r.num_removed_files
            (3, 1, 1, 2)
            >>> t.read().to_pydict()
            {'id': [5], 'v': ['e']}
        """
        started = time.monotonic_ns()
        try:
            with self.writing(overwrite, txn=make_txn(txn_app_id, txn_version)) as w:
                w.write(with_progress(data, "write", wanted(progress)), row_kind, target_columns, cast)
                snap = w.commit()
        except AlreadyCommittedError as exc:
            log.warning("%s", exc)
            return commit_result("WRITE", None, [], started)
        replaced = self.fileio if overwrite is not False else None  # an overwrite's removed files are in its delta
        return commit_result("WRITE", snap, w.committed_messages, started, replaced)

    # -- snapshots, time travel, tags ---------------------------------------------------------------
    def system_table(self, name: str, **time_travel: Any) -> pa.Table:
        """Paimon's system table ``name`` (``snapshots``, ``files``, ``tags``, ...) as an Arrow table.

        ``time_travel``: one of ``snapshot_id``, ``tag``, ``timestamp_ms`` and ``version`` (as in :meth:`read`),
        for the tables that have it; see ``docs/evolution.md``.

        Example:
            >>> t.system_table("snapshots").column("snapshot_id").to_pylist()
            [1, 2]
        """
        return system_table(self.fileio, self.table_schema, name, **time_travel)

    def deletion_vectors(self, snapshot_id: int | None = None) -> dict[str, BitMap | BitMap64]:
        """The deletion vectors of a snapshot (default: the latest): data file path → the row positions it marks
        deleted (``pyroaring.BitMap``, or ``BitMap64`` with ``deletion-vectors.bitmap64``). Empty for a table
        without ``deletion-vectors.enabled``; see ``docs/deletion-vectors.md``.

        Example:
            >>> t.deletion_vectors()
            {}
        """
        snap = self.latest_snapshot() if snapshot_id is None else self.snapshot(int(snapshot_id))
        indexes = IndexManifestIO(self.fileio)
        out: dict[str, BitMap | BitMap64] = {}
        for (partition, bucket), files in indexes.deletion_files(snap).items():
            for name, vector in indexes.vectors(files).items():
                out[self.path_factory.data_file(partition, bucket, name)] = vector
        return out

    # -- reading ----------------------------------------------------------------------------------
    def plan(
        self,
        filter: Filters | None = None,
        target_split_size: int = DEFAULT_SPLIT_SIZE,
        sections: Sections = "all",
        key_ranges: bool = True,
        **args: Unpack[ReadArgs],
    ) -> list[Split]:
        """The splits a read of these arguments (see :meth:`read`) covers, for :meth:`split_reader`; ``sections="raw"``
        or ``"merged"``: only the sections read as plain Parquet (``read.scan.raw_convertible``), or the others;
        ``key_ranges=False``: sections above ``target_split_size`` are not cut into key ranges.

        Example:
            >>> [(s.partition, s.bucket) for s in t.plan()], len(t.plan(sections="raw"))  # two runs: none raw
            ([((), 0)], 0)
        """
        args.setdefault("split_size", target_split_size)
        request = ReadRequest.of(filter=filter, **args)
        return self.plan_bound(request, bind_filters(request.filter, self.schema), sections, key_ranges)

    def plan_bound(
        self, request: ReadRequest, dnf: list[Conjunct] | None, sections: Sections = "all", key_ranges: bool = True
    ) -> list[Split]:
        """:meth:`plan` of a validated ``request`` whose filter is already bound to :attr:`schema` as ``dnf``
        (``core.filters.bind_filters``), for front ends that validate and bind once (the Spark reader)."""
        store = (self._manifests, self._snapshots, self._tags)
        return plan_request(*store, self.table_schema, request, dnf, sections, key_ranges)

    def split_reader(self, columns: Sequence[str] | None = None, filter: Filters | None = None) -> SplitReader:
        """Reads splits of :meth:`plan` (anywhere: it pickles) into merged rows.

        Example:
            >>> next(t.split_reader(["v"]).read_splits(t.plan())).to_pydict()
            {'v': ['a', 'B']}
        """
        for c in columns or ():
            check_column(c, self.table_schema.column_names)
        dnf = bind_filters(filter, self.schema)
        return SplitReader(self.fileio, self.table_schema, self.merge_function, columns, dnf)

    def read(
        self, columns: Sequence[str] | None = None, filter: Filters | None = None, **args: Unpack[ReadArgs]
    ) -> pa.Table:
        """The merged rows of a snapshot (latest by default) as one Arrow table.

        Args:
            columns: The columns to return (default: all).
            filter: pyarrow DNF (``[("id", ">", 1)]``), applied exactly, with partition, bucket and key pruning.
                Literals are coerced to the column types, nulls follow SQL and NaN Spark's order
                (see ``docs/reading.md``); a literal that does not fit raises :class:`FilterError`.
            snapshot_id, timestamp_ms, tag, version: Time travel (at most one). ``timestamp_ms`` takes epoch
                milliseconds, a ``datetime`` or an ISO-8601 string (no zone: local time); ``version`` is a
                tag name, else a snapshot id.
            incremental_between: ``(start, end)`` snapshot ids or tag names, start exclusive: the records
                the APPEND commits in that range wrote, unmerged, without retracts (Paimon's ``delta`` read);
                see :meth:`changelog` for the changes with their row kinds.

        Example:
            >>> t.read(["v"], filter=[("id", ">", 1)]).to_pydict()
            {'v': ['B']}
            >>> t.read(snapshot_id=1).to_pydict()
            {'id': [1, 2], 'v': ['a', 'b']}
            >>> t.read(incremental_between=(1, 2)).to_pydict()
            {'id': [2], 'v': ['B']}
        """
        return self._reader(ReadRequest.of(columns, filter, **args), None, "split_size" in args).read_all()

    def scan(
        self, columns: Sequence[str] | None = None, filter: Filters | None = None, **args: Unpack[ReadArgs]
    ) -> pa.RecordBatchReader:
        """Like :meth:`read`, streamed in batches of at most ``read.batch-size`` rows; memory is bounded by a
        few row groups of each run being merged, not by the size of a bucket.

        Example:
            >>> t.scan(["id"]).read_all().num_rows
            2
        """
        return self._reader(ReadRequest.of(columns, filter, **args), 1, "split_size" in args)

    def _reader(self, request: ReadRequest, ahead: int | None, sized: bool) -> pa.RecordBatchReader:
        """:meth:`scan`, ``ahead`` windows ahead (None: all), ``sized``: a split size was given (else see parallel)."""
        snap = resolve_travel(self._snapshots, self._tags, request.travel) if request.travel.given else None
        if snap is not None and snap.schema_id != self.table_schema.id:
            return self.as_of_schema(snap.schema_id)._reader(request, ahead, sized)
        reader = self.split_reader(request.columns, request.filter)
        inc = request.incremental_between
        if inc is not None and (window := self.change_range(*inc)).tagged:  # between two tags: their diff
            return pa.RecordBatchReader.from_batches(
                reader.out_schema, diff_batches(reader, self.change_planner(), window)
            )
        # no key-range cut unless asked: sections merge on every core (read.whole), and a cut scan holds more streams
        splits = self.plan_bound(request, reader.dnf, key_ranges=sized)
        return pa.RecordBatchReader.from_batches(reader.out_schema, reader.batches(splits, ahead=ahead))

    def as_of_schema(self, schema_id: int) -> Table:
        """This table seen through schema ``schema_id`` (a time travel's, say); ``self`` when it is the current one.

        Example:
            >>> t.as_of_schema(t.snapshot(1).schema_id).schema.names
            ['id', 'v']
        """
        if schema_id == self.table_schema.id:
            return self
        return Table(self.fileio, SchemaManager(self.fileio).schema(schema_id))

    def count(self, filter: Filters | None = None, **args: Unpack[ReadArgs]) -> int:
        """The number of merged rows (matching ``filter``) of a snapshot, from file metadata where it can."""
        return count_rows(self.split_reader(self.primary_key, filter), self.plan(filter, **args))

    # -- maintenance ------------------------------------------------------------------------------
    # -- notebook view (the repr and _repr_html_ come from DataViews) ----------------------------------
    def snapshots(self) -> list[Snapshot]:
        """The table's history: every kept snapshot, oldest first, but those a rollback took out of it; a
        ``list`` that prints as a table of snapshots.

        Example:
            >>> [(s.id, s.commit_kind.name) for s in t.snapshots()]
            [(1, 'APPEND'), (2, 'APPEND')]
        """
        return SnapshotList(super().snapshots())
