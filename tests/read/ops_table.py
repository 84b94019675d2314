"""Tables built from generated operations, shared by the read tests: ``(key, j, value, is_delete)`` tuples."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

import mergetable as mt

Op = tuple[int, int, Any, bool]


def key_of(k: int, t: pa.DataType) -> Any:
    """Key number ``k`` as a value of key type ``t`` (strings sort like the numbers)."""
    return k if pa.types.is_integer(t) else f"k{k:02d}"


def build(root: str, key_type: pa.DataType, composite: bool, commits: list[list[Op]]) -> mt.Table:
    """A write-only 2-bucket table with key ``k`` (and ``j`` when ``composite``), one commit per list of ops."""
    schema = pa.schema([("k", key_type), ("j", pa.int32()), ("v", pa.int64())])
    t = mt.create_table(root, schema, ["k", "j"] if composite else ["k"], options={"write-only": "true", "bucket": "2"})
    for ops in commits:
        rows = pa.table(
            {
                "k": [key_of(o[0], key_type) for o in ops],
                "j": [o[1] if composite else 0 for o in ops],
                "v": [o[2] for o in ops],
            },
            schema=schema,
        )
        t.write(rows, row_kind=["-D" if o[3] else "+I" for o in ops])
    return t
