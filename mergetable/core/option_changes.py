"""Which table options may change once a table holds data, and how options follow a renamed column.

:func:`check_option_change` is Paimon's ``checkAlterTableOption`` / ``checkResetTableOption`` with the options
our storage depends on (:data:`IMMUTABLE_OPTIONS`); :func:`rename_options` rewrites the options that name a
column when it is renamed (Paimon's ``applyRenameColumnsToOptions``). Both serve
:func:`mergetable.core.evolution.apply_changes`.
"""

from __future__ import annotations

from mergetable.core.errors import ImmutableOptionError
from mergetable.core.option_map import unknown_option
from mergetable.core.option_values import parse_bool
from mergetable.core.options import TableOptions

_REWRITE = "stored files would have to be rewritten"
IMMUTABLE_OPTIONS: dict[str, str] = {
    "primary-key": "the primary key is fixed at create",
    "partition": "the partition keys are fixed at create",
    "bucket": "every stored key's bucket follows from it; rescale the data instead: t.rescale(bucket=N) (or "
    "`mergetable rescale URI --bucket N`), which rewrites the partitions and sets the option in one go (Paimon's "
    "ALTER TABLE ... SET ('bucket') + INSERT OVERWRITE)",
    "bucket-key": "every stored key's bucket follows from it",
    "merge-engine": f"stored records were merged by the current engine; {_REWRITE}",
    "sequence.field": f"stored records were merged in the order it gives; {_REWRITE}",
    "sequence.field.sort-order": f"stored records were merged in the order it gives; {_REWRITE}",
    "sequence.snapshot-ordering": f"stored records were merged in the order it gives; {_REWRITE}",
    "rowkind.field": "stored records took their row kind from it",
    "aggregation.remove-record-on-delete": "stored aggregates were merged under it",
    "partial-update.remove-record-on-delete": "stored rows were merged under it",
    "partial-update.remove-record-on-sequence-group": "stored rows were merged under it",
    "versioned.ver-column": f"stored records were merged in the order it gives; {_REWRITE}",
    "force-lookup": "the changelog already produced depends on it",
    "deletion-vectors.enabled": "it is fixed when the table is created (Paimon): stored files are read with or "
    "without their deletion vectors",
    "file.format": "stored data files are in the current format",
    "data-file.prefix": "stored data files are found by it",
    "changelog-file.prefix": "stored changelog files are found by it",
    "partition.default-name": "stored partition directories are named with it",
}
"""Options that cannot change once the table has a snapshot, with the reason (Paimon's ``@Immutable``
options plus those our storage depends on: ``bucket`` changes only by a rescale, ``sequence.field`` ...)."""

_ONE_WAY = ("ignore-delete", "ignore-update-before")
"""Options Paimon lets go from false to true but not back (records already dropped cannot return)."""

_COLUMN_LIST_OPTIONS = (
    "bucket-key",
    "sequence.field",
    "partial-update.remove-record-on-sequence-group",
    "changelog-producer.row-deduplicate-ignore-fields",
)
_COLUMN_OPTIONS = ("rowkind.field", "versioned.ver-column")


def check_option_change(
    options: dict[str, str], key: str, value: str | None, has_snapshots: bool, append: bool = False
) -> None:
    """Refuse setting (``value``) or resetting (None) option ``key`` where Paimon's ``checkAlterTableOption`` /
    ``checkResetTableOption`` would, with our immutable list; ``has_snapshots``: the table holds data.

    Example:
        >>> check_option_change({"bucket": "4"}, "write-buffer-size", "64 mb", has_snapshots=True)
        >>> check_option_change({"bucket": "4"}, "bucket", "8", has_snapshots=True)
        Traceback (most recent call last):
        ...
        mergetable.core.errors.ImmutableOptionError: ...
    """
    if value is None and not key.startswith("fields.") and key not in _known_keys():
        raise unknown_option(key, _known_keys())
    if key == "deletion-vectors.enabled" and options.get(key, "false") != (value or "false"):
        raise ImmutableOptionError(key, f"cannot be changed: {IMMUTABLE_OPTIONS[key]}")
    if not has_snapshots:
        return
    if key in IMMUTABLE_OPTIONS and options.get(key) != value:
        verb = "changed" if value is not None else "unset"
        why = IMMUTABLE_OPTIONS[key]
        if key == "bucket" and (append or not _fixed(options.get(key)) or (value is not None and not _fixed(value))):
            why = _BUCKET_MODE
        raise ImmutableOptionError(key, f"cannot be {verb} once the table has data: {why}")
    if key in _ONE_WAY and parse_bool(options.get(key, "false")) and not parse_bool(value or "false"):
        raise ImmutableOptionError(key, "cannot change from true to false (the records it dropped are gone)")


_BUCKET_MODE = (
    "the bucket mode (N > 0 fixed, -1 dynamic or an append table's unaware, -2 postpone) is chosen when the table "
    "is created (Paimon cannot change bucket from or to -1 either): create a table with the bucket you want and "
    "write this table's rows into it; only a key table's fixed count is rescaled in place, by t.rescale(bucket=N)"
)


def _fixed(bucket: str | None) -> bool:
    return bucket is not None and bucket.lstrip("-").isdigit() and int(bucket) > 0


def _known_keys() -> set[str]:
    return {info.alias or name for name, info in TableOptions.model_fields.items()}


def own_field_key(key: str, column: str) -> bool:
    """Whether ``key`` is a ``fields.<column>.<suffix>`` option of ``column`` alone.

    >>> own_field_key("fields.v.aggregate-function", "v"), own_field_key("fields.a,v.sequence-group", "v")
    (True, False)
    """
    return key.startswith(f"fields.{column}.")


def _rename_list(value: str, old: str, new: str) -> str:
    return ",".join(new if c.strip() == old else c for c in value.split(","))


def rename_options(options: dict[str, str], old: str, new: str) -> dict[str, str]:
    """Options naming column ``old`` rewritten to name ``new`` (Paimon's ``applyRenameColumnsToOptions``).

    >>> rename_options({"sequence.field": "ts,v", "fields.v.aggregate-function": "sum"}, "v", "w")
    {'sequence.field': 'ts,w', 'fields.w.aggregate-function': 'sum'}
    """
    out: dict[str, str] = {}
    for key, value in options.items():
        if key in _COLUMN_LIST_OPTIONS:
            value = _rename_list(value, old, new)
        elif key in _COLUMN_OPTIONS and value == old:
            value = new
        elif key.startswith("fields."):
            body = key[len("fields.") :]
            columns, dot, suffix = body.partition(".")
            if dot and suffix in ("sequence-group", "nested-key"):
                key = f"fields.{_rename_list(columns, old, new)}.{suffix}"
                value = _rename_list(value, old, new)
            elif dot and columns == old:
                key = f"fields.{new}.{suffix}"
        out[key] = value
    return out


__all__ = ["IMMUTABLE_OPTIONS", "check_option_change", "own_field_key", "rename_options"]
