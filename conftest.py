"""Doctest namespace for the member examples of :class:`mergetable.Table`: ``pa``, ``mt`` and ``t``.

``t`` is a fresh table in a temporary directory, made exactly as the ``Table`` class docstring shows:
columns ``id`` (the key) and ``v``, snapshot 1 writing ``{1: "a", 2: "b"}`` and snapshot 2 ``{2: "B"}``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

_TABLE_EXAMPLES = (
    "mergetable.table.",
    "mergetable.commit.store.",
    "mergetable.commit.alter.",
    "mergetable.dml.api.",
    "mergetable.dml.merge.",
    "mergetable.interop.views.",
    "mergetable.compaction.mixin.",
)


@pytest.fixture(autouse=True)
def _doctest_table(request: pytest.FixtureRequest) -> None:
    if type(request.node).__name__ != "DoctestItem" or not request.node.name.startswith(_TABLE_EXAMPLES):
        return
    import mergetable as mt

    namespace: dict[str, Any] = request.getfixturevalue("doctest_namespace")
    uri = str(request.getfixturevalue("tmp_path") / "t")
    t = mt.create_table(uri, pa.schema([("id", pa.int64()), ("v", pa.string())]), ["id"])
    t.write(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    t.write(pa.table({"id": [2], "v": ["B"]}))
    namespace.update(pa=pa, mt=mt, t=t)
