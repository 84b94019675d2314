"""The level model of one bucket and universal compaction picking, as Paimon does it. Pure: no I/O.

Levels ``0 .. num_levels-1``. Every level-0 file is a sorted run of its own (newest first, by maximum
sequence number); every higher level is one sorted run. The runs of a bucket, newest first, are what
:class:`UniversalCompaction` picks from:

1. size amplification: with at least ``trigger`` runs, if the runs newer than the oldest one are together
   more than ``max_size_amp`` percent of the oldest, everything is compacted to the max level;
2. size ratio: with at least ``trigger`` runs, starting from the newest run, the next run is absorbed while
   it is no bigger than the candidates so far times ``(100 + size_ratio) / 100``; once two runs are picked,
   runs at level 0 or 1 are always absorbed;
3. run count: with more than ``trigger`` runs, the newest ``runs - trigger + 1`` are forced and then
   extended by size ratio.

The output level of a pick is the level of the first run left out minus one, never level 0 (more runs
are absorbed until a run at a level above 0 is included), and the max level when every run is picked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mergetable.metadata.models import DataFileMeta

KeyOf = Callable[[DataFileMeta], Any]


@dataclass(frozen=True)
class SortedRun:
    """Files with disjoint key ranges, in key order."""

    files: tuple[DataFileMeta, ...]

    @property
    def total_size(self) -> int:
        return sum(f.file_size for f in self.files)


@dataclass(frozen=True)
class LevelSortedRun:
    level: int
    run: SortedRun

    @property
    def total_size(self) -> int:
        return self.run.total_size


@dataclass(frozen=True)
class CompactUnit:
    """Files to compact together and the level their output goes to."""

    output_level: int
    files: tuple[DataFileMeta, ...]

    @classmethod
    def from_runs(cls, output_level: int, runs: Sequence[LevelSortedRun]) -> CompactUnit:
        return cls(output_level, tuple(f for r in runs for f in r.run.files))


def _level0_order(f: DataFileMeta) -> tuple[int, int, int, str]:
    return (-f.max_sequence_number, f.min_sequence_number, f.creation_time, f.file_name)


class Levels:
    """The files of one bucket arranged by level (Paimon's ``Levels``)."""

    def __init__(self, files: Sequence[DataFileMeta], num_levels: int, min_key: KeyOf) -> None:
        restored = max(num_levels, max((f.level for f in files), default=-1) + 1)
        if restored < 2:
            raise ValueError("the number of levels must be at least 2")
        self.level0: list[DataFileMeta] = sorted((f for f in files if f.level == 0), key=_level0_order)
        upper: list[list[DataFileMeta]] = [[] for _ in range(restored - 1)]
        for f in files:
            if f.level > 0:
                upper[f.level - 1].append(f)
        self.levels: list[SortedRun] = [SortedRun(tuple(sorted(fs, key=min_key))) for fs in upper]

    @property
    def number_of_levels(self) -> int:
        return len(self.levels) + 1

    @property
    def max_level(self) -> int:
        return len(self.levels)

    def run_of_level(self, level: int) -> SortedRun:
        if level < 1:
            raise ValueError("level 0 has no single sorted run")
        return self.levels[level - 1]

    def number_of_sorted_runs(self) -> int:
        return len(self.level0) + sum(1 for r in self.levels if r.files)

    def non_empty_highest_level(self) -> int:
        """The highest level holding a file, 0 if only level 0 does, -1 if the bucket is empty."""
        for i in range(len(self.levels) - 1, -1, -1):
            if self.levels[i].files:
                return i + 1
        return 0 if self.level0 else -1

    def level_sorted_runs(self) -> list[LevelSortedRun]:
        """Every sorted run, newest first: each level-0 file, then levels 1.. in order."""
        runs = [LevelSortedRun(0, SortedRun((f,))) for f in self.level0]
        runs += [LevelSortedRun(i + 1, r) for i, r in enumerate(self.levels) if r.files]
        return runs

    def all_files(self) -> list[DataFileMeta]:
        return [f for r in self.level_sorted_runs() for f in r.run.files]


class UniversalCompaction:
    """Paimon's universal compaction strategy (``UniversalCompaction.pick`` / ``createUnit``)."""

    def __init__(self, max_size_amp: int, size_ratio: int, num_run_compaction_trigger: int) -> None:
        self.max_size_amp = max_size_amp
        self.size_ratio = size_ratio
        self.trigger = num_run_compaction_trigger

    def pick(self, num_levels: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        max_level = num_levels - 1
        unit = self.pick_for_size_amp(max_level, runs)
        if unit is not None:
            return unit
        unit = self.pick_for_size_ratio(max_level, runs)
        if unit is not None:
            return unit
        if len(runs) > self.trigger:
            return self._pick_by_ratio(max_level, runs, len(runs) - self.trigger + 1)
        return None

    def pick_for_size_amp(self, max_level: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        if len(runs) < self.trigger:
            return None
        newer = sum(r.total_size for r in runs[:-1])
        oldest = runs[-1].total_size
        if newer * 100 > self.max_size_amp * oldest:
            return CompactUnit.from_runs(max_level, runs)
        return None

    def pick_for_size_ratio(self, max_level: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        if len(runs) < self.trigger:
            return None
        return self._pick_by_ratio(max_level, runs, 1)

    def force_pick_level0(self, num_levels: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        """Every level-0 run (extended by size ratio): how lookup tables keep level 0 empty."""
        count = 0
        for r in runs:
            if r.level > 0:
                break
            count += 1
        if count == 0:
            return None
        return self._pick_by_ratio(num_levels - 1, runs, count, force=True)

    def _pick_by_ratio(
        self, max_level: int, runs: Sequence[LevelSortedRun], count: int, force: bool = False
    ) -> CompactUnit | None:
        size = sum(r.total_size for r in runs[:count])
        triggered = force or count > 1
        for nxt in runs[count:]:
            if size * (100.0 + self.size_ratio) / 100.0 < nxt.total_size and (not triggered or nxt.level > 1):
                break
            size += nxt.total_size
            count += 1
            triggered = True
        return self.create_unit(runs, max_level, count) if triggered else None

    def create_unit(self, runs: Sequence[LevelSortedRun], max_level: int, run_count: int) -> CompactUnit:
        """The unit of the newest ``run_count`` runs, with Paimon's output-level rule."""
        if run_count == len(runs):
            output = max_level
        else:
            output = max(0, runs[run_count].level - 1)
        if output == 0:
            for nxt in runs[run_count:]:
                run_count += 1
                if nxt.level != 0:
                    output = nxt.level
                    break
        if run_count == len(runs):
            output = max_level
        return CompactUnit.from_runs(output, runs[:run_count])


def pick_full_compaction(num_levels: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
    """Every run into the max level; nothing when the bucket already is a single max-level run."""
    max_level = num_levels - 1
    if not runs or (len(runs) == 1 and runs[0].level == max_level):
        return None
    return CompactUnit.from_runs(max_level, runs)


def worth_running(unit: CompactUnit | None) -> CompactUnit | None:
    """Drop units that would change nothing (no file, or one file already at the output level)."""
    if unit is None or not unit.files:
        return None
    if len(unit.files) == 1 and unit.files[0].level == unit.output_level:
        return None
    return unit


def drops_deletes(unit: CompactUnit, levels: Levels) -> bool:
    """Retracts may be dropped when no older data can remain below the output (Paimon's ``dropDelete``)."""
    return unit.output_level != 0 and unit.output_level >= levels.non_empty_highest_level()
