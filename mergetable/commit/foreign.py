"""Tables of other formats found where a mergetable table was expected: Apache Paimon and Delta Lake.

mergetable follows Paimon's table layout (``schema/``, ``snapshot/``, ``manifest/``, ``bucket-N/``) but keeps its
metadata in its own JSON documents, so a table that Apache Paimon or pypaimon wrote looks like one at first
sight. Its manifests give it away: Paimon writes them as Avro files (or Parquet/ORC, by ``manifest.format``).
A Delta Lake table keeps its log in ``_delta_log/``. These checks run only once opening or reading a table has
failed, to turn "corrupt" or "newer format version" into what the directory really holds.
"""

from __future__ import annotations

from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory

_MANIFEST_MAGIC = {b"Obj\x01": "Avro", b"PAR1": "Parquet", b"ORC": "ORC"}
DELTA_LOG = "_delta_log"


def binary_manifest(data: bytes) -> str | None:
    """The file format of a Paimon manifest ``data`` begins with (None: not one; mergetable's are JSON).

    >>> binary_manifest(b"Obj\\x01\\x04\\x14avro.codec"), binary_manifest(b'{"entries": []}')
    ('Avro', None)
    """
    return next((kind for magic, kind in _MANIFEST_MAGIC.items() if data.startswith(magic)), None)


def paimon_message(where: str, manifest_format: str) -> str:
    """What to say about the Paimon table at ``where``."""
    return (
        f"{where} is an Apache Paimon table (its manifests are {manifest_format} files), not a mergetable table: "
        "mergetable shares Paimon's layout and merge semantics but keeps its own metadata, and does not read "
        "Paimon's. Read it with Apache Paimon (Spark, Flink) or pypaimon; to use its rows with mergetable, read "
        "them there and write them into a new mergetable table"
    )


def foreign_table(fileio: FileIO) -> str | None:
    """Why the directory of ``fileio`` is another format's table (a message), or None when it looks like none.

    Reads at most one manifest's first bytes.
    """
    paths = PathFactory(fileio.root)
    names = fileio.list_names(paths.manifest_dir)
    manifest = next((n for n in sorted(names) if n.startswith("manifest")), None)
    if manifest is not None:
        try:
            with fileio.fs.open(paths.manifest_file(manifest), "rb") as fh:
                head = fh.read(4)
        except OSError:
            head = b""
        kind = binary_manifest(head)
        if kind is not None:
            return paimon_message(fileio.uri, kind)
    if DELTA_LOG in fileio.list_names(fileio.root):
        return delta_message(fileio.uri)
    return None


def delta_message(where: str) -> str:
    """What to say about the Delta Lake table at ``where``."""
    return (
        f"{where} is a Delta Lake table (it has {DELTA_LOG}/), not a mergetable table: read it with deltalake or "
        "Spark's Delta data source"
    )


__all__ = ["DELTA_LOG", "binary_manifest", "delta_message", "foreign_table", "paimon_message"]
