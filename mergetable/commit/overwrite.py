"""What an overwrite replaces: :class:`Overwrite` and the one parser of the ``overwrite`` argument."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mergetable.core.buckets import Partition
from mergetable.core.errors import ArgumentError, SchemaError
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import CommitMessage


@dataclass(frozen=True)
class Overwrite:
    """Replace live files with the committed ones: of ``partitions``, of the partitions matching ``spec``
    (pairs of partition-key index and string value), or of the whole table when both are None."""

    partitions: frozenset[Partition] | None = None
    spec: tuple[tuple[int, str | None], ...] | None = None

    def covers(self, partition: Partition) -> bool:
        if self.partitions is not None:
            return partition in self.partitions
        if self.spec is not None:
            return all(partition[i] == v for i, v in self.spec)
        return True


def overwrite_spec(
    schema: TableSchema, messages: Sequence[CommitMessage], overwrite: bool | dict[str, Any]
) -> Overwrite | None:
    """The :class:`Overwrite` a commit of ``messages`` with ``overwrite`` makes (None: an append).

    Args:
        schema: The table schema (partition keys, ``dynamic-partition-overwrite``).
        messages: The commit's messages; with a partition spec, all their data must lie inside it.
        overwrite: False (append), True (the whole table, or with ``dynamic-partition-overwrite`` on a
            partitioned table only the partitions the messages write), or a partition spec such as
            ``{"dt": "2024-01-01"}``.

    Raises:
        SchemaError: The spec names a non-partition column, or a message writes outside the spec.
    """
    check_overwrite(overwrite)
    if overwrite is False:
        return None
    keys = schema.partition_keys
    if isinstance(overwrite, dict):
        check_partitions(schema, [m.partition for m in messages], overwrite)
        spec = {k: None if v is None else str(v) for k, v in overwrite.items()}
        return Overwrite(spec=tuple((keys.index(k), v) for k, v in spec.items()))
    if keys and schema.table_options.dynamic_partition_overwrite:
        return Overwrite(partitions=frozenset(m.partition for m in messages))
    return Overwrite()


def check_overwrite(overwrite: Any) -> None:
    """Refuse an ``overwrite`` that is neither a bool nor a partition spec (``"append"``, ``"overwrite"``, 1 …)."""
    if not isinstance(overwrite, bool | dict):
        raise ArgumentError(
            "overwrite", f"expected True, False or a partition spec such as {{'dt': '2024-01-01'}}, got {overwrite!r}"
        )


def check_partitions(schema: TableSchema, partitions: Iterable[Partition], overwrite: bool | dict[str, Any]) -> None:
    """Raise unless every partition lies inside the ``overwrite`` partition spec (nothing to check otherwise).

    Writers call it on their input before writing any file, so a mismatch leaves nothing behind.

    Raises:
        SchemaError: The spec names a non-partition column, or a partition is outside the spec.
    """
    if not isinstance(overwrite, dict):
        check_overwrite(overwrite)
        return
    keys = schema.partition_keys
    unknown = [k for k in overwrite if k not in keys]
    if unknown:
        raise SchemaError(f"overwrite partition spec names non-partition columns {unknown}")
    spec = {k: None if v is None else str(v) for k, v in overwrite.items()}
    idx = {k: keys.index(k) for k in spec}
    for p in partitions:
        if any(p[idx[k]] != v for k, v in spec.items()):
            raise SchemaError(f"data of partition {list(p)} is outside the overwrite spec {spec}")
