"""JSON manifests and manifest lists: writing, reading (cached, they are immutable), folding into live files."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

from mergetable.commit.foreign import binary_manifest, paimon_message
from mergetable.core.errors import CorruptMetadataError, UnsupportedError
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory
from mergetable.metadata.models import (
    FileKind,
    ManifestEntry,
    ManifestFile,
    ManifestFileMeta,
    ManifestList,
    PartitionStats,
    Snapshot,
)

Identifier = tuple[tuple[str | None, ...], int, int, str]
_CACHE_ENTRIES = 512
_cache: OrderedDict[tuple[str, str], object] = OrderedDict()
_cache_lock = threading.Lock()


def _cached(key: tuple[str, str]) -> object | None:
    with _cache_lock:
        value = _cache.get(key)
        if value is not None:
            _cache.move_to_end(key)
        return value


def _remember(key: tuple[str, str], value: object) -> None:
    with _cache_lock:
        _cache[key] = value
        while len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)


class ManifestIO:
    """Reads and writes the manifest files of one table."""

    def __init__(self, fileio: FileIO) -> None:
        self.fileio = fileio
        self.paths = PathFactory(fileio.root)

    def _path(self, name: str) -> str:
        return self.paths.manifest_file(name)

    # -- manifests ----------------------------------------------------------------------------------
    def write_manifests(
        self, entries: Sequence[ManifestEntry], schema_id: int, target_size: int
    ) -> list[ManifestFileMeta]:
        """Write entries into as many manifests as ``target_size`` asks for."""
        metas: list[ManifestFileMeta] = []
        if not entries:
            return metas
        approx_entry = max(1, len(ManifestFile(entries=(entries[0],)).to_json()))
        per_file = max(1, target_size // approx_entry)
        try:
            for start in range(0, len(entries), per_file):
                chunk = tuple(entries[start : start + per_file])
                name = self.paths.new_manifest_name()
                data = ManifestFile(entries=chunk).to_json().encode()
                self.fileio.write_bytes(self._path(name), data)
                metas.append(_manifest_meta(name, len(data), chunk, schema_id))
        except BaseException:  # the manifests written before the failure are nobody's
            self.fileio.delete_quietly([self._path(m.file_name) for m in metas])
            raise
        return metas

    def _read(self, name: str, what: str, parse: Callable[[bytes, str], object]) -> object:
        """Parse an immutable manifest document once per process (LRU-cached by table and name)."""
        key = (self.fileio.uri, name)
        hit = _cached(key)
        if hit is not None:
            return hit
        path = self._path(name)
        try:
            text = self.fileio.read_bytes(path)
        except FileNotFoundError:
            raise CorruptMetadataError(path, f"{what} is missing") from None
        try:
            value = parse(text, path)
        except CorruptMetadataError:
            kind = binary_manifest(text)
            if kind is None:
                raise
            raise UnsupportedError(paimon_message(self.fileio.uri, kind)) from None
        _remember(key, value)
        return value

    def read_manifest(self, name: str) -> tuple[ManifestEntry, ...]:
        return self._read(name, "manifest file", lambda t, p: ManifestFile.from_json(t, p).entries)  # type: ignore[return-value]

    # -- manifest lists ---------------------------------------------------------------------------
    def write_list(self, metas: Sequence[ManifestFileMeta]) -> tuple[str, int]:
        name = self.paths.new_manifest_list_name()
        data = ManifestList(manifests=tuple(metas)).to_json().encode()
        self.fileio.write_bytes(self._path(name), data)
        return name, len(data)

    def read_list(self, name: str) -> tuple[ManifestFileMeta, ...]:
        return self._read(name, "manifest list", lambda t, p: ManifestList.from_json(t, p).manifests)  # type: ignore[return-value]

    def read_entries(self, metas: Iterable[ManifestFileMeta]) -> list[ManifestEntry]:
        out: list[ManifestEntry] = []
        for m in metas:
            out.extend(self.read_manifest(m.file_name))
        return out

    # -- snapshot views -----------------------------------------------------------------------------
    def data_manifests(self, snapshot: Snapshot) -> list[ManifestFileMeta]:
        return [*self.read_list(snapshot.base_manifest_list), *self.read_list(snapshot.delta_manifest_list)]

    def live_entries(self, snapshot: Snapshot | None) -> list[ManifestEntry]:
        """ADD entries of every file live in ``snapshot`` (base + delta folded)."""
        if snapshot is None:
            return []
        return fold(self.read_entries(self.data_manifests(snapshot)))

    def delta_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        return self.read_entries(self.read_list(snapshot.delta_manifest_list))

    def changelog_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        if snapshot.changelog_manifest_list is None:
            return []
        return self.read_entries(self.read_list(snapshot.changelog_manifest_list))


def fold(entries: Iterable[ManifestEntry], keep_unmatched_deletes: bool = False) -> list[ManifestEntry]:
    """Apply entries in order: ADD adds a file, DELETE cancels the matching ADD."""
    live: dict[Identifier, ManifestEntry] = {}
    deletes: dict[Identifier, ManifestEntry] = {}
    for e in entries:
        ident = e.identifier
        if e.kind is FileKind.ADD:
            if ident in live:
                raise CorruptMetadataError(e.file.file_name, "file is added twice in the manifests")
            live[ident] = e
        elif ident in live:
            del live[ident]
        else:
            deletes[ident] = e
    out = list(live.values())
    if keep_unmatched_deletes:
        out.extend(deletes.values())
    return out


def _manifest_meta(name: str, size: int, entries: Sequence[ManifestEntry], schema_id: int) -> ManifestFileMeta:
    parts = [e.partition for e in entries]
    width = len(parts[0]) if parts else 0
    mins: list[str | None] = []
    maxs: list[str | None] = []
    nulls: list[int] = []
    for i in range(width):
        values = [v for p in parts if (v := p[i]) is not None]
        mins.append(min(values) if values else None)
        maxs.append(max(values) if values else None)
        nulls.append(sum(1 for p in parts if p[i] is None))
    return ManifestFileMeta(
        file_name=name,
        file_size=size,
        num_added_files=sum(1 for e in entries if e.kind is FileKind.ADD),
        num_deleted_files=sum(1 for e in entries if e.kind is FileKind.DELETE),
        partition_stats=PartitionStats(min_values=tuple(mins), max_values=tuple(maxs), null_counts=tuple(nulls)),
        schema_id=schema_id,
        min_bucket=min(e.bucket for e in entries),
        max_bucket=max(e.bucket for e in entries),
        min_level=min(e.file.level for e in entries),
        max_level=max(e.file.level for e in entries),
    )
