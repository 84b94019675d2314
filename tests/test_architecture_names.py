"""docs/architecture.md names only what exists: every backticked code name resolves.

A backticked token is checked when it looks like code:

* a path (``mergetable/cli``, ``pyproject.toml``) or a module file (``lsm.py``): the file exists;
* a dotted name (``core.paths.PathFactory``, ``Table.write``, ``read.reader.SplitReader.read_splits``): its
  first part is a module of ``mergetable`` (relative to the package or to a tier) or a class, function or
  module defined somewhere in ``mergetable``; every later part is an attribute of the one before;
* a CamelCase identifier (``AlreadyCommittedError``) or a call (``abort()``): defined somewhere in ``mergetable``.

Spark's and pyarrow's own APIs (``spark.read.parquet``, ``df.write.format``) and option names are not code of
this project and are not checked.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import mergetable

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
FOREIGN_NAMES = {"RecordBatchReader"}  # pyarrow's
FOREIGN = ("spark.", "pyspark.", "df.", "pa.", "pq.", "pyarrow.", "polars.", "duckdb.", "fsspec.", "np.")
DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
IDENT = re.compile(r"^(?:[A-Z][a-z0-9]+[A-Z]\w*|[A-Za-z_]\w*\(\))$")


@cache
def modules() -> dict[str, ModuleType]:
    """Every module of the package by its full name (the Spark tier needs pyspark, so it is skipped without)."""
    out: dict[str, ModuleType] = {"mergetable": mergetable}
    for info in pkgutil.walk_packages(mergetable.__path__, "mergetable."):
        try:
            out[info.name] = importlib.import_module(info.name)
        except ImportError:
            continue
    return out


@cache
def definitions() -> dict[str, list[str]]:
    """Top-level and class-level names defined in the package's source, each with the modules defining them."""
    names: dict[str, list[str]] = {}
    for path in (ROOT / "mergetable").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names.setdefault(node.name, []).append(module)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        names.setdefault(target.id, []).append(module)
    return names


def tokens() -> list[str]:
    text = DOC.read_text()
    return sorted({m.group(1) for m in re.finditer(r"`([^`\n]+)`", text)})


def _attribute_path(root: Any, parts: list[str]) -> bool:
    obj = root
    for part in parts:
        if isinstance(obj, ModuleType) and f"{obj.__name__}.{part}" in modules():
            obj = modules()[f"{obj.__name__}.{part}"]
            continue
        if not hasattr(obj, part):
            fields = getattr(obj, "__dataclass_fields__", None) or getattr(obj, "model_fields", None) or {}
            if part in fields:
                return True
            return False
        obj = getattr(obj, part)
    return True


def resolves(token: str) -> bool:
    """Whether a dotted name names something real (see the module documentation)."""
    parts = token.split(".")
    mods = modules()
    for prefix in ("", "mergetable.", *(f"{m}." for m in mods if m.count(".") == 1)):
        for cut in range(len(parts), 0, -1):
            name = prefix + ".".join(parts[:cut])
            if name in mods and _attribute_path(mods[name], parts[cut:]):
                return True
    for module in definitions().get(parts[0], []):
        if module in mods and _attribute_path(mods[module], parts):
            return True
    return False


def checked(token: str) -> bool:
    if token.startswith(FOREIGN) or token in FOREIGN_NAMES or " " in token:
        return False
    return bool(DOTTED.match(token) or IDENT.match(token) or "/" in token or token.endswith(".py"))


def exists(token: str) -> bool:
    if "/" in token or token.endswith((".py", ".toml", ".md")):
        path = token.rstrip("/")
        if (ROOT / path).exists() or (ROOT / f"{path}.py").exists():
            return True
        return any((ROOT / "mergetable").rglob(Path(path).name))
    if token.endswith("()"):
        return token[:-2] in definitions() or resolves(token[:-2])
    if DOTTED.match(token):
        return resolves(token)
    return token in definitions()


CHECKED = [t for t in tokens() if checked(t)]


def test_the_document_names_code() -> None:
    assert len(CHECKED) > 50, CHECKED


@pytest.mark.parametrize("token", CHECKED)
def test_every_name_resolves(token: str) -> None:
    assert exists(token), f"docs/architecture.md names `{token}`, which does not exist in mergetable"


def test_a_wrong_name_is_caught() -> None:
    assert not exists("read.incremental.no_such_function")
    assert not exists("NoSuchClassAnywhere")
    assert not exists("mergetable/no_such_tier")
    assert exists("read.reader.SplitReader") and exists("Table.write") and exists("core.paths.PathFactory")
