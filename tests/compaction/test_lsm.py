"""The level model and universal compaction picking, against hand-computed applications of Paimon's rules."""

from __future__ import annotations

import itertools

from mergetable.compaction.lsm import (
    CompactUnit,
    Levels,
    LevelSortedRun,
    SortedRun,
    UniversalCompaction,
    drops_deletes,
    pick_full_compaction,
    worth_running,
)
from mergetable.metadata.models import DataFileMeta, SimpleStats

_names = itertools.count()


def meta(size: int, level: int = 0, seq: tuple[int, int] = (0, 0), key: tuple[int, int] = (0, 0)) -> DataFileMeta:
    return DataFileMeta(
        file_name=f"f{next(_names)}",
        file_size=size,
        row_count=1,
        min_key=(key[0],),
        max_key=(key[1],),
        key_stats=SimpleStats(),
        value_stats=SimpleStats(),
        min_sequence_number=seq[0],
        max_sequence_number=seq[1],
        schema_id=0,
        level=level,
        creation_time=0,
    )


def runs(*spec: tuple[int, int]) -> list[LevelSortedRun]:
    """Runs newest first from (level, size) pairs."""
    return [LevelSortedRun(level, SortedRun((meta(size, level),))) for level, size in spec]


def sizes(unit: CompactUnit | None) -> list[int] | None:
    return None if unit is None else [f.file_size for f in unit.files]


def test_size_amplification_picks_everything_for_the_max_level() -> None:
    u = UniversalCompaction(max_size_amp=25, size_ratio=1, num_run_compaction_trigger=3)
    # 4 runs >= trigger; newer runs 1+2+3 = 6, oldest 3: 6*100 = 600 > 25*3 = 75
    unit = u.pick(3, runs((0, 1), (0, 2), (0, 3), (0, 3)))
    assert sizes(unit) == [1, 2, 3, 3]
    assert unit is not None and unit.output_level == 2


def test_size_amplification_needs_trigger_runs_and_a_strict_excess() -> None:
    u = UniversalCompaction(max_size_amp=200, size_ratio=1, num_run_compaction_trigger=3)
    assert u.pick_for_size_amp(2, runs((0, 5), (0, 5))) is None  # 2 runs < trigger 3
    # 1+1 = 2 newer vs 1 oldest: 200 > 200 is false
    assert u.pick_for_size_amp(2, runs((0, 1), (0, 1), (2, 1))) is None
    assert sizes(u.pick_for_size_amp(2, runs((0, 1), (0, 2), (2, 1)))) == [1, 2, 1]


def test_size_ratio_stops_at_a_large_run_above_level_1() -> None:
    u = UniversalCompaction(max_size_amp=25, size_ratio=1, num_run_compaction_trigger=3)
    # amp: 3*100 = 300 <= 25*50. Ratio: 1 -> absorb 1 (1.01 >= 1), 2 -> absorb 1 (2.02 >= 1),
    # then 3.03 < 50 at level 3: stop. Output = level of the first unpicked run (3) - 1 = 2.
    unit = u.pick(4, runs((0, 1), (1, 1), (2, 1), (3, 50)))
    assert sizes(unit) == [1, 1, 1]
    assert unit is not None and unit.output_level == 2


def test_run_count_forces_the_newest_runs_then_extends_by_ratio() -> None:
    u = UniversalCompaction(max_size_amp=25, size_ratio=1, num_run_compaction_trigger=3)
    # amp: 6*100 <= 25*50; ratio: 1.01 < 2 before anything is picked -> no pick.
    # 4 runs > 3: force 4-3+1 = 2 runs (size 3); 3.03 >= 3 absorbs level 2; 6.06 < 50 at level 3 stops.
    unit = u.pick(4, runs((0, 1), (1, 2), (2, 3), (3, 50)))
    assert sizes(unit) == [1, 2, 3]
    assert unit is not None and unit.output_level == 2


def test_level_0_and_1_runs_are_always_absorbed_once_two_are_picked() -> None:
    u = UniversalCompaction(max_size_amp=200, size_ratio=1, num_run_compaction_trigger=3)
    # 4 runs > 3 forces 2 (size 11); 11.11 < 100 but level 0 -> absorbed; 111.11 < 1000 at level 3 -> stop.
    unit = u.pick(4, runs((0, 1), (0, 10), (0, 100), (3, 1000)))
    assert sizes(unit) == [1, 10, 100]
    assert unit is not None and unit.output_level == 2
    # every run absorbed -> the max level, whatever the last run's level
    unit = u.pick(6, runs((0, 1), (0, 1), (0, 1), (0, 1024), (0, 1 << 20)))
    assert unit is not None and unit.output_level == 5 and len(unit.files) == 5


def test_nothing_to_pick_below_the_trigger() -> None:
    u = UniversalCompaction(max_size_amp=200, size_ratio=1, num_run_compaction_trigger=5)
    assert u.pick(6, runs((0, 1), (0, 1), (0, 1), (0, 1))) is None
    # 3 runs, ratio fails at once (1.01 < 100) and 3 is not > trigger 3
    assert UniversalCompaction(200, 1, 3).pick(3, runs((0, 1), (1, 100), (2, 1000))) is None


def test_size_ratio_option_changes_what_is_absorbed() -> None:
    spec = ((0, 8), (1, 9), (2, 10))
    # ratio 10: 8*1.10 = 8.8 < 9 -> nothing picked by ratio; 3 runs > trigger 2 forces 2 (17), 18.7 >= 10 absorbs.
    assert sizes(UniversalCompaction(25, 10, 2).pick_for_size_ratio(2, runs(*spec))) is None
    # ratio 20: 8*1.2 = 9.6 >= 9 absorbs, 17*1.2 >= 10 absorbs: everything.
    unit = UniversalCompaction(25, 20, 2).pick_for_size_ratio(2, runs(*spec))
    assert sizes(unit) == [8, 9, 10] and unit is not None and unit.output_level == 2


def test_create_unit_never_outputs_level_0() -> None:
    u = UniversalCompaction(25, 1, 3)
    rs = runs((0, 1), (0, 1), (1, 1), (3, 1), (4, 1))
    # first unpicked run at level 0 or 1 -> would be level 0: absorb up to and including the level-1 run
    assert u.create_unit(rs, 5, 1).output_level == 1
    assert len(u.create_unit(rs, 5, 1).files) == 3
    assert u.create_unit(rs, 5, 2).output_level == 1
    assert u.create_unit(rs, 5, 3).output_level == 2
    assert u.create_unit(rs, 5, 4).output_level == 3
    assert u.create_unit(rs, 5, 5).output_level == 5


def test_a_sequence_of_commits() -> None:
    """Each step adds a level-0 run of size 1 and applies the pick (trigger 3, amp 200, ratio 1, 3 levels)."""
    u = UniversalCompaction(200, 1, 3)
    state: list[tuple[int, int]] = []
    seen = []
    for _ in range(7):
        state = [(0, 1), *state]
        unit = u.pick(3, runs(*state))
        if unit is not None:
            n = len(unit.files)
            state = sorted([(unit.output_level, sum(s for _, s in state[:n])), *state[n:]])
        seen.append(state)
    assert seen == [
        [(0, 1)],
        [(0, 1), (0, 1)],
        [(2, 3)],  # 3 runs: amp 200 is not > 200; ratio absorbs everything -> max level
        [(0, 1), (2, 3)],
        [(1, 2), (2, 3)],  # ratio stops before level 2 (2.02 < 3): output level 2-1
        [(0, 1), (1, 2), (2, 3)],  # amp 300 <= 600, ratio 1.01 < 2 with one run picked, 3 runs not > 3
        [(2, 7)],  # amp 400 <= 600; ratio absorbs 1, 2 (2.02 >= 2), 3 (4.04 >= 3): everything
    ]


def test_force_pick_level0_for_lookup() -> None:
    u = UniversalCompaction(25, 1, 3)
    # one level-0 run, then level 2: 1.01 < 2 at level 2 stops; output = 2 - 1
    unit = u.force_pick_level0(3, runs((0, 1), (2, 2)))
    assert sizes(unit) == [1] and unit is not None and unit.output_level == 1
    # level-1 run is absorbed when the ratio allows: 2*1.01 >= 2
    unit = u.force_pick_level0(3, runs((0, 1), (0, 1), (1, 2), (2, 100)))
    assert sizes(unit) == [1, 1, 2] and unit is not None and unit.output_level == 1
    assert u.force_pick_level0(3, runs((1, 1), (2, 2))) is None


def test_full_compaction_and_no_op_units() -> None:
    assert pick_full_compaction(3, []) is None
    assert pick_full_compaction(3, runs((2, 5))) is None  # already one top-level run
    unit = pick_full_compaction(3, runs((1, 5)))
    assert unit is not None and unit.output_level == 2
    assert worth_running(CompactUnit(2, (meta(1, 2),))) is None
    assert worth_running(CompactUnit(2, ())) is None
    assert worth_running(CompactUnit(2, (meta(1, 1),))) is not None


def test_levels_order_and_highest_level() -> None:
    old, new = meta(1, 0, seq=(0, 5)), meta(1, 0, seq=(6, 9))
    a, b = meta(1, 3, key=(5, 9)), meta(1, 3, key=(0, 4))
    levels = Levels([old, a, new, b], num_levels=5, min_key=lambda f: f.min_key)
    assert levels.level0 == [new, old]  # newest first
    assert levels.run_of_level(3).files == (b, a)  # key order
    assert levels.number_of_sorted_runs() == 3
    assert levels.non_empty_highest_level() == 3
    assert [r.level for r in levels.level_sorted_runs()] == [0, 0, 3]
    assert Levels([], 3, lambda f: f.min_key).non_empty_highest_level() == -1
    # files above the configured levels extend the tree
    assert Levels([meta(1, 7)], 3, lambda f: f.min_key).max_level == 7


def test_deletes_dropped_only_without_older_data_below() -> None:
    levels = Levels([meta(1, 0), meta(1, 3)], num_levels=5, min_key=lambda f: f.min_key)
    assert not drops_deletes(CompactUnit(2, ()), levels)
    assert drops_deletes(CompactUnit(3, ()), levels)
    assert drops_deletes(CompactUnit(4, ()), levels)
    only_l0 = Levels([meta(1, 0)], num_levels=3, min_key=lambda f: f.min_key)
    assert not drops_deletes(CompactUnit(0, ()), only_l0)
    assert drops_deletes(CompactUnit(1, ()), only_l0)
