"""Append tables (tables without a primary key): their option defaults and the rules their options follow.

An append table keeps every row it is given, in commit order: no key, no merge, no system columns in its
files. As in Paimon, ``bucket`` defaults to -1 (bucket-unaware: every file of a partition in ``bucket-0``,
any writer appends anywhere) and ``target-file-size`` to 256 MB; ``bucket > 0`` hashes rows into buckets by
``bucket-key``, which it then needs. ``write-mode=append-only`` (the Table Store spelling) is accepted and
means the same as leaving the primary key out.
"""

from __future__ import annotations

from collections.abc import Sequence

from mergetable.core import arguments
from mergetable.core.errors import OptionsError
from mergetable.core.options import (
    DEFAULT_APPEND_TARGET_FILE_SIZE,
    POSTPONE_BUCKET,
    UNAWARE_BUCKET,
    ChangelogProducer,
    MergeEngine,
    TableOptions,
    normalize_option_keys,
)


def append_defaults(options: object) -> dict[str, str]:
    """``options`` with the append-table defaults for the keys it leaves out (``bucket`` -1, ``target-file-size``
    256 MB).

    >>> append_defaults({"bucket": "4", "bucket-key": "id"})["target-file-size"]
    '268435456'
    >>> append_defaults(None)["bucket"]
    '-1'
    """
    given = dict(arguments.mapping(options, "options"))
    plain, _ = normalize_option_keys(given)
    if "bucket" not in plain:
        given["bucket"] = str(UNAWARE_BUCKET)
    if "target-file-size" not in plain:
        given["target-file-size"] = str(DEFAULT_APPEND_TARGET_FILE_SIZE)
    return given


def key_table_defaults(options: object) -> dict[str, str]:
    """``options`` with the defaults of a new primary-key table: ``bucket`` -1 (dynamic bucket mode, Paimon's
    default, :mod:`mergetable.core.dynamic_buckets`) when it is not given. Only a table being created gets it:
    the schema stores the resolved ``bucket``, so an existing table keeps its mode.

    >>> key_table_defaults(None)["bucket"], key_table_defaults({"bucket": "4"})["bucket"]
    ('-1', '4')
    """
    given = dict(arguments.mapping(options, "options"))
    plain, _ = normalize_option_keys(given)
    if "bucket" not in plain:
        given["bucket"] = str(UNAWARE_BUCKET)
    return given


def check_append_options(opts: TableOptions, columns: Sequence[str], partition_keys: Sequence[str]) -> None:
    """Refuse options an append table cannot keep, naming the option.

    >>> opts = TableOptions.from_map({"bucket": "4"})
    >>> check_append_options(opts, ["id", "v"], [])
    Traceback (most recent call last):
    mergetable.core.errors.OptionsError: option 'bucket-key': an append table with bucket > 0 needs 'bucket-key' ...
    """
    if opts.bucket == POSTPONE_BUCKET:
        raise OptionsError("bucket", "bucket=-2 (postpone bucket mode) needs a primary key, as in Paimon")
    if opts.bucket > 0 and not opts.bucket_key:
        raise OptionsError(
            "bucket-key",
            "an append table with bucket > 0 needs 'bucket-key' (the columns rows are hashed by); "
            "leave 'bucket' out (-1) for a table without buckets",
        )
    if opts.bucket == UNAWARE_BUCKET and opts.bucket_key:
        raise OptionsError("bucket-key", "needs 'bucket' > 0 (an append table with bucket = -1 has no buckets)")
    for c in opts.bucket_key:
        if c not in columns:
            raise OptionsError("bucket-key", f"column '{c}' is not a column of the table {list(columns)}")
        if c in partition_keys:
            raise OptionsError("bucket-key", f"column '{c}' is a partition key; a bucket key must not be one")
    if opts.write_mode == "change-log":
        raise OptionsError("write-mode", "'change-log' needs a primary key (this table has none)")
    refused = (
        ("merge-engine", opts.merge_engine is not MergeEngine.DEDUPLICATE),
        ("changelog-producer", opts.changelog_producer is not ChangelogProducer.NONE),
        ("sequence.field", bool(opts.sequence_field)),
        ("sequence.snapshot-ordering", opts.sequence_snapshot_ordering),
        ("rowkind.field", opts.rowkind_field is not None),
    )
    for option, set_ in refused:
        if set_:
            raise OptionsError(option, "applies to primary-key tables; an append table (no primary key) has no merge")


def check_key_table_options(opts: TableOptions) -> None:
    """Refuse append-table-only options on a table with a primary key, naming the option. ``bucket`` -1 is
    the dynamic bucket mode there (:mod:`mergetable.core.dynamic_buckets`), where keys are not hashed into a
    fixed number of buckets, so a ``bucket-key`` has no use (Paimon refuses it too).

    >>> check_key_table_options(TableOptions.from_map({"bucket": "-1", "bucket-key": "id"}))
    Traceback (most recent call last):
    mergetable.core.errors.OptionsError: option 'bucket-key': cannot be set with 'bucket' = -1 ...
    """
    if opts.bucket == UNAWARE_BUCKET and opts.bucket_key:
        raise OptionsError(
            "bucket-key",
            "cannot be set with 'bucket' = -1 (dynamic bucket mode: a key's bucket comes from the table's HASH "
            "index, not from a hash of the bucket key); give 'bucket' >= 1 for hash buckets",
        )
    if opts.write_mode == "append-only":
        raise OptionsError("write-mode", "'append-only' tables have no primary key: leave primary_key out")
    if opts.bucket == POSTPONE_BUCKET:
        for option, set_ in (
            ("changelog-producer", opts.changelog_producer is not ChangelogProducer.NONE),
            ("deletion-vectors.enabled", opts.deletion_vectors_enabled),
        ):
            if set_:
                raise OptionsError(option, "is not supported with bucket=-2 (postpone bucket mode) yet")


__all__ = ["append_defaults", "check_append_options", "check_key_table_options", "key_table_defaults"]
