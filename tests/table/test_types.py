"""Every Arrow type with a Paimon counterpart round-trips through a table."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa

import mergetable as mt

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("b", pa.bool_()),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("dec", pa.decimal128(20, 4)),
        ("s", pa.string()),
        ("bin", pa.binary()),
        ("fbin", pa.binary(3)),
        ("d", pa.date32()),
        ("t_ms", pa.time32("ms")),
        ("t_us", pa.time64("us")),
        ("ts", pa.timestamp("us")),
        ("ts_ns", pa.timestamp("ns")),
        ("ts_tz", pa.timestamp("ms", tz="UTC")),
        ("ts_ny", pa.timestamp("us", tz="America/New_York")),
        ("l", pa.list_(pa.int32())),
        ("m", pa.map_(pa.string(), pa.float64())),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.list_(pa.string()))])),
    ]
)


def rows() -> pa.Table:
    return pa.table(
        {
            "id": [1, 2, 3],
            "b": [True, None, False],
            "i8": [1, -128, None],
            "i16": [300, None, -2],
            "i32": [None, 7, 2**31 - 1],
            "f32": [1.5, None, -0.25],
            "f64": [float("inf"), 2.5, None],
            "dec": [decimal.Decimal("1.2345"), None, decimal.Decimal("-99999.0001")],
            "s": ["héllo", "", None],
            "bin": [b"\x00\x01", None, b""],
            "fbin": [b"abc", b"xyz", None],
            "d": [datetime.date(2024, 2, 29), None, datetime.date(1970, 1, 1)],
            "t_ms": [datetime.time(1, 2, 3, 4000), None, datetime.time(0)],
            "t_us": [datetime.time(23, 59, 59, 999999), None, datetime.time(12)],
            "ts": [datetime.datetime(2024, 1, 1, 0, 0, 0, 1), None, datetime.datetime(1900, 1, 1)],
            "ts_ns": [1, None, 1_700_000_000_123_456_789],
            "ts_tz": [datetime.datetime(2024, 6, 1, tzinfo=datetime.UTC), None, None],
            "ts_ny": [datetime.datetime(2024, 6, 1, 12, tzinfo=datetime.UTC), None, None],
            "l": [[1, None, 3], [], None],
            "m": [[("a", 1.0)], None, []],
            "st": [{"x": 1, "y": ["p"]}, None, {"x": None, "y": None}],
        },
        schema=SCHEMA,
    )


def test_every_type_round_trips(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, primary_key=["id"], options={"bucket": "2"})
    t.write(rows())
    out = mt.open_table(table_uri).read().sort_by("id")
    expected = rows().cast(t.schema)
    assert out.schema.equals(t.schema)
    assert out.equals(expected)


def test_every_key_type_works_as_primary_key(table_uri: str) -> None:
    keyable = [f.name for f in SCHEMA if not pa.types.is_nested(f.type) and f.name != "id"]
    for name in keyable:
        uri = f"{table_uri}-{name}"
        t = mt.create_table(uri, SCHEMA, primary_key=[name, "id"], options={"bucket": "3"})
        assert t.table_schema.bucket_keys == (name, "id")
        data = rows().filter(pa.compute.is_valid(rows().column(name)))
        t.write(data)
        t.write(data)  # an upsert of the same keys
        assert t.read().num_rows == data.num_rows, name
