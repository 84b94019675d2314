"""The error catalogue's vocabulary: a mistake, the table it is made on, and the table's state before and after.

A :class:`Mistake` is one call a newcomer gets wrong, the :class:`MergeTableError` subclass it must raise and a
word (the argument, option, column, file or value at fault) its message must contain. A :class:`CliMistake` is
the same for a command line. ``Ctx`` holds the table every mistake is made on: columns ``id`` (int64), ``dt``
(string), ``v`` (string) and ``n`` (int64); primary key ``(id, dt)``; partitioned by ``dt``; two buckets; two
snapshots and the tag ``first`` on snapshot 1.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

import mergetable as mt
from mergetable.core.errors import MergeTableError

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string()), ("n", pa.int64())])


@dataclass
class Ctx:
    tmp: Path
    table: mt.Table

    @property
    def uri(self) -> str:
        return self.table.uri

    @property
    def new_uri(self) -> str:
        """Where create_table mistakes aim: nothing may exist there afterwards."""
        return str(self.tmp / "new")

    def rows(self, **columns: Any) -> dict[str, Any]:
        """A valid batch (two rows) as a dict of columns, with ``columns`` replaced (None: dropped)."""
        data: dict[str, Any] = {"id": [10, 11], "dt": ["2024-01-01", "2024-01-02"], "v": ["x", "y"], "n": [1, 2]}
        data.update(columns)
        return {k: v for k, v in data.items() if v is not None}

    def arrow(self, **columns: Any) -> pa.Table:
        return pa.table(self.rows(**columns))

    @property
    def data_file(self) -> str:
        partition, bucket, f = self.table.files()[0]
        return self.table.path_factory.data_file(partition, bucket, f.file_name)


def make_ctx(tmp: Path, template: Path | None = None) -> Ctx:
    """The table of the mistakes in ``tmp/t``: a copy of the ``template`` table when given (faster), else made."""
    if template is not None:
        shutil.copytree(template, tmp / "t")
        return Ctx(tmp, mt.open_table(str(tmp / "t")))
    t = mt.create_table(str(tmp / "t"), SCHEMA, ["id", "dt"], ["dt"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2], "dt": ["2024-01-01", "2024-01-02"], "v": ["a", "b"], "n": [1, 2]}))
    t.write(pa.table({"id": [2, 3], "dt": ["2024-01-02", "2024-01-02"], "v": ["B", "c"], "n": [20, 3]}))
    t.create_tag("first", snapshot_id=1)
    return Ctx(tmp, t)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its content: the whole state of a local table."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@dataclass(frozen=True)
class Mistake:
    """``call(ctx)`` must raise ``error`` with ``word`` in its message and change nothing on disk."""

    id: str
    call: Callable[[Ctx], object]
    error: type[MergeTableError]
    word: str | Callable[[Ctx], str]
    without: str | None = None  # a module the call runs without (imports of it fail)


@dataclass(frozen=True)
class CliMistake:
    """``mergetable *argv(ctx)`` must exit non-zero, print one line naming ``word``, report ``error`` under --json."""

    id: str
    argv: Callable[[Ctx], list[str]]
    error: type[MergeTableError]
    word: str | Callable[[Ctx], str]
    without: str | None = None  # a module the command runs without (imports of it fail)


@contextlib.contextmanager
def without_module(name: str | None) -> Iterator[None]:
    """Run as if ``name`` were not installed: importing it fails and fsspec forgets the classes it provided."""
    if name is None:
        yield
        return
    saved_modules = {k: v for k, v in sys.modules.items() if k == name or k.startswith(name + ".")}
    registry: dict[str, Any] = sys.modules["fsspec.registry"]._registry
    saved_registry = {k: v for k, v in registry.items() if str(v.__module__).startswith(name)}
    for k in saved_modules:
        del sys.modules[k]
    sys.modules[name] = None  # type: ignore[assignment]
    for k in saved_registry:
        del registry[k]
    try:
        yield
    finally:
        del sys.modules[name]
        sys.modules.update(saved_modules)
        registry.update(saved_registry)


def error_classes() -> dict[str, type[MergeTableError]]:
    """Every MergeTableError subclass by name (the CLI reports the class name under --json)."""
    out: dict[str, type[MergeTableError]] = {}
    todo: list[type[MergeTableError]] = [MergeTableError]
    while todo:
        cls = todo.pop()
        out[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return out
