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
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from mergetable.core.errors import OptionsError
from mergetable.core.option_map import OptionMap
from mergetable.core.read_options import TimeTravel
from mergetable.read.system_tables import SCHEMAS, SYSTEM_TABLES
from mergetable.spark.options import ReadOptions, table_uri
from mergetable.spark.types import conform_for_spark, spark_arrow_schema, spark_schema
from mergetable.table import open_table

RESOLVE_SNAPSHOT = "resolve-snapshot"
_RESOLVE_VALUES = ("on-load", "per-query")
_NOT_SYSTEM = frozenset({"audit_log"})


def per_query(options: Mapping[str, str]) -> bool:
    """Whether the read resolves the latest snapshot at each query (``resolve-snapshot=per-query``)."""
    return OptionMap.of(options).choice(RESOLVE_SNAPSHOT, _RESOLVE_VALUES, "on-load") == "per-query"


def without_resolve_option(options: Mapping[str, str]) -> OptionMap:
    return OptionMap.of(options).without(RESOLVE_SNAPSHOT)


@dataclass(frozen=True)
class SystemRead:
    """A read of the system table ``name`` of the table at ``uri``."""

    uri: str
    name: str
    storage: dict[str, Any] | None
    travel: TimeTravel = field(default_factory=TimeTravel)

    @classmethod
    def of(cls, options: Mapping[str, str]) -> SystemRead | None:
        """The system-table read the options ask for (a ``$name`` path suffix), None for a table read."""
        uri, sep, name = table_uri(options).rpartition("$")
        if not sep or not uri or "/" in name or name.lower() in _NOT_SYSTEM:
            return None
        if name.lower() not in SYSTEM_TABLES:
            raise OptionsError("path", f"unknown system table '${name}' (known: {', '.join(SYSTEM_TABLES)})")
        parsed = ReadOptions.parse({**without_resolve_option(options).without("path"), "path": uri})
        return cls(uri, name.lower(), parsed.storage, parsed.request.travel)

    def spark_schema(self) -> StructType:
        return spark_schema(SCHEMAS[self.name])

    def read(self) -> pa.Table:
        t = self.travel
        return open_table(self.uri, self.storage).system_table(
            self.name, snapshot_id=t.snapshot_id, tag=t.tag, timestamp_ms=t.timestamp_ms, version=t.version
        )


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
