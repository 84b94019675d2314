"""Read and write options of the ``mergetable`` Spark data source.

Spark lower-cases option keys (values are untouched), so every key here is matched in lower case and
``fields.<column>.<option>`` keys get their column's spelling back from the schema.

Storage options for object stores (fsspec arguments such as ``key``, ``secret``, ``endpoint_url``) are
given with the ``storage.`` prefix, e.g. ``.option("storage.endpoint_url", "http://127.0.0.1:5077")``;
``"true"``/``"false"`` become booleans and values starting with ``{`` or ``[`` are parsed as JSON. A whole
map can also be given as JSON in ``storage-options``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mergetable.core.errors import OptionsError
from mergetable.core.options import (
    DEFAULT_SPLIT_SIZE,
    TableOptions,
    normalize_option_keys,
    parse_list,
    parse_memory_size,
)
from mergetable.core.predicates import Conjunct
from mergetable.spark.write_modes import MODE_KEYS

STORAGE_PREFIX = "storage."
STORAGE_JSON = "storage-options"

# time travel: canonical key -> accepted spellings (Paimon's scan.* and Delta-style *AsOf included)
_TIME_TRAVEL = {
    "snapshot-id": ("snapshot-id", "scan.snapshot-id"),
    "timestamp-millis": ("timestamp-millis", "scan.timestamp-millis"),
    "timestamp": ("timestamp", "scan.timestamp", "timestampasof"),
    "tag": ("tag", "scan.tag-name", "tag-name"),
    "version": ("version", "scan.version", "versionasof"),
}
_SPLIT_SIZE_KEYS = ("split.target-size", "source.split.target-size")
_INCREMENTAL_KEYS = ("incremental-between", "scan.incremental-between")
READ_KEYS = frozenset(
    {
        "path",
        "columns",
        "filter",
        "pushdown",
        "batch-size",
        *_INCREMENTAL_KEYS,
        STORAGE_JSON,
        *_SPLIT_SIZE_KEYS,
        *(k for keys in _TIME_TRAVEL.values() for k in keys),
    }
)

# write options that are not table options
PRIMARY_KEY_KEYS = ("primary-key", "primary-keys")
PARTITION_KEYS = ("partition-keys", "partition-key", "partition")
ROW_KIND_COLUMN = "row-kind-column"
WRITE_KEYS = frozenset({"path", STORAGE_JSON, ROW_KIND_COLUMN, *PRIMARY_KEY_KEYS, *PARTITION_KEYS, *MODE_KEYS})
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

#: Default rows per Arrow batch a Spark reader yields (``batch-size``).
DEFAULT_BATCH_SIZE = 256 * 1024


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def table_uri(options: Mapping[str, str]) -> str:
    uri = _lower(options).get("path")
    if not uri:
        raise OptionsError("path", "no table location: use .load(uri) / .save(uri) or .option('path', uri)")
    return uri


def _storage_value(value: str) -> Any:
    text = value.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return value
    return value


def storage_options(options: Mapping[str, str]) -> dict[str, Any] | None:
    """fsspec storage options from ``storage.<name>`` keys and/or a JSON ``storage-options`` map."""
    opts = _lower(options)
    out: dict[str, Any] = {}
    if STORAGE_JSON in opts:
        try:
            parsed = json.loads(opts[STORAGE_JSON])
        except json.JSONDecodeError as exc:
            raise OptionsError(STORAGE_JSON, f"is not a JSON object: {exc}") from None
        if not isinstance(parsed, dict):
            raise OptionsError(STORAGE_JSON, "must be a JSON object")
        out.update(parsed)
    for k, v in opts.items():
        if k.startswith(STORAGE_PREFIX) and len(k) > len(STORAGE_PREFIX):
            out[k[len(STORAGE_PREFIX) :]] = _storage_value(v)
    return out or None


# -- reading ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReadOptions:
    """Parsed read options. ``time_travel`` holds at most one canonical time-travel key."""

    uri: str
    storage: dict[str, Any] | None = None
    columns: tuple[str, ...] | None = None
    filter: list[Conjunct] | None = None
    pushdown: str = "auto"
    split_size: int = DEFAULT_SPLIT_SIZE
    batch_size: int = DEFAULT_BATCH_SIZE
    time_travel: dict[str, str] = field(default_factory=dict)
    incremental_between: tuple[int | str, int | str] | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        opts = _lower(options)
        for k in opts:
            if k not in READ_KEYS and not k.startswith(STORAGE_PREFIX):
                raise OptionsError(k, f"unknown read option (known: {sorted(READ_KEYS)} and 'storage.<name>')")
        travel: dict[str, str] = {}
        for canonical, spellings in _TIME_TRAVEL.items():
            for s in spellings:
                if s in opts:
                    if canonical in travel and travel[canonical] != opts[s]:
                        raise OptionsError(s, f"conflicts with another spelling of '{canonical}'")
                    travel[canonical] = opts[s]
        if len(travel) > 1:
            raise OptionsError(sorted(travel)[1], f"give only one time-travel option, got {sorted(travel)}")
        incremental = _incremental(opts)
        if incremental is not None and travel:
            raise OptionsError("incremental-between", f"cannot be combined with {sorted(travel)[0]}")
        columns = parse_list(opts["columns"]) if "columns" in opts else None
        if columns is not None and not columns:
            raise OptionsError("columns", "is empty")
        pushdown = opts.get("pushdown", "auto").strip().lower()
        if pushdown not in ("auto", "true", "false"):
            raise OptionsError("pushdown", f"must be auto, true or false, got '{pushdown}'")
        split_size = DEFAULT_SPLIT_SIZE
        for k in _SPLIT_SIZE_KEYS:
            if k in opts:
                split_size = _positive(k, opts[k], parse_memory_size)
        batch_size = _positive("batch-size", opts["batch-size"], int) if "batch-size" in opts else DEFAULT_BATCH_SIZE
        return cls(
            uri=table_uri(opts),
            storage=storage_options(opts),
            columns=columns,
            filter=parse_filter(opts["filter"]) if "filter" in opts else None,
            pushdown=pushdown,
            split_size=split_size,
            batch_size=batch_size,
            time_travel=travel,
            incremental_between=incremental,
        )


def _incremental(opts: dict[str, str]) -> tuple[int | str, int | str] | None:
    """``incremental-between='start,end'``: snapshot ids or tag names, start exclusive (Paimon's spelling)."""
    found = [(k, opts[k]) for k in _INCREMENTAL_KEYS if k in opts]
    if not found:
        return None
    key, value = found[0]
    parts = [p.strip() for p in value.split(",")]
    if len(parts) != 2 or not all(parts):
        raise OptionsError(key, f"expected 'start,end' (snapshot ids or tag names), got '{value}'")
    a, b = (int(p) if p.isdigit() else p for p in parts)
    return a, b


def _positive(key: str, value: str, parse: Any) -> int:
    try:
        n = int(parse(value))
    except ValueError as exc:
        raise OptionsError(key, str(exc)) from None
    if n <= 0:
        raise OptionsError(key, f"must be positive, got {value}")
    return n


def parse_filter(text: str) -> list[Conjunct]:
    """A DNF filter given as JSON: ``[["id", ">", 5], ["dt", "in", ["a", "b"]]]`` (AND) or a list of those (OR)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionsError("filter", f"is not JSON: {exc}") from None

    def pred(p: Any) -> tuple[str, str, Any]:
        if not (isinstance(p, list) and len(p) == 3 and isinstance(p[0], str) and isinstance(p[1], str)):
            raise OptionsError("filter", f"{p!r} is not a [column, op, value] triple")
        return (p[0], p[1].lower(), p[2])

    if not isinstance(raw, list) or not raw:
        raise OptionsError(
            "filter", "must be a non-empty JSON list of [column, op, value] triples (or of lists of them)"
        )
    if all(isinstance(x, list) and x and isinstance(x[0], list) for x in raw):
        return [[pred(p) for p in conj] for conj in raw]
    return [[pred(p) for p in raw]]


def parse_timestamp_ms(key: str, value: str) -> int:
    """Milliseconds since the epoch for an ISO-8601 timestamp (no zone = the local time zone, as in Paimon)."""
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        ts = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise OptionsError(key, f"'{value}' is not an ISO-8601 timestamp (e.g. 2024-05-01 12:00:00)") from None
    return int(ts.timestamp() * 1000)


def parse_int_option(key: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise OptionsError(key, f"'{value}' is not an integer") from None


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
    "parse_int_option",
    "parse_timestamp_ms",
    "restore_field_case",
    "storage_options",
    "table_uri",
]
