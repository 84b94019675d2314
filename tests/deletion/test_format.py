"""The deletion-vector index file is Paimon's, byte for byte: fixtures assembled here by hand, not by the writer."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pyarrow as pa
import pytest
from pyroaring import BitMap, BitMap64

import mergetable as mt
from mergetable.core.deletion_vectors import (
    DeletionFile,
    index_file_bytes,
    kept_mask,
    load_vector,
    read_vector,
    rolled_index_files,
    vector_bytes,
)
from mergetable.core.errors import CorruptMetadataError
from mergetable.core.fileio import FileIO


def _portable_32(values: list[int]) -> bytes:
    """The portable RoaringBitmap bytes of a few values below 65536 in one array container, assembled by hand
    (cookie 12346, one container: key 0, cardinality-1, offset 16, then the uint16 values)."""
    assert values == sorted(values) and values[-1] < 65536
    header = struct.pack("<II", 12346, 1) + struct.pack("<HH", 0, len(values) - 1) + struct.pack("<I", 16)
    return header + b"".join(struct.pack("<H", v) for v in values)


def test_hand_assembled_roaring_matches_pyroaring() -> None:
    assert _portable_32([1, 2, 3]) == BitMap([1, 2, 3]).serialize()


def test_32_bit_index_file_bytes() -> None:
    first, second = _portable_32([0, 7]), _portable_32([2, 3, 9])
    body1 = struct.pack(">i", 1581511376) + first
    body2 = struct.pack(">i", 1581511376) + second
    expected = (
        b"\x01"
        + struct.pack(">i", len(body1))
        + body1
        + struct.pack(">I", zlib.crc32(body1))
        + struct.pack(">i", len(body2))
        + body2
        + struct.pack(">I", zlib.crc32(body2))
    )
    data, ranges = index_file_bytes({"data-a.parquet": BitMap([0, 7]), "data-b.parquet": BitMap([2, 3, 9])})
    assert data == expected
    # Paimon's DeletionVectorMeta: offset of the size field, length = the size field's value (magic + bitmap)
    assert [(r.data_file, r.offset, r.length, r.cardinality) for r in ranges] == [
        ("data-a.parquet", 1, len(body1), 2),
        ("data-b.parquet", 1 + 8 + len(body1), len(body2), 3),
    ]
    assert read_vector(expected[ranges[1].offset :], ranges[1].length) == BitMap([2, 3, 9])


def test_64_bit_vector_bytes() -> None:
    # Iceberg/Paimon 64-bit blob: BE size, LE magic 1681511377 (d1 d3 39 64), portable 64-bit bitmap, BE CRC
    portable = struct.pack("<Q", 1) + struct.pack("<I", 0) + _portable_32([5])
    body = bytes.fromhex("d1d33964") + portable
    expected = struct.pack(">i", len(body)) + body + struct.pack(">I", zlib.crc32(body))
    data, length = vector_bytes(BitMap64([5]), bitmap64=True)
    assert data == expected
    assert length == len(expected)  # Paimon records every byte of a 64-bit vector
    assert read_vector(expected, len(expected)) == BitMap64([5])
    big = BitMap64([3, 2**40 + 1])
    assert read_vector(vector_bytes(big, bitmap64=True)[0]) == big


def test_corrupt_vectors_are_refused() -> None:
    data, length = vector_bytes(BitMap([1, 2]))
    with pytest.raises(CorruptMetadataError, match="checksum"):
        read_vector(data[:-1] + bytes([data[-1] ^ 1]), length)
    with pytest.raises(CorruptMetadataError, match="recorded"):
        read_vector(data, length + 1)
    with pytest.raises(CorruptMetadataError, match="magic"):
        read_vector(data[:4] + b"\x00\x00\x00\x00" + data[8:], length)


def test_rolling_and_masks(tmp_path: Path) -> None:
    vectors = {f"data-{i}.parquet": BitMap(range(i, 1000, 3)) for i in range(5)}
    files = list(rolled_index_files(vectors, False, 100))
    assert len(files) == 5 and all(f[0][:1] == b"\x01" for f in files)
    fileio = FileIO(str(tmp_path))
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "index-x-0").write_bytes(files[2][0])
    r = files[2][1][0]
    vector = load_vector(fileio, fileio.join("index"), DeletionFile("index-x-0", r.offset, r.length, r.cardinality))
    assert vector == vectors["data-2.parquet"]
    assert kept_mask(BitMap([0, 2]), 0, 3).tolist() == [False, True, False]  # type: ignore[union-attr]
    assert kept_mask(BitMap([10]), 0, 3) is None


def test_a_written_table_reads_back_with_pyroaring(tmp_path: Path) -> None:
    t = mt.create_table(
        str(tmp_path / "t"),
        pa.schema([("k", pa.int64()), ("v", pa.int64())]),
        ["k"],
        options={"deletion-vectors.enabled": "true", "num-sorted-run.compaction-trigger": "10"},
    )
    t.write(pa.table({"k": list(range(100)), "v": [0] * 100}))
    t.write(pa.table({"k": list(range(100, 300)), "v": [1] * 200}))  # the first run stays at the top level
    t.write(pa.table({"k": [5, 50, 150], "v": [2, 2, 2]}))
    [entry] = [e for e in t.system_table("table_indexes").to_pylist() if e["index_type"] == "DELETION_VECTORS"]
    raw = (tmp_path / "t" / "index" / entry["file_name"]).read_bytes()
    assert raw[:1] == b"\x01" and len(raw) == entry["file_size"]
    found = {}
    for r in entry["dv_ranges"]:
        size, magic = struct.unpack_from(">ii", raw, r["f1"])
        assert size == r["f2"] and magic == 1581511376
        body = raw[r["f1"] + 4 : r["f1"] + 4 + size]
        assert struct.unpack_from(">I", raw, r["f1"] + 4 + size)[0] == zlib.crc32(body)
        found[r["f0"]] = BitMap.deserialize(body[4:])
        assert len(found[r["f0"]]) == r["_CARDINALITY"]
    assert sum(len(v) for v in found.values()) == 3
    assert {Path(p).name: v for p, v in t.deletion_vectors().items()} == found
