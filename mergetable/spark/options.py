"""What is Spark's own in the options of the ``mergetable`` data source.

The read options themselves (time travel with Paimon's and Delta's spellings, incremental range, columns,
filter, split size) are parsed by :class:`mergetable.core.read_options.ReadRequest`, and storage options
(``storage.<name>``, ``storage-options``) by :mod:`mergetable.core.storage`. Here: the table location
(``path``), ``pushdown`` and ``batch-size``, and the write options. Spark lower-cases option keys (values
are untouched), so every key here is matched in lower case and ``fields.<column>.<option>`` keys get their
column's spelling back from the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mergetable.core.errors import OptionsError
from mergetable.core.options import TableOptions, normalize_option_keys, parse_list
from mergetable.core.read_options import READ_OPTION_KEYS, TIME_TRAVEL_OPTIONS, ReadRequest, parse_filter
from mergetable.core.storage import STORAGE_JSON, STORAGE_PREFIX, storage_options

_SPARK_READ_KEYS = ("path", "pushdown", "batch-size")
DEFAULT_BATCH_SIZE = 256 * 1024
READ_KEYS = frozenset({*_SPARK_READ_KEYS, STORAGE_JSON, *READ_OPTION_KEYS})

# write options that are not table options
PRIMARY_KEY_KEYS = ("primary-key", "primary-keys")
PARTITION_KEYS = ("partition-keys", "partition-key", "partition")
ROW_KIND_COLUMN = "row-kind-column"
WRITE_KEYS = frozenset({"path", STORAGE_JSON, ROW_KIND_COLUMN, *PRIMARY_KEY_KEYS, *PARTITION_KEYS})
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
    }
)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def table_uri(options: Mapping[str, str]) -> str:
    uri = _lower(options).get("path")
    if not uri:
        raise OptionsError("path", "no table location: use .load(uri) / .save(uri) or .option('path', uri)")
    return uri


# -- reading ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReadOptions:
    """Parsed read options: the core :class:`ReadRequest` plus what only Spark has (pushdown, batch size)."""

    uri: str
    request: ReadRequest = field(default_factory=ReadRequest)
    storage: dict[str, Any] | None = None
    pushdown: str = "auto"
    batch_size: int = DEFAULT_BATCH_SIZE

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        opts = _lower(options)
        for k in opts:
            if k not in READ_KEYS and not k.startswith(STORAGE_PREFIX):
                raise OptionsError(k, f"unknown read option (known: {sorted(READ_KEYS)} and 'storage.<name>')")
        pushdown = opts.get("pushdown", "auto").strip().lower()
        if pushdown not in ("auto", "true", "false"):
            raise OptionsError("pushdown", f"must be auto, true or false, got '{pushdown}'")
        batch_size = _positive("batch-size", opts["batch-size"]) if "batch-size" in opts else DEFAULT_BATCH_SIZE
        return cls(
            uri=table_uri(opts),
            request=ReadRequest.from_options(opts),
            storage=storage_options(opts),
            pushdown=pushdown,
            batch_size=batch_size,
        )

    @property
    def columns(self) -> tuple[str, ...] | None:
        return self.request.columns

    @property
    def split_size(self) -> int:
        return self.request.split_size

    @property
    def time_travel(self) -> dict[str, str]:
        """The time-travel option given, under its canonical name (empty when none)."""
        if self.request.source is None:
            return {}
        key, value = self.request.source
        return {next(c for c, a in TIME_TRAVEL_OPTIONS.items() if key in (c, *a)): value}


def _positive(key: str, value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise OptionsError(key, f"'{value}' is not an integer") from None
    if n <= 0:
        raise OptionsError(key, f"must be positive, got {value}")
    return n


# -- writing ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WriteOptions:
    """Parsed write options: layout for a new table, table options, and per-write settings."""

    uri: str
    storage: dict[str, Any] | None = None
    primary_key: tuple[str, ...] | None = None
    partition_keys: tuple[str, ...] | None = None
    row_kind_column: str | None = None
    table_options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: Mapping[str, str], columns: list[str]) -> WriteOptions:
        """Parse Spark's (lower-cased) options; ``columns`` restores the case of ``fields.<column>.*`` keys."""
        opts = _lower(options)
        pk = _first(opts, PRIMARY_KEY_KEYS)
        parts = _first(opts, PARTITION_KEYS)
        table: dict[str, str] = {}
        for k, v in opts.items():
            if k in WRITE_KEYS or k.startswith(STORAGE_PREFIX):
                continue
            if k in READ_KEYS:
                raise OptionsError(k, "is a read option; it has no meaning for a write")
            table[restore_field_case(k, columns)] = v
        if table:
            TableOptions.from_map(table)  # unknown or malformed table options fail here, by name
        rk = opts.get(ROW_KIND_COLUMN)
        return cls(
            uri=table_uri(opts),
            storage=storage_options(opts),
            primary_key=parse_list(pk) if pk is not None else None,
            partition_keys=parse_list(parts) if parts is not None else None,
            row_kind_column=_restore_column(ROW_KIND_COLUMN, rk.strip(), columns) if rk else None,
            table_options=table,
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


def _first(opts: dict[str, str], keys: tuple[str, ...]) -> str | None:
    found = [k for k in keys if k in opts]
    if len(found) > 1 and len({opts[k] for k in found}) > 1:
        raise OptionsError(found[1], f"conflicts with '{found[0]}'")
    return opts[found[0]] if found else None


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
    "READ_KEYS",
    "STORAGE_JSON",
    "STORAGE_PREFIX",
    "WRITE_KEYS",
    "WRITE_TUNABLES",
    "ReadOptions",
    "WriteOptions",
    "parse_filter",
    "restore_field_case",
    "storage_options",
    "table_uri",
]
