"""The error hierarchy. Every error mergetable raises on purpose is a :class:`MergeTableError`."""

from __future__ import annotations

import errno


class MergeTableError(Exception):
    """Root of every error raised by mergetable."""


class OptionsError(MergeTableError, ValueError):
    """A table or read/write option is unknown, malformed or conflicts with another one."""

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        super().__init__(f"option '{option}': {message}")


class ArgumentError(MergeTableError, ValueError, TypeError):
    """An argument has the wrong type or a value it cannot take (``primary_key="id"``, ``overwrite="yes"``)."""

    def __init__(self, argument: str, message: str) -> None:
        self.argument = argument
        super().__init__(f"argument '{argument}': {message}")


class SchemaError(MergeTableError, ValueError):
    """Data or a schema does not fit the table schema (missing column, wrong type, null key ...)."""

    def __init__(self, message: str, column: str | None = None) -> None:
        self.column = column
        super().__init__(message if column is None else f"column '{column}': {message}")


class SchemaChangeError(SchemaError):
    """A schema change (``Table.alter``, ``mergeSchema``) breaks a rule of schema evolution; the column is named."""


class ImmutableOptionError(OptionsError):
    """A table option that cannot change once the table holds data was set or unset; the reason is given."""


class FilterError(SchemaError):
    """A filter literal cannot be coerced to its column's type (or a filter is malformed)."""

    def __init__(self, column: str, message: str) -> None:
        super().__init__(message, column)


class MergeError(MergeTableError):
    """A merge engine cannot merge the records it was given (e.g. a delete the engine does not accept)."""


class CommitConflictError(MergeTableError):
    """A commit conflicts with a concurrent one and cannot be retried (or retries were exhausted)."""


class BucketAssignmentConflictError(CommitConflictError):
    """Two writers of a dynamic-bucket table placed one new key in different buckets: the later commit is
    refused (nothing of it is published); writing the rows again places the key in the bucket that won."""


class ClockSkewError(CommitConflictError):
    """The latest snapshot is dated further ahead of this writer's clock than ``commit.max-clock-skew``."""


class CommitStateUnknownError(MergeTableError):
    """A commit may or may not have landed (storage failed after the snapshot write was attempted)."""


class AlreadyCommittedError(MergeTableError):
    """A write's application transaction (app id, version) is already committed: the write was skipped.

    Raised by :meth:`mergetable.Table.commit`; :meth:`mergetable.Table.write` and the Spark writers log it
    and return normally (an idempotent replay is not a failure).
    """

    def __init__(self, app_id: str, version: int, committed: int) -> None:
        self.app_id, self.version, self.committed = app_id, version, committed
        super().__init__(
            f"transaction version {version} of application '{app_id}' is already committed (last committed "
            f"version: {committed}); the write was skipped"
        )


class CorruptMetadataError(MergeTableError):
    """A metadata file (schema, snapshot, manifest, tag) cannot be read or parsed."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class DataFileError(MergeTableError):
    """A data file referenced by the table is missing or unreadable."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class StorageFullError(MergeTableError, OSError):
    """The storage had no space left (or the quota was reached) while writing a file; the partial file is removed
    and nothing that needed it was committed."""

    def __init__(self, path: str, cause: OSError) -> None:
        self.path = path
        reason = cause.strerror or str(cause)
        super().__init__(cause.errno, f"{path}: {reason}: the storage is full; free space, then retry")

    def __str__(self) -> str:
        return str(self.strerror)


def storage_full(path: str, exc: BaseException) -> StorageFullError | None:
    """The :class:`StorageFullError` that ``exc`` (raised writing ``path``) means, if it means one.

    >>> import errno
    >>> str(storage_full("/t/snapshot/snapshot-3", OSError(errno.ENOSPC, "No space left on device")))
    '/t/snapshot/snapshot-3: No space left on device: the storage is full; free space, then retry'
    >>> storage_full("/t/x", OSError(errno.EACCES, "Permission denied")) is None
    True
    """
    if isinstance(exc, StorageFullError):
        return exc
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageFullError(path, exc)
    return None


class TableNotFoundError(MergeTableError, FileNotFoundError):
    """No table exists at the given location."""


class TableExistsError(MergeTableError, FileExistsError):
    """A table already exists at the given location."""


class TagExistsError(MergeTableError, FileExistsError):
    """A tag of that name already exists."""


class SnapshotNotFoundError(MergeTableError, LookupError):
    """The requested snapshot, timestamp or tag does not exist."""


class SnapshotExpiredError(SnapshotNotFoundError):
    """A stream's next snapshot was expired: reading on would silently skip its changes."""

    def __init__(self, snapshot_id: int, earliest: int | None, how_to_resume: str) -> None:
        self.snapshot_id = snapshot_id
        self.earliest = earliest
        super().__init__(
            f"snapshot {snapshot_id} was expired (the earliest snapshot is {earliest}), so the stream cannot "
            f"continue from it without losing changes; {how_to_resume}"
        )


class TableRecreatedError(MergeTableError):
    """The table at a path is not the one a checkpoint, offset or consumer was written for: it was deleted
    (and re-created) since. Reading on would deliver another table's changes as if they continued the old ones."""

    def __init__(self, uri: str, what: str, expected: str, found: str | None, how_to_start_over: str) -> None:
        self.uri = uri
        self.expected = expected
        self.found = found
        now = "no table is there now" if found is None else f"the table there now has id {found}"
        super().__init__(
            f"the table at {uri} was re-created since {what} (for table id {expected}; {now}), so it cannot "
            f"continue; {how_to_start_over}"
        )


class UnsupportedError(MergeTableError, NotImplementedError):
    """The requested feature or mode is not supported."""


class MissingExtraError(MergeTableError, ImportError):
    """A feature needs an optional dependency that is not installed; the message names the extra to install."""

    def __init__(self, feature: str, module: str, extra: str | None) -> None:
        self.extra = extra
        install = f"pip install 'mergetable[{extra}]'" if extra else f"pip install {module}"
        super().__init__(f"{feature} needs the '{module}' package, which is not installed: {install}", name=module)


class UnknownOptionsWarning(UserWarning):
    """A table's schema holds options this version does not know (a newer writer's): the table is read without
    them and cannot be written until mergetable is upgraded."""


__all__ = [
    "AlreadyCommittedError",
    "ArgumentError",
    "BucketAssignmentConflictError",
    "ClockSkewError",
    "CommitConflictError",
    "CommitStateUnknownError",
    "CorruptMetadataError",
    "DataFileError",
    "FilterError",
    "ImmutableOptionError",
    "MergeError",
    "MergeTableError",
    "MissingExtraError",
    "OptionsError",
    "SchemaChangeError",
    "SchemaError",
    "SnapshotExpiredError",
    "SnapshotNotFoundError",
    "StorageFullError",
    "TableExistsError",
    "TableNotFoundError",
    "TableRecreatedError",
    "TagExistsError",
    "UnknownOptionsWarning",
    "UnsupportedError",
    "storage_full",
]
