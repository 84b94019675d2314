"""The documentation runs: every Python code block of README.md and docs/*.md, in order, one namespace per file.

Blocks of a file run top to bottom in the directory the test gives them, so a later block sees what earlier
ones defined (a tour). A file whose blocks use Spark (``spark`` or ``mergetable.spark``) is run whole under the
Spark marker with the shared session; its blocks before the first Spark block also run without Spark. A block
opts out only with a ``# doc-test: skip (reason)`` comment; those are counted and listed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"#\s*doc-test:\s*skip\s*\((?P<reason>[^)]+)\)")
SPARK = re.compile(r"\bspark\b|mergetable\.spark|\bmts\.")
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(doc: Path) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block of ``doc``."""
    text = doc.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in FENCE.finditer(text)]


def opted_out(code: str) -> bool:
    return SKIP.search(code) is not None


def run(doc: Path, todo: list[tuple[int, str]], namespace: dict[str, Any]) -> int:
    ran = 0
    for line, code in todo:
        if opted_out(code):
            continue
        try:
            exec(compile(code, f"{doc.name}:{line}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"the code block at {doc.name}:{line} fails: {type(exc).__name__}: {exc}") from exc
        ran += 1
    return ran


def spark_free_prefix(doc: Path) -> list[tuple[int, str]]:
    out = []
    for line, code in blocks(doc):
        if SPARK.search(code) and not opted_out(code):
            break
        out.append((line, code))
    return out


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_doc_blocks_run_without_spark(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    todo = spark_free_prefix(doc)
    if not blocks(doc):
        pytest.skip(f"{doc.name} has no Python code blocks")
    if not todo:
        pytest.skip(f"{doc.name} starts with Spark (run by test_doc_blocks_run_with_spark)")
    run(doc, todo, {"__name__": "__doc__"})


SPARK_DOCS = [d for d in DOCS if any(SPARK.search(c) and not opted_out(c) for _, c in blocks(d))]


@pytest.mark.spark
@pytest.mark.parametrize("doc", SPARK_DOCS, ids=[d.name for d in SPARK_DOCS])
def test_doc_blocks_run_with_spark(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark: Any) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(doc, blocks(doc), {"__name__": "__doc__", "spark": spark}) > 0


def test_opted_out_blocks_are_few_and_say_why() -> None:
    skipped = [(d.name, line, SKIP.search(c)) for d in DOCS for line, c in blocks(d) if opted_out(c)]
    total = sum(len(blocks(d)) for d in DOCS)
    for name, line, match in skipped:
        assert match is not None and len(match.group("reason").strip()) > 5, f"{name}:{line} opts out without a reason"
    where = [f"{name}:{line}" for name, line, _ in skipped]
    assert len(skipped) <= total // 4, f"{len(skipped)} of {total} blocks opt out: {where}"
    print(f"{len(skipped)} of {total} documentation blocks opt out: {where}")
