"""The documentation site builds in MkDocs' strict mode (``make docs``): every page in the nav, every link and
anchor found, every docstring of the API reference parsed without a warning, and nothing fetched from the
network (the built-in theme and plugins only)."""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MARKUP = ROOT / "docs" / "_ext" / "docstring_markup.py"


def test_the_docstring_markup_extension_does_what_its_examples_say() -> None:
    pytest.importorskip("griffe", reason="the docs tools: pip install 'mergetable[docs]'")
    spec = importlib.util.spec_from_file_location("docstring_markup", MARKUP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs tools: pip install 'mergetable[docs]'")
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs tools: pip install 'mergetable[docs]'")
    site = tmp_path / "site"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    build = ["build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)]
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", *build],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr
    pages = {p.relative_to(site).parent.as_posix() for p in site.rglob("index.html")}
    guides = {p.stem for p in (ROOT / "docs").glob("*.md")} - {"index"}
    assert guides <= pages and {"reference/table", "reference/cli", "reference/errors"} <= pages
    api = (site / "reference" / "table" / "index.html").read_text()
    for name in ("mergetable.table.create_table", "mergetable.table.Table.write", "mergetable.table.Table.delete"):
        assert f'id="{name}"' in api, name  # inherited members (RowLevelOperations.delete) are documented too
    assert "language-pycon" in api and "<blockquote>" not in api  # doctest examples render as code
    assert not re.search(r":(class|meth|func|mod):`", api)  # Sphinx roles render as code spans
    cli = (site / "cli" / "index.html").read_text()
    assert "mergetable write" in cli and "LSM tree" in cli
