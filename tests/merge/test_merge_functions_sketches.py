"""rbm32, rbm64, hll_sketch, theta_sketch."""

from __future__ import annotations

import datasketches
import pyarrow as pa
import pytest
from merge_support import fold
from pyroaring import BitMap, BitMap64

from mergetable.core.errors import MergeError
from mergetable.functions import (
    bitmap_or,
    hll_estimate,
    hll_sketch,
    hll_union,
    theta_estimate,
    theta_sketch,
    theta_union,
    to_bitmap,
    to_bitmap64,
)

BYTES = pa.binary()


def test_rbm32_union() -> None:
    got = fold("rbm32", BYTES, [to_bitmap(1, 2), None, to_bitmap(2, 3)])
    assert BitMap.deserialize(got) == BitMap([1, 2, 3])
    assert got == bitmap_or(to_bitmap(1, 2), to_bitmap(2, 3))


def test_rbm64_union() -> None:
    got = fold("rbm64", BYTES, [to_bitmap64(1, 2**40), to_bitmap64(2**50)])
    assert BitMap64.deserialize(got) == BitMap64([1, 2**40, 2**50])


def test_lone_value_kept_byte_for_byte() -> None:
    odd = b"not a bitmap"
    assert fold("rbm32", BYTES, [odd, None]) == odd


@pytest.mark.parametrize("function", ["rbm32", "rbm64", "hll_sketch", "theta_sketch"])
def test_malformed_value_names_column(function: str) -> None:
    good = {
        "rbm32": to_bitmap(1),
        "rbm64": to_bitmap64(1),
        "hll_sketch": hll_sketch(1),
        "theta_sketch": theta_sketch(1),
    }[function]
    with pytest.raises(MergeError, match=f"column 'v': {function}: malformed"):
        fold(function, BYTES, [good, b"\x01garbage"])


@pytest.mark.parametrize("function", ["rbm32", "rbm64", "hll_sketch", "theta_sketch"])
def test_sketches_cannot_retract(function: str) -> None:
    with pytest.raises(MergeError, match="does not support retraction"):
        fold(function, BYTES, [to_bitmap(1), to_bitmap(1)], ["+I", "-U"])


def test_hll_union_result_is_hll4() -> None:
    a = hll_sketch(*range(100))
    b = hll_sketch(*range(50, 200))
    got = fold("hll_sketch", BYTES, [a, b])
    sketch = datasketches.hll_sketch.deserialize(got)
    assert sketch.tgt_type == datasketches.tgt_hll_type.HLL_4
    assert round(hll_estimate(got)) == pytest.approx(200, abs=4)
    assert got == hll_union(a, b)


def test_theta_union() -> None:
    got = fold("theta_sketch", BYTES, [theta_sketch(*range(10)), theta_sketch(*range(5, 20))])
    assert theta_estimate(got) == 20.0
    assert got == theta_union(theta_sketch(*range(10)), theta_sketch(*range(5, 20)))
