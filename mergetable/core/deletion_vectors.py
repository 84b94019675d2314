"""Deletion vectors in Paimon's on-disk format: the bytes of one vector and of a deletion-vector index file.

A deletion vector marks the deleted row positions (0-based, in file order) of one data file. An index file
(``index/index-<uuid>-<n>``) holds the vectors of some data files of one bucket::

    version byte (1)
    for each data file:
        32-bit vector: BE int32 size | BE int32 magic 1581511376 | portable RoaringBitmap | BE int32 CRC32
                       size = 4 + the bitmap's bytes; the CRC covers the magic and the bitmap
        64-bit vector: BE int32 size | LE int32 magic 1681511377 | portable 64-bit RoaringBitmap (LE) | BE int32 CRC32
                       (Iceberg's deletion-vector blob; size and CRC as for 32-bit)

The index manifest records, per data file, the ``offset`` of its vector (where its size field starts) and a
``length``: for a 32-bit vector the size field's value (magic + bitmap), for a 64-bit vector every byte of it
(size field + magic + bitmap + CRC), as Paimon's ``BitmapDeletionVector`` and ``Bitmap64DeletionVector``
return them. pyroaring's ``BitMap`` / ``BitMap64`` serializations are the portable formats Java's
``RoaringBitmap`` / ``Roaring64NavigableMap.serializePortable`` read and write.

Example:
    >>> from pyroaring import BitMap
    >>> data, ranges = index_file_bytes({"data-1.parquet": BitMap([0, 3])})
    >>> data[:1], ranges[0]
    (b'\\x01', VectorRange(data_file='data-1.parquet', offset=1, length=24, cardinality=2))
    >>> read_vector(data[ranges[0].offset :], ranges[0].length)
    BitMap([0, 3])
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
from pyroaring import BitMap, BitMap64

from mergetable.core.errors import CorruptMetadataError
from mergetable.core.fileio import FileIO

VERSION = 1
"""The first byte of every deletion-vector index file (Paimon's ``VERSION_ID_V1``)."""
MAGIC_32 = 1581511376
"""Big-endian magic of a 32-bit vector (Paimon's ``BitmapDeletionVector.MAGIC_NUMBER``)."""
MAGIC_64 = 1681511377
"""Little-endian magic of a 64-bit vector (Paimon's ``Bitmap64DeletionVector``, Iceberg's blob magic)."""
DELETION_VECTORS_INDEX = "DELETION_VECTORS"
"""The index type of deletion-vector index files in the index manifest."""

Vector = BitMap | BitMap64


@dataclass(frozen=True)
class VectorRange:
    """Where the vector of ``data_file`` lies in an index file (Paimon's ``DeletionVectorMeta``)."""

    data_file: str
    offset: int
    length: int
    cardinality: int


@dataclass(frozen=True)
class DeletionFile:
    """The deletion vector of one data file, as a read is given it (Paimon's ``DeletionFile``): in index file
    ``index_file`` (a name under the table's ``index/``) at ``offset``, ``length`` and ``cardinality`` as recorded."""

    index_file: str
    offset: int
    length: int
    cardinality: int | None = None


def vector_bytes(vector: Vector, bitmap64: bool = False) -> tuple[bytes, int]:
    """The bytes of one vector as an index file holds them, and the length its manifest entry records.

    Example:
        >>> data, length = vector_bytes(BitMap([1, 2, 3]))
        >>> len(data), length, data[4:8].hex()
        (34, 26, '5e43f2d0')
    """
    if bitmap64:
        bitmap = vector if isinstance(vector, BitMap64) else BitMap64(vector)
        bitmap.run_optimize()
        body = struct.pack("<i", MAGIC_64) + bitmap.serialize()
    else:
        bitmap32 = vector if isinstance(vector, BitMap) else BitMap(vector)
        bitmap32.run_optimize()
        body = struct.pack(">i", MAGIC_32) + bitmap32.serialize()
    data = struct.pack(">i", len(body)) + body + struct.pack(">I", zlib.crc32(body))
    return data, len(data) if bitmap64 else len(body)


def read_vector(data: bytes, length: int | None = None, where: str = "<memory>") -> Vector:
    """The vector whose bytes start ``data`` (an index file from the vector's offset on); ``length``: what the
    manifest recorded, checked. A 32-bit vector reads as ``BitMap``, a 64-bit one as ``BitMap64``. Raises
    :class:`CorruptMetadataError` naming ``where`` on a bad size, magic or checksum."""
    if len(data) < 8:
        raise CorruptMetadataError(where, "deletion vector truncated")
    size, magic_be = struct.unpack_from(">ii", data, 0)
    magic_le = struct.unpack_from("<i", data, 4)[0]
    if magic_be == MAGIC_32:
        expected = size
    elif magic_le == MAGIC_64:
        expected = size + 8
    else:
        raise CorruptMetadataError(where, f"deletion vector has magic {magic_be}, not {MAGIC_32} or {MAGIC_64}")
    if length is not None and length != expected:
        raise CorruptMetadataError(where, f"deletion vector size {expected} differs from the recorded {length}")
    body = data[4 : 4 + size]
    if len(body) != size or len(data) < 8 + size:
        raise CorruptMetadataError(where, "deletion vector truncated")
    (crc,) = struct.unpack_from(">I", data, 4 + size)
    if crc != zlib.crc32(body):
        raise CorruptMetadataError(where, "deletion vector checksum mismatch (corrupt?)")
    try:
        if magic_be == MAGIC_32:
            return BitMap.deserialize(body[4:])
        return BitMap64.deserialize(body[4:])
    except ValueError as exc:
        raise CorruptMetadataError(where, f"deletion vector bitmap unreadable: {exc}") from None


def index_file_bytes(vectors: Mapping[str, Vector], bitmap64: bool = False) -> tuple[bytes, list[VectorRange]]:
    """One index file holding ``vectors`` (data file name → vector), in the mapping's order, and their ranges."""
    files = list(rolled_index_files(vectors, bitmap64, None))
    return files[0] if files else (bytes([VERSION]), [])


def rolled_index_files(
    vectors: Mapping[str, Vector], bitmap64: bool, target_size: int | None
) -> Iterator[tuple[bytes, list[VectorRange]]]:
    """``vectors`` in index files of about ``target_size`` bytes (None: one file); a file is closed once it
    passes the target, as Paimon's ``DeletionVectorIndexFileWriter.writeWithRolling`` does. Nothing for no
    vectors."""
    parts = [bytes([VERSION])]
    pos = 1
    ranges: list[VectorRange] = []
    for name, vector in vectors.items():
        data, length = vector_bytes(vector, bitmap64)
        ranges.append(VectorRange(name, pos, length, len(vector)))
        parts.append(data)
        pos += len(data)
        if target_size is not None and pos > target_size:
            yield b"".join(parts), ranges
            parts, pos, ranges = [bytes([VERSION])], 1, []
    if ranges:
        yield b"".join(parts), ranges


_INDEX_CACHE: OrderedDict[tuple[str, str], bytes] = OrderedDict()
_INDEX_CACHE_FILES = 64
_INDEX_LOCK = threading.Lock()


def load_vector(fileio: FileIO, index_dir: str, deletion: DeletionFile) -> Vector:
    """The vector ``deletion`` points at, its index file read once per process (index files never change)."""
    key = (fileio.uri, deletion.index_file)
    with _INDEX_LOCK:
        data = _INDEX_CACHE.get(key)
        if data is not None:
            _INDEX_CACHE.move_to_end(key)
    path = f"{index_dir}/{deletion.index_file}"
    if data is None:
        try:
            data = fileio.read_bytes(path)
        except FileNotFoundError:
            raise CorruptMetadataError(path, "deletion-vector index file is missing") from None
        check_version(data, path)
        with _INDEX_LOCK:
            _INDEX_CACHE[key] = data
            while len(_INDEX_CACHE) > _INDEX_CACHE_FILES:
                _INDEX_CACHE.popitem(last=False)
    return read_vector(data[deletion.offset :], deletion.length, path)


def check_version(data: bytes, where: str) -> None:
    """Refuse an index file that does not start with :data:`VERSION`."""
    if not data or data[0] != VERSION:
        raise CorruptMetadataError(where, f"deletion-vector index file version {data[:1].hex() or 'missing'}, not 1")


def kept_mask(vector: Vector | None, start: int, rows: int) -> np.ndarray | None:
    """Which of ``rows`` rows from position ``start`` on are not deleted (None: all are kept).

    Example:
        >>> kept_mask(BitMap([1, 5, 7]), 4, 4).tolist()
        [True, False, True, False]
    """
    if vector is None or not len(vector):
        return None
    positions = np.asarray(vector.to_array(), dtype=np.int64)
    lo, hi = np.searchsorted(positions, [start, start + rows])
    if lo == hi:
        return None
    mask = np.ones(rows, dtype=bool)
    mask[positions[lo:hi] - start] = False
    return mask


__all__ = [
    "DELETION_VECTORS_INDEX",
    "MAGIC_32",
    "MAGIC_64",
    "VERSION",
    "DeletionFile",
    "Vector",
    "VectorRange",
    "check_version",
    "index_file_bytes",
    "kept_mask",
    "load_vector",
    "read_vector",
    "rolled_index_files",
    "vector_bytes",
]
