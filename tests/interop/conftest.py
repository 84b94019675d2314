"""A partitioned, bucketed table with upserts and deletes over several writes: the interop tests' data."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pyarrow as pa
import pytest

import mergetable as mt

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("dt", pa.string(), nullable=False),
        ("qty", pa.int64()),
        ("price", pa.float64()),
        ("note", pa.string()),
        ("day", pa.date32()),
        ("amount", pa.decimal128(12, 2)),
    ]
)
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


def rows(ids: range, dt: str, qty_base: int) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": list(ids),
            "dt": [dt] * n,
            "qty": [None if i % 17 == 0 else qty_base + i % 50 for i in ids],
            "price": [float("nan") if i % 23 == 0 else i / 10 for i in ids],
            "note": [f"n{i % 7}" if i % 11 else None for i in ids],
            "day": [datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 40) for i in ids],
            "amount": [decimal.Decimal(i) / 4 for i in ids],
        },
        schema=SCHEMA,
    )


def build(uri: str) -> mt.Table:
    """Snapshots 1-6 insert 200 keys per write across three partitions; 7 upserts, 8 deletes."""
    t = mt.create_table(uri, SCHEMA, primary_key=["id", "dt"], partition_keys=["dt"], options={"bucket": "2"})
    for i in range(6):
        t.write(rows(range(i * 200, i * 200 + 200), DAYS[i % 3], 0))
    t.write(
        rows(range(150, 450), DAYS[0], 1000).set_column(
            1, "dt", pa.array([DAYS[i // 200 % 3] for i in range(150, 450)])
        )
    )
    t.delete_keys(pa.table({"id": list(range(0, 1200, 9)), "dt": [DAYS[i // 200 % 3] for i in range(0, 1200, 9)]}))
    return t


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> mt.Table:
    return build(str(Path(tmp_path_factory.mktemp("interop")) / "t"))
