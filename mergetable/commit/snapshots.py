"""Snapshots and tags: latest/earliest with hints, loading, listing, time travel."""

from __future__ import annotations

import bisect
import time

from mergetable.core.errors import ArgumentError, CorruptMetadataError, SnapshotNotFoundError, TagExistsError
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory, valid_tag_name
from mergetable.core.read_options import iso_utc
from mergetable.metadata.models import Snapshot, Tag

_LATEST_ATTEMPTS = 10


class SnapshotManager:
    def __init__(self, fileio: FileIO) -> None:
        self.fileio = fileio
        self.paths = PathFactory(fileio.root)

    def _snapshot_file(self, snapshot_id: int) -> str:
        return self.paths.snapshot_file(snapshot_id)

    def exists(self, snapshot_id: int) -> bool:
        return self.fileio.exists(self._snapshot_file(snapshot_id))

    def list_ids(self) -> list[int]:
        ids = (self.paths.snapshot_id(name) for name in self.fileio.list_names(self.paths.snapshot_dir))
        return sorted(i for i in ids if i is not None)

    def _read_hint(self, path: str) -> int | None:
        try:
            text = self.fileio.read_text(path).strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() else None

    def latest_id(self) -> int | None:
        """The newest snapshot id. The LATEST hint is trusted only if the next snapshot does not exist."""
        hint = self._read_hint(self.paths.latest_hint)
        if hint is not None and self.exists(hint) and not self.exists(hint + 1):
            return hint
        ids = self.list_ids()
        return ids[-1] if ids else None

    def earliest_id(self) -> int | None:
        hint = self._read_hint(self.paths.earliest_hint)
        if hint is not None and self.exists(hint) and not (hint > 1 and self.exists(hint - 1)):
            return hint
        ids = self.list_ids()
        return ids[0] if ids else None

    def expired(self, snapshot_id: int) -> bool:
        """Whether expiration has passed ``snapshot_id`` (the EARLIEST hint, written before it deletes, is above
        it): a commit must not create that id again."""
        hint = self._read_hint(self.paths.earliest_hint)
        return hint is not None and snapshot_id < hint

    def load(self, snapshot_id: int) -> Snapshot:
        path = self._snapshot_file(snapshot_id)
        try:
            text = self.fileio.read_bytes(path)
        except FileNotFoundError:
            raise SnapshotNotFoundError(f"snapshot {snapshot_id} does not exist") from None
        snap = Snapshot.from_json(text, path)
        if snap.id != snapshot_id:
            raise CorruptMetadataError(path, f"holds snapshot id {snap.id}")
        return snap

    def latest(self) -> Snapshot | None:
        for _ in range(_LATEST_ATTEMPTS):
            latest = self.latest_id()
            if latest is None:
                return None
            try:
                return self.load(latest)
            except SnapshotNotFoundError:  # removed meanwhile (a rollback or an expiration): look again
                continue
        raise SnapshotNotFoundError(f"the latest snapshot kept disappearing ({_LATEST_ATTEMPTS} attempts)")

    def snapshots(self) -> list[Snapshot]:
        """Every snapshot file's snapshot, oldest first (one expired between listing and loading is left out)."""
        out = []
        for i in self.list_ids():
            try:
                out.append(self.load(i))
            except SnapshotNotFoundError:
                continue
        return out

    def commit_hint(self, snapshot_id: int) -> None:
        """Best-effort LATEST hint update (readers verify it; the commit is done whatever happens here)."""
        try:
            self.fileio.write_bytes(self.paths.latest_hint, str(snapshot_id).encode())
        except Exception:  # a hint: never fail a published commit over it
            pass

    def write_earliest_hint(self, snapshot_id: int) -> None:
        try:
            self.fileio.write_bytes(self.paths.earliest_hint, str(snapshot_id).encode())
        except OSError:
            pass

    def at_or_before(self, timestamp_ms: int) -> Snapshot:
        """The latest snapshot with ``timeMillis <= timestamp_ms`` (binary search over ids)."""
        ids = self.list_ids()
        if not ids:
            raise SnapshotNotFoundError("the table has no snapshots")
        times = _LazyTimes(self, ids)
        pos = bisect.bisect_right(times, timestamp_ms)
        if pos == 0:
            earliest = self.load(ids[0]).time_millis
            raise SnapshotNotFoundError(
                f"no snapshot at or before timestamp {timestamp_ms} ({iso_utc(timestamp_ms)}): the earliest snapshot, "
                f"{ids[0]}, was made at {earliest} ({iso_utc(earliest)})"
            )
        return self.load(ids[pos - 1])

    def find_committed(self, commit_user: str, identifier: int, after_id: int | None) -> Snapshot | None:
        """A snapshot newer than ``after_id`` made by (commit_user, identifier), if any (exactly-once retry)."""
        latest = self.latest_id()
        if latest is None:
            return None
        start = (after_id or 0) + 1
        for sid in range(latest, start - 1, -1):
            try:
                snap = self.load(sid)
            except SnapshotNotFoundError:
                break
            if snap.commit_user == commit_user and snap.commit_identifier == identifier:
                return snap
        return None


class _LazyTimes:
    """Sequence view of snapshot times, loading only what a binary search touches."""

    def __init__(self, manager: SnapshotManager, ids: list[int]) -> None:
        self.manager, self.ids, self.cache = manager, ids, {}  # type: ignore[var-annotated]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> int:
        if i not in self.cache:
            self.cache[i] = self.manager.load(self.ids[i]).time_millis
        return int(self.cache[i])


class TagManager:
    def __init__(self, fileio: FileIO) -> None:
        self.fileio = fileio
        self.paths = PathFactory(fileio.root)

    def _path(self, name: str) -> str:
        return self.paths.tag_file(name)

    def create(self, name: str, snapshot: Snapshot, time_retained_ms: int | None = None) -> Tag:
        if not valid_tag_name(name):
            raise ArgumentError("name", f"invalid tag name '{name}' (letters, digits, '_', '-', '.')")
        tag = Tag.model_validate(
            {**snapshot.model_dump(), "tag_create_time": int(time.time() * 1000), "tag_time_retained": time_retained_ms}
        )
        if not self.fileio.write_if_absent(self._path(name), tag.to_json().encode()):
            raise TagExistsError(f"tag '{name}' already exists")
        return tag

    def tagged_or_live(self, snapshots: SnapshotManager, snapshot_id: int) -> Snapshot:
        """Snapshot ``snapshot_id``, or, once it expired, the snapshot a tag still holds (as Paimon's
        ``createTag`` from a snapshot id); :class:`SnapshotNotFoundError` when neither exists."""
        try:
            return snapshots.load(int(snapshot_id))
        except SnapshotNotFoundError:
            held = next((t for t in self.list().values() if t.id == int(snapshot_id)), None)
            if held is None:
                raise
            return held.to_snapshot()

    def get(self, name: str) -> Tag:
        path = self._path(name)
        try:
            text = self.fileio.read_bytes(path)
        except FileNotFoundError:
            raise SnapshotNotFoundError(f"tag '{name}' does not exist") from None
        return Tag.from_json(text, path)

    def exists(self, name: str) -> bool:
        return self.fileio.exists(self._path(name))

    def delete(self, name: str) -> None:
        if not self.exists(name):
            raise SnapshotNotFoundError(f"tag '{name}' does not exist")
        self.fileio.delete(self._path(name))

    def list_names(self) -> list[str]:
        """The names of every tag, sorted."""
        names = (self.paths.tag_name(n) for n in sorted(self.fileio.list_names(self.paths.tag_dir)))
        return [name for name in names if name is not None]

    def list(self) -> dict[str, Tag]:
        return {name: self.get(name) for name in self.list_names()}
