"""System tables and per-query snapshot resolution for the Spark data source.

``spark.read.format("mergetable").load(uri + "$files")`` reads Paimon's system table ``files`` of the
table at ``uri`` (see :mod:`mergetable.read.system_tables`); time-travel options (``snapshot-id``, ``tag``,
``timestamp-millis``, ``version``) apply to the system tables that have time travel. ``$audit_log`` is left
to the change-data reader.

A DataFrame reads the snapshot resolved when it was loaded. The ``resolve-snapshot`` option set to
``per-query`` (what :func:`mergetable.spark.register_view` uses) resolves the latest snapshot each time
Spark plans a query instead, so a temporary view always shows the latest commit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from mergetable.core.errors import OptionsError, SnapshotNotFoundError
from mergetable.read.system_tables import SCHEMAS, SYSTEM_TABLES
from mergetable.spark.options import parse_int_option, parse_timestamp_ms, storage_options, table_uri
from mergetable.spark.types import conform_for_spark, spark_arrow_schema, spark_schema
from mergetable.table import open_table

RESOLVE_SNAPSHOT = "resolve-snapshot"
_RESOLVE_VALUES = ("on-load", "per-query")
_NOT_SYSTEM = frozenset({"audit_log"})
_TRAVEL = {
    "snapshot-id": "snapshot-id",
    "scan.snapshot-id": "snapshot-id",
    "tag": "tag",
    "tag-name": "tag",
    "scan.tag-name": "tag",
    "timestamp-millis": "timestamp-millis",
    "scan.timestamp-millis": "timestamp-millis",
    "timestamp": "timestamp",
    "scan.timestamp": "timestamp",
    "timestampasof": "timestamp",
    "version": "version",
    "versionasof": "version",
    "scan.version": "version",
}


def per_query(options: Mapping[str, str]) -> bool:
    """Whether the read resolves the latest snapshot at each query (``resolve-snapshot=per-query``)."""
    value = {str(k).lower(): str(v) for k, v in options.items()}.get(RESOLVE_SNAPSHOT, "on-load").strip().lower()
    if value not in _RESOLVE_VALUES:
        raise OptionsError(RESOLVE_SNAPSHOT, f"must be one of {list(_RESOLVE_VALUES)}, got '{value}'")
    return value == "per-query"


def without_resolve_option(options: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in options.items() if str(k).lower() != RESOLVE_SNAPSHOT}


@dataclass(frozen=True)
class SystemRead:
    """A read of the system table ``name`` of the table at ``uri``."""

    uri: str
    name: str
    storage: dict[str, Any] | None
    travel: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, options: Mapping[str, str]) -> SystemRead | None:
        """The system-table read the options ask for (a ``$name`` path suffix), None for a table read."""
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        uri, sep, name = table_uri(opts).rpartition("$")
        if not sep or not uri or "/" in name or name.lower() in _NOT_SYSTEM:
            return None
        if name.lower() not in SYSTEM_TABLES:
            raise OptionsError("path", f"unknown system table '${name}' (known: {', '.join(SYSTEM_TABLES)})")
        travel = tuple(sorted((canon, opts[k]) for k, canon in _TRAVEL.items() if k in opts))
        if len({c for c, _ in travel}) > 1:
            raise OptionsError(travel[1][0], f"give only one time-travel option, got {[c for c, _ in travel]}")
        return cls(uri, name.lower(), storage_options(opts), travel[:1])

    def spark_schema(self) -> StructType:
        return spark_schema(SCHEMAS[self.name])

    def read(self) -> pa.Table:
        table = open_table(self.uri, self.storage)
        kwargs: dict[str, Any] = {}
        for key, value in self.travel:
            if key == "snapshot-id":
                kwargs["snapshot_id"] = parse_int_option(key, value)
            elif key == "timestamp-millis":
                kwargs["timestamp_ms"] = parse_int_option(key, value)
            elif key == "timestamp":
                kwargs["timestamp_ms"] = parse_timestamp_ms(key, value)
            elif key == "tag" or value in table.tags():
                kwargs["tag"] = value
            elif value.strip().isdigit():
                kwargs["snapshot_id"] = int(value)
            else:
                raise SnapshotNotFoundError(f"version '{value}' is neither a tag nor a snapshot id")
        return table.system_table(self.name, **kwargs)


class SystemTableReader(DataSourceReader):
    """Reads a system table in one partition (they describe metadata: small)."""

    def __init__(self, request: SystemRead, schema: StructType) -> None:
        self.request = request
        self.columns: Sequence[str] = schema.fieldNames()
        self.target = spark_arrow_schema(schema)

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        data = self.request.read().select(list(self.columns))
        yield from conform_for_spark(data, self.target).to_batches()


__all__ = ["RESOLVE_SNAPSHOT", "SystemRead", "SystemTableReader", "per_query", "without_resolve_option"]
