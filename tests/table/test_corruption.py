"""Silent corruption: a data file with a flipped byte is an error naming the file, never different rows."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import mergetable as mt

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("x", pa.float64())])


def _rows(n: int) -> pa.Table:
    return pa.table({"id": list(range(n)), "v": [f"s{i % 7}" for i in range(n)], "x": [i * 0.5 for i in range(n)]})


def test_data_files_carry_page_checksums(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, primary_key=["id"])
    t.write(_rows(10))
    (partition, bucket, meta) = t.files()[0]
    path = t.fileio.join(f"bucket-{bucket}", meta.file_name)
    assert pq.read_table(path, page_checksum_verification=True).num_rows == 10
    assert partition == ()


def _flipped_reads(
    uri: str, path: Path, positions: Iterable[int], reads: Sequence[Callable[[mt.Table], pa.Table]], expected: pa.Table
) -> int:
    """Flip one byte at each of ``positions`` of ``path`` in turn and run every read: each either raises a
    DataFileError naming the file or returns ``expected``. The file is restored; returns the errors raised."""
    original = path.read_bytes()
    errors = 0
    for pos in positions:
        flipped = bytearray(original)
        flipped[pos] ^= 0x01 if pos % 2 else 0xFF
        path.write_bytes(bytes(flipped))
        for read in reads:
            try:
                got = read(mt.open_table(uri))
            except mt.DataFileError as exc:
                assert path.name in str(exc)
                errors += 1
            else:
                assert got.equals(expected), f"a flip at byte {pos} of {len(original)} changed the rows silently"
    path.write_bytes(original)
    return errors


def test_single_byte_flips_never_return_different_rows(tmp_path: Path) -> None:
    stride = 7  # every 7th byte: data pages, page headers and the footer
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, SCHEMA, primary_key=["id"])
    t.write(_rows(200))
    expected = t.read()
    (_, bucket, meta) = t.files()[0]
    path = Path(t.fileio.join(f"bucket-{bucket}", meta.file_name))
    size = len(path.read_bytes())
    errors = _flipped_reads(uri, path, range(0, size, stride), [lambda t: t.read()], expected)
    assert errors > size // stride // 2
    assert mt.open_table(uri).read().equals(expected)


def test_byte_flips_before_the_footer_never_change_a_lookups_rows(tmp_path: Path) -> None:
    """A point lookup decodes only part of a file, and what it decodes is verified; the footer's row-group
    statistics, which no checksum covers, are trusted to skip row groups (as by any filtered read)."""
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, SCHEMA, primary_key=["id"])
    t.write(_rows(200))
    keys = [3, 77, 150]
    expected = t.read(filter=[("id", "in", keys)])
    assert expected.column("id").to_pylist() == keys
    (_, bucket, meta) = t.files()[0]
    path = Path(t.fileio.join(f"bucket-{bucket}", meta.file_name))
    original = path.read_bytes()
    footer = len(original) - 8 - int.from_bytes(original[-8:-4], "little")
    errors = _flipped_reads(uri, path, range(footer), [lambda t: t.read(filter=[("id", "in", keys)])], expected)
    assert errors > footer // 2


def test_byte_flips_in_a_merged_run_never_return_different_rows(tmp_path: Path) -> None:
    stride = 11
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, SCHEMA, primary_key=["id"], options={"write-only": "true"})
    t.write(_rows(300))
    t.write(_rows(200).set_column(1, "v", pa.array(["new"] * 200)))
    expected = t.read()
    newest = max(t.files(), key=lambda f: f[2].max_sequence_number)
    path = Path(t.fileio.join(f"bucket-{newest[1]}", newest[2].file_name))
    size = len(path.read_bytes())
    reads = [lambda t: t.read(), lambda t: t.scan().read_all()]  # files decoded ahead, and not
    errors = _flipped_reads(uri, path, range(0, size, stride), reads, expected)
    assert errors > size // stride
