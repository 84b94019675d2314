"""Write options besides table options: the table's location, layout for a new table, the row-kind column.

Keys are matched case-insensitively (the Spark data source gets them lower-cased), and
``fields.<column>.<option>`` keys get their column's spelling back from the data's columns. Table options
(``bucket``, ``merge-engine`` …) are validated by :class:`~mergetable.core.options.TableOptions`; an
existing table's options may only be changed for this write where they tune it (:data:`WRITE_TUNABLES`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from mergetable.core.errors import OptionsError
from mergetable.core.option_map import OptionMap, unknown_option
from mergetable.core.option_values import parse_list
from mergetable.core.options import TABLE_OPTION_KEYS, TableOptions, normalize_option_keys
from mergetable.core.read_options import READ_OPTION_KEYS
from mergetable.core.storage import STORAGE_JSON, STORAGE_PREFIX, storage_options
from mergetable.core.txn import Txn, make_txn

# write options that are not table options
PRIMARY_KEY_KEYS = ("primary-key", "primary-keys")
PARTITION_KEYS = ("partition-keys", "partition-key", "partition")
ROW_KIND_COLUMN = "row-kind-column"
TXN_APP_ID, TXN_VERSION = "txnappid", "txnversion"  # Delta's idempotent-write options (txnAppId, txnVersion)
WRITE_KEYS = frozenset(
    {"path", STORAGE_JSON, ROW_KIND_COLUMN, TXN_APP_ID, TXN_VERSION, *PRIMARY_KEY_KEYS, *PARTITION_KEYS}
)
# table options a write may set differently from the table's (they tune this write only)
WRITE_TUNABLES = frozenset(
    {
        "write-buffer-size",
        "target-file-size",
        "file.compression",
        "file.compression.zstd-level",
        "dynamic-partition-overwrite",
        "write-only",
        "commit.max-retries",
        "commit.timeout",
        "commit.min-retry-wait",
        "commit.max-retry-wait",
        "commit.max-clock-skew",
    }
)


def table_uri(options: Mapping[str, str]) -> str:
    uri = OptionMap.of(options).get("path")
    if not uri:
        raise OptionsError("path", "no table location: give the 'path' option (Spark: .load(uri) / .save(uri))")
    return uri


@dataclass(frozen=True)
class WriteOptions:
    """Parsed write options: layout for a new table, table options, and per-write settings."""

    uri: str
    storage: dict[str, Any] | None = None
    primary_key: tuple[str, ...] | None = None
    partition_keys: tuple[str, ...] | None = None
    row_kind_column: str | None = None
    table_options: dict[str, str] = field(default_factory=dict)
    txn: Txn | None = None

    @classmethod
    def parse(
        cls, options: Mapping[str, str], columns: list[str], read_keys: frozenset[str] = READ_OPTION_KEYS
    ) -> Self:
        """Parse (possibly lower-cased) options; ``columns`` restores the case of ``fields.<column>.*`` keys.

        ``read_keys`` are refused by name (they have no meaning for a write).
        """
        opts = OptionMap.of(options)
        pk, parts = opts.first(*PRIMARY_KEY_KEYS), opts.first(*PARTITION_KEYS)
        table: dict[str, str] = {}
        for k, v in opts.items():
            if k in WRITE_KEYS or k.startswith(STORAGE_PREFIX):
                continue
            if k in read_keys:
                raise OptionsError(k, "is a read option; it has no meaning for a write")
            if k not in TABLE_OPTION_KEYS and not k.startswith("fields."):
                raise unknown_option(k, [*TABLE_OPTION_KEYS, *WRITE_KEYS])
            table[restore_field_case(k, columns)] = v
        if table:
            TableOptions.from_map(table)  # unknown or malformed table options fail here, by name
        rk = opts.get(ROW_KIND_COLUMN)
        return cls(
            uri=table_uri(opts),
            storage=storage_options(opts),
            primary_key=parse_list(pk[1]) if pk is not None else None,
            partition_keys=parse_list(parts[1]) if parts is not None else None,
            row_kind_column=_restore_column(ROW_KIND_COLUMN, rk.strip(), columns) if rk else None,
            table_options=table,
            txn=make_txn(opts.get(TXN_APP_ID), opts.get(TXN_VERSION), "txnAppId", "txnVersion"),
        )

    def check_against(
        self, existing: TableOptions, primary_key: tuple[str, ...], partitions: tuple[str, ...]
    ) -> dict[str, str]:
        """Fail (naming the option) where this write's options contradict an existing table's.

        Returns the per-write overrides (``WRITE_TUNABLES``) to apply to this write only.
        """
        if self.primary_key is not None and tuple(self.primary_key) != tuple(primary_key):
            raise OptionsError(
                "primary-key",
                f"the table's primary key is {list(primary_key)}, the write asks for {list(self.primary_key)}",
            )
        if self.partition_keys is not None and tuple(self.partition_keys) != tuple(partitions):
            raise OptionsError(
                "partition-keys",
                f"the table is partitioned by {list(partitions)}, the write asks for {list(self.partition_keys)}",
            )
        plain, fields = normalize_option_keys(self.table_options)
        overrides = {k: v for k, v in plain.items() if k in WRITE_TUNABLES}
        current = existing.to_map()
        requested = existing.with_overrides({**plain, **fields}).to_map()
        for key in [*plain, *fields]:
            if key in WRITE_TUNABLES:
                continue
            if requested.get(key) != current.get(key):
                raise OptionsError(
                    key,
                    f"the table has {key}={current.get(key, '<unset>')!s}, the write asks for {requested.get(key)!s} "
                    "(table options are fixed when the table is created)",
                )
        if overrides:
            existing.with_overrides(overrides)  # validate
        return overrides


def _restore_column(key: str, name: str, columns: list[str]) -> str:
    if name in columns:
        return name
    matches = [c for c in columns if c.lower() == name.lower()]
    if len(matches) == 1:
        return matches[0]
    raise OptionsError(key, f"column '{name}' is not in the data {columns}")


def restore_field_case(key: str, columns: list[str]) -> str:
    """``fields.<col>.<x>`` with ``<col>`` spelled as in ``columns`` (Spark lower-cases option keys)."""
    if not key.startswith("fields.") or key == "fields.default-aggregate-function":
        return key
    body = key[len("fields.") :]
    # a column name may itself contain dots: try the longest matching prefix
    lowered = {c.lower(): c for c in columns}
    parts = body.split(".")
    for i in range(len(parts) - 1, 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in lowered:
            return "fields." + lowered[candidate] + "." + ".".join(parts[i:])
    # sequence-group keys name several columns: fields.a,b.sequence-group
    head = parts[0]
    if "," in head:
        names = [lowered.get(n.strip(), n.strip()) for n in head.split(",")]
        return "fields." + ",".join(names) + "." + ".".join(parts[1:])
    return key


__all__ = [
    "PARTITION_KEYS",
    "PRIMARY_KEY_KEYS",
    "ROW_KIND_COLUMN",
    "TXN_APP_ID",
    "TXN_VERSION",
    "WRITE_KEYS",
    "WRITE_TUNABLES",
    "WriteOptions",
    "restore_field_case",
    "table_uri",
]
