"""Schema files: creating a table's first schema, finding its newest one, committing schema changes."""

from __future__ import annotations

import warnings
from collections.abc import Collection, Sequence

from mergetable.commit.foreign import DELTA_LOG, delta_message, foreign_table
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.errors import (
    CorruptMetadataError,
    MergeTableError,
    TableNotFoundError,
    UnknownOptionsWarning,
    UnsupportedError,
)
from mergetable.core.evolution import SchemaChange, apply_changes
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory
from mergetable.core.schema import TableSchema
from mergetable.merge import validate_merge_options


def table_identity(fileio: FileIO) -> str | None:
    """The identity of the table at ``fileio``'s root (None: no table is there).

    The ``tableUuid`` of its first schema; for a table created before tables had one, ``created-<ms>``, from
    the creation time of that schema (a table deleted and created again at the same path gets another).
    Streaming offsets and consumer records carry it, and Spark writes check it at commit, so that a table
    re-created at their path refuses them.

    >>> import pyarrow as pa, tempfile, mergetable as mt
    >>> t = mt.create_table(tempfile.mkdtemp() + "/t", pa.schema([("k", pa.int64())]), primary_key=["k"])
    >>> table_identity(t.fileio) == t.table_schema.table_uuid
    True
    """
    path = PathFactory(fileio.root).schema_file(0)
    try:
        first = TableSchema.from_json(fileio.read_bytes(path), path)
    except FileNotFoundError:
        return None
    return first.table_uuid or f"created-{first.time_millis}"


class SchemaManager:
    """The ``schema/schema-<id>`` files of one table."""

    def __init__(self, fileio: FileIO) -> None:
        self.fileio = fileio
        self.paths = PathFactory(fileio.root)

    def ids(self) -> list[int]:
        """Ids of the stored schemas, ascending (empty: there is no table)."""
        ids = (self.paths.schema_id(n) for n in self.fileio.list_names(self.paths.schema_dir))
        return sorted(i for i in ids if i is not None)

    def not_found(self) -> str:
        """Why there is no table here, for :class:`TableNotFoundError`: a file, an empty place, no schema."""
        where = self.fileio.uri
        if self.fileio.fs.isfile(self.fileio.root):
            return (
                f"no mergetable table at {where}: it is a file; a table is the directory holding schema/ and snapshot/"
            )
        if not self.fileio.fs.exists(self.fileio.root):
            return f"no mergetable table at {where}"
        if DELTA_LOG in self.fileio.list_names(self.fileio.root):
            return delta_message(where)
        return f"no mergetable table at {where}: the directory has no schema/ (is it the table's own directory?)"

    def exists(self) -> bool:
        """Whether any schema file exists, i.e. a table was created here."""
        return bool(self.fileio.list_names(self.paths.schema_dir))

    def create(self, schema: TableSchema) -> bool:
        """Store ``schema`` as schema 0 unless one exists (atomic). True if this call created the table."""
        return self.fileio.write_if_absent(self.paths.schema_file(0), schema.to_json().encode())

    def schema(self, schema_id: int) -> TableSchema:
        """The stored schema ``schema_id``.

        Raises:
            CorruptMetadataError: The schema file is missing or cannot be parsed.
        """
        path = self.paths.schema_file(schema_id)
        try:
            data = self.fileio.read_bytes(path)
        except FileNotFoundError:
            raise CorruptMetadataError(path, "schema file is missing (a data file or snapshot references it)") from None
        return TableSchema.from_json(data, path)

    def commit_changes(self, changes: Sequence[SchemaChange], allow: Collection[str] = ()) -> TableSchema:
        """Apply ``changes`` to the newest schema and publish the result as the next ``schema-<id>``.

        Published with create-if-absent, as snapshots are: when a concurrent change takes the id first, the
        changes are applied again to that newer schema (so they are checked against it). Writers that
        prepared files under an older schema still commit: readers project their files by field id.
        ``allow``: immutable options the caller changes together with the data (a rescale's ``bucket``).

        Raises:
            TableNotFoundError: There is no table.
            SchemaChangeError, ImmutableOptionError, OptionsError, SchemaError: A change is refused; no
                file is written.
        """
        has_snapshots = SnapshotManager(self.fileio).latest_id() is not None
        while True:
            latest = self.latest()
            if latest is None:
                raise TableNotFoundError(f"no mergetable table at {self.fileio.uri}")
            new = apply_changes(latest, list(changes), has_snapshots, allow)
            validate_merge_options(new)
            if new.model_dump(exclude={"id", "time_millis"}) == latest.model_dump(exclude={"id", "time_millis"}):
                return latest
            if self.fileio.write_if_absent(self.paths.schema_file(new.id), new.to_json().encode()):
                return new

    def latest(self) -> TableSchema | None:
        """The newest schema with its options validated (None: there is no table).

        Raises:
            CorruptMetadataError: The schema file cannot be parsed or holds invalid options.
        """
        ids = self.ids()
        if not ids:
            return None
        path = self.paths.schema_file(ids[-1])
        try:
            schema = TableSchema.from_json(self.fileio.read_bytes(path), path)
            try:
                schema.table_options  # noqa: B018 - validate stored options eagerly
            except MergeTableError as exc:
                raise CorruptMetadataError(path, f"invalid stored options: {exc}") from exc
        except (CorruptMetadataError, UnsupportedError) as exc:  # a newer format version, or another format's table
            foreign = foreign_table(self.fileio)
            if foreign is None:
                raise
            raise UnsupportedError(foreign) from exc
        if schema.unknown_options and (foreign := foreign_table(self.fileio)) is not None:
            raise UnsupportedError(foreign)
        if schema.unknown_options:
            warnings.warn(
                f"{path}: option(s) {', '.join(schema.unknown_options)} are unknown to this mergetable (a newer "
                "version wrote them): the table is read without them and cannot be written; upgrade mergetable",
                UnknownOptionsWarning,
                stacklevel=2,
            )
        return schema


__all__ = ["SchemaManager", "table_identity"]
