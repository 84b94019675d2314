"""FLOAT/DOUBLE keys with NaN, ±inf and -0.0: a total order as Java's Double.compare, against a dict oracle."""

from __future__ import annotations

import math
import uuid
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt
from mergetable.core.floats import order_key

SPECIAL = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5, -1.5, 5e-324, -5e-324]
keys = st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=True, allow_infinity=True, width=64))
ops = st.lists(
    st.tuples(
        st.sampled_from(["write", "delete", "compact"]), st.lists(st.tuples(keys, st.integers(0, 99)), max_size=8)
    ),
    min_size=1,
    max_size=6,
)


def _state(rows: list[dict[str, object]]) -> dict[int, object]:
    out: dict[int, object] = {}
    for r in rows:
        k = order_key(float(r["k"]))  # type: ignore[arg-type]
        assert k not in out, f"key {r['k']} is returned twice"
        out[k] = r["v"]
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, float32=st.booleans())
def test_float_keys_against_oracle(
    tmp_path: Path, ops: list[tuple[str, list[tuple[float, int]]]], float32: bool
) -> None:
    key_type = pa.float32() if float32 else pa.float64()
    uri = str(tmp_path / uuid.uuid4().hex)
    t = mt.create_table(
        uri,
        pa.schema([("k", key_type), ("v", pa.int64())]),
        primary_key=["k"],
        options={"bucket": "2", "num-sorted-run.compaction-trigger": "3"},
    )
    oracle: dict[int, int] = {}
    for op, rows in ops:
        ks = [float(pa.scalar(k, key_type).as_py()) for k, _ in rows]
        if op == "compact":
            t.compact(full=True)
        elif op == "write" and rows:
            snap = t.write(pa.table({"k": pa.array(ks, key_type), "v": [v for _, v in rows]}))
            assert snap is not None  # a committed write is reported as committed
            for k, (_, v) in zip(ks, rows, strict=True):
                oracle[order_key(k)] = v
        elif op == "delete" and rows:
            t.delete_keys(pa.table({"k": pa.array(ks, key_type)}))
            for k in ks:
                oracle.pop(order_key(k), None)
        assert _state(t.read().to_pylist()) == oracle
    for lit in (0.0, -0.0, math.inf, -math.inf, 1.5, math.nan):  # Spark's semantics: -0.0 = 0.0, NaN = NaN
        got = _state(t.read(filter=[("k", "=", lit)]).to_pylist())
        matching = (order_key(0.0), order_key(-0.0)) if lit == 0 else (order_key(lit),)
        assert got == {k: v for k, v in oracle.items() if k in matching}, lit
    above = _state(t.read(filter=[("k", ">", 1.5)]).to_pylist())  # NaN is greater than everything
    assert above == {k: v for k, v in oracle.items() if k > order_key(1.5)}
