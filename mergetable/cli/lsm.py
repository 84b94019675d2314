"""The LSM tree of each bucket as ``mergetable describe`` draws it: levels, sorted runs, files, rows and sizes.

:func:`bucket_trees` summarises the live files of a snapshot per (partition, bucket) and level; every level-0
file is a sorted run of its own, and each higher level is one sorted run. :func:`draw_trees` renders them as
text bars (one per level, its length proportional to the level's bytes), marking the buckets whose sorted
runs reached ``num-sorted-run.compaction-trigger``, which the next compaction picks up::

    dt=2024-05-01  bucket 0  4 sorted runs: compaction due (trigger 4)
      L0  3 runs  3 files      60 rows    4.1 KiB  ███
      L5  1 run   1 file    9,000 rows  612.0 KiB  ██████████████████████████████
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mergetable.metadata.models import DataFileMeta

BAR_WIDTH = 30
"""Characters of the longest bar (the level with the most bytes among those drawn)."""


@dataclass
class LevelSummary:
    """The files of one level of one bucket."""

    level: int
    runs: int = 0
    files: int = 0
    rows: int = 0
    bytes: int = 0


@dataclass
class BucketTree:
    """The LSM tree of one bucket: its non-empty levels, lowest first."""

    partition: str
    bucket: int
    levels: list[LevelSummary] = field(default_factory=list)

    @property
    def sorted_runs(self) -> int:
        return sum(level.runs for level in self.levels)

    def as_json(self, trigger: int) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "bucket": self.bucket,
            "sorted_runs": self.sorted_runs,
            "compaction_due": self.sorted_runs >= trigger,
            "levels": [vars(level) for level in self.levels],
        }


def bucket_trees(
    files: Iterable[tuple[tuple[Any, ...], int, DataFileMeta]], partition_keys: Sequence[str]
) -> list[BucketTree]:
    """The live ``files`` (``Table.files()``: partition, bucket, file) as one tree per bucket, sorted.

    >>> from types import SimpleNamespace as F
    >>> trees = bucket_trees([(("a",), 0, F(level=0, row_count=2, file_size=10)),
    ...                       (("a",), 0, F(level=0, row_count=3, file_size=20)),
    ...                       (("a",), 0, F(level=5, row_count=9, file_size=70))], ["dt"])
    >>> [(t.partition, t.bucket, t.sorted_runs) for t in trees], trees[0].levels[0]
    ([('dt=a', 0, 3)], LevelSummary(level=0, runs=2, files=2, rows=5, bytes=30))
    """
    by_bucket: dict[tuple[tuple[Any, ...], int], dict[int, LevelSummary]] = {}
    for partition, bucket, f in files:
        levels = by_bucket.setdefault((tuple(partition), bucket), {})
        summary = levels.setdefault(f.level, LevelSummary(f.level))
        summary.files += 1
        summary.rows += f.row_count
        summary.bytes += f.file_size
        summary.runs = summary.files if f.level == 0 else 1
    trees = []
    for (partition, bucket), levels in sorted(by_bucket.items(), key=lambda kv: (_sort_key(kv[0][0]), kv[0][1])):
        spec = "/".join(f"{k}={v}" for k, v in zip(partition_keys, partition, strict=True))
        trees.append(BucketTree(spec, bucket, [levels[n] for n in sorted(levels)]))
    return trees


def _sort_key(partition: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple("" if v is None else str(v) for v in partition)


def draw_trees(trees: Sequence[BucketTree], trigger: int, limit: int, unicode: bool = True) -> list[str]:
    """Text lines drawing at most ``limit`` of ``trees`` (0: all); ``unicode`` False draws bars with ``#``.

    >>> tree = BucketTree("", 1, [LevelSummary(0, 2, 2, 5, 30), LevelSummary(5, 1, 1, 9_000, 3 * 1024)])
    >>> print("\\n".join(draw_trees([tree], trigger=5, limit=0, unicode=False)))
    bucket 1  3 sorted runs (compaction at 5)
      L0  2 runs  2 files      5 rows     30 B  #
      L5  1 run   1 file   9,000 rows  3.0 KiB  ##############################
    """
    if not trees:
        return ["(no data files)"]
    shown = list(trees if limit == 0 else trees[:limit])
    widest = max(level.bytes for tree in shown for level in tree.levels) or 1
    cells = [[_level_cells(level) for level in tree.levels] for tree in shown]
    widths = [max(len(row[i]) for rows in cells for row in rows) for i in range(5)]
    mark = "█" if unicode else "#"
    lines = []
    for tree, rows in zip(shown, cells, strict=True):
        where = f"{tree.partition}  bucket {tree.bucket}" if tree.partition else f"bucket {tree.bucket}"
        due = tree.sorted_runs >= trigger
        state = f": compaction due (trigger {trigger})" if due else f" (compaction at {trigger})"
        lines.append(f"{where}  {_plural(tree.sorted_runs, 'sorted run')}{state}")
        for level, row in zip(tree.levels, rows, strict=True):
            bar = mark * max(1, round(BAR_WIDTH * level.bytes / widest)) if level.bytes else ""
            text = [row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].ljust(widths[2])]
            text += [row[3].rjust(widths[3]), row[4].rjust(widths[4])]
            lines.append("  " + "  ".join([*text, bar]).rstrip())
    if len(shown) < len(trees):
        lines.append(f"... and {len(trees) - len(shown)} more bucket(s) (--buckets 0 draws all)")
    return lines


def _level_cells(level: LevelSummary) -> list[str]:
    rows = f"{level.rows:,} row" + ("" if level.rows == 1 else "s")
    return [f"L{level.level}", _plural(level.runs, "run"), _plural(level.files, "file"), rows, human_bytes(level.bytes)]


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def human_bytes(n: int) -> str:
    """``n`` bytes for a person: ``512 B``, ``4.0 KiB``, ``1.5 MiB`` …

    >>> human_bytes(512), human_bytes(4096), human_bytes(3 * 2**29)
    ('512 B', '4.0 KiB', '1.5 GiB')
    """
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"
