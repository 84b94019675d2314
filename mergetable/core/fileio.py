"""Storage access over fsspec: read, write, atomic create-if-absent, list, delete.

``write_if_absent`` is the primitive the commit protocol rests on. On a local file system it writes a
temporary file and publishes it with ``os.link`` (fails if the target exists, never shows partial
content); on object stores it uses a conditional put (``If-None-Match: *`` via fsspec's
``mode="create"``); on the in-memory file system it is guarded by a process-wide lock.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
from collections.abc import Iterator
from typing import Any

import fsspec
import pyarrow.fs as pafs
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from mergetable.core import paths
from mergetable.core.arguments import location, mapping
from mergetable.core.errors import (
    ArgumentError,
    CommitStateUnknownError,
    MissingExtraError,
    OptionsError,
    storage_full,
)
from mergetable.core.progress import current as current_progress

_MEMORY_LOCK = threading.Lock()


def _write_temp(target: str, data: bytes, *, sync: bool) -> str:
    """Write ``data`` to a new temporary local file beside ``target`` (flushed to disk when ``sync``) and return its
    path. A failed write removes the temporary file and, when the storage is full, raises a
    :class:`~mergetable.core.errors.StorageFullError` naming ``target``."""
    path = paths.temp_path(target)
    try:
        with open(path, "wb") as fh:
            fh.write(data)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise storage_full(target, exc) or exc from exc
    return path


class FileIO:
    """A table root plus the fsspec file system that holds it. Paths given to methods are absolute."""

    def __init__(self, uri: str, storage_options: dict[str, Any] | None = None) -> None:
        uri = location(uri)
        self.storage_options = mapping(storage_options, "storage_options")
        try:
            fs, root = fsspec.core.url_to_fs(uri, **self.storage_options)
        except ImportError as exc:  # fsspec names the package its protocol needs (s3fs, gcsfs, adlfs …)
            s3 = uri.startswith(("s3://", "s3a://"))
            module = "s3fs" if s3 else exc.name or "the fsspec implementation of this protocol"
            raise MissingExtraError(f"the location {uri}", module, "s3" if s3 else None) from exc
        except ValueError as exc:  # "Protocol not known: foo"
            raise ArgumentError("uri", f"{uri}: {exc}") from None
        check_storage_options(fs, self.storage_options)
        self.fs: fsspec.AbstractFileSystem = fs
        self.uri = str(uri)
        self.root = root.rstrip("/") if root not in ("/", "") else root
        self.is_local = isinstance(fs, LocalFileSystem)
        self.is_memory = isinstance(fs, MemoryFileSystem)

    def __reduce__(self) -> tuple[Any, ...]:
        return (FileIO, (self.uri, self.storage_options))

    # -- paths ------------------------------------------------------------------------------------
    def join(self, *parts: str) -> str:
        return paths.join(self.root, *parts)

    # -- reading ----------------------------------------------------------------------------------
    def _fresh(self, path: str) -> None:
        """Forget cached listings (object-store file systems cache them), so other writers' files are seen."""
        if not (self.is_local or self.is_memory):
            self.fs.invalidate_cache(path)

    def exists(self, path: str) -> bool:
        self._fresh(path)
        return bool(self.fs.exists(path))

    def read_bytes(self, path: str) -> bytes:
        data: bytes = self.fs.cat_file(path)
        return data

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def size(self, path: str) -> int:
        return int(self.fs.size(path))

    def mtime(self, path: str) -> float | None:
        """The modification time (seconds) the storage gave ``path``, where it reports one as a number or time."""
        try:
            return _mtime(self.fs.info(path))
        except (ValueError, TypeError):  # reported in a form this does not read
            return None

    def list_names(self, directory: str) -> list[str]:
        """Base names in ``directory`` (empty if it does not exist)."""
        self._fresh(directory)
        try:
            entries = self.fs.ls(directory, detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries]

    def list_entries(self, directory: str) -> list[tuple[str, bool, float | None]]:
        """(base name, is a directory, modification time in seconds where known) of each entry of ``directory``."""
        self._fresh(directory)
        try:
            entries = self.fs.ls(directory, detail=True)
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for info in entries:
            name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
            out.append((name, info.get("type") == "directory", _mtime(info)))
        return out

    def walk_files(self, directory: str) -> Iterator[tuple[str, float | None]]:
        """Every file under ``directory`` with its modification time (seconds) where known."""
        self._fresh(directory)
        try:
            found = self.fs.find(directory, detail=True)
        except FileNotFoundError:
            return
        for path, info in found.items():
            if info.get("type") == "directory":
                continue
            yield str(path), _mtime(info)

    def arrow_fs(self) -> pafs.FileSystem:
        """A pyarrow file system for Parquet I/O on the same storage."""
        if self.is_local:
            return pafs.LocalFileSystem()
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    # -- writing ----------------------------------------------------------------------------------
    def makedirs(self, directory: str) -> None:
        if self.is_local or self.is_memory:
            self.fs.makedirs(directory, exist_ok=True)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write (overwrite) a whole file; local writes go through a temp file and an atomic rename."""
        self.makedirs(path.rsplit("/", 1)[0])
        if self.is_local:
            tmp = _write_temp(path, data, sync=False)
            try:
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            return
        try:
            self.fs.pipe_file(path, data)
        except OSError as exc:
            raise storage_full(path, exc) or exc from exc

    def write_if_absent(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` only if it does not exist. True if this call created it.

        Atomic across processes: exactly one of several racing callers wins, and readers never see
        partial content.
        """
        parent = path.rsplit("/", 1)[0]
        self.makedirs(parent)
        if self.is_local:
            tmp = _write_temp(path, data, sync=True)
            try:
                os.link(tmp, path)
                return True
            except FileExistsError:
                return False
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        if self.is_memory:
            with _MEMORY_LOCK:
                if self.fs.exists(path):
                    return False
                self.fs.pipe_file(path, data)
                return True
        try:
            self.fs.pipe_file(path, data, mode="create")
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            full = storage_full(path, exc)
            if full is None:  # the conditional put may or may not have been applied
                raise CommitStateUnknownError(f"conditional create of {path} failed: {exc}") from exc
            raise full from exc
        except Exception as exc:  # the conditional put may or may not have been applied
            raise CommitStateUnknownError(f"conditional create of {path} failed: {exc}") from exc

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(path)

    def delete_quietly(self, paths: list[str]) -> list[str]:
        """Delete files, returning the ones that could not be deleted (steps of the current progress, if any)."""
        failed = []
        progress = current_progress()
        progress.start(len(paths))
        for p in paths:
            try:
                self.delete(p)
            except OSError:
                failed.append(p)
            progress.advance()
        return failed


# Options every fsspec file system takes (instance caching and listings cache), besides its own parameters.
_COMMON_STORAGE_OPTIONS = frozenset({"skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths"})


def check_storage_options(fs: fsspec.AbstractFileSystem, options: dict[str, Any]) -> None:
    """Refuse storage options the local or in-memory file system would silently ignore (a typo, an S3 option).

    Remote file systems hand unknown options on to their client libraries, which check them there.
    """
    if not isinstance(fs, LocalFileSystem | MemoryFileSystem):
        return
    params = inspect.signature(type(fs).__init__).parameters
    known = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}
    known |= _COMMON_STORAGE_OPTIONS
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    for key in options:
        if key not in known:
            raise OptionsError(
                key,
                f"is not a storage option of the {protocol} file system (it takes {', '.join(sorted(known))}); "
                "storage options are for object stores such as s3:// locations",
            )


def _mtime(info: dict[str, Any]) -> float | None:
    """Modification time in seconds of an fsspec ``info`` entry, where the file system reports one."""
    mtime: Any = info.get("mtime") or info.get("LastModified") or info.get("created")
    if hasattr(mtime, "timestamp"):
        mtime = mtime.timestamp()
    return float(mtime) if mtime is not None else None
