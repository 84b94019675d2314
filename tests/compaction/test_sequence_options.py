"""Paimon's sequence options that shape change data: ``sequence.snapshot-ordering`` and how the lookup and
full-compaction producers treat records that arrive with an older ``sequence.field`` value."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from compaction_support import SCHEMA, batch, create, state

import mergetable as mt
from mergetable.metadata.models import FileSource


def _changes(t: mt.Table, previous: int) -> list[tuple[str, int, int | None, str | None]]:
    latest = t.latest_snapshot()
    assert latest is not None
    return [(r["_row_kind"], r["k"], r["v"], r["s"]) for r in t.changelog(previous, latest.id).to_pylist()]


@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
@pytest.mark.parametrize("dedupe", [False, True])
def test_an_older_sequence_field_record_changes_nothing_and_emits_paimons_pair(
    table_uri: str, producer: str, dedupe: bool
) -> None:
    t = create(
        table_uri,
        "deduplicate-sequence-field",
        **{
            "changelog-producer": producer,
            "changelog-producer.row-deduplicate": str(dedupe).lower(),
            # lookup compacts level 0 at every commit (and refuses full-compaction.delta-commits, as Paimon)
            **({"full-compaction.delta-commits": "1"} if producer == "full-compaction" else {}),
        },
    )
    t.write(*batch([("+I", 1, 5, "new"), ("+I", 2, 1, "x")]))
    first = t.latest_snapshot()
    assert first is not None
    assert sorted(_changes(t, 0)) == [("+I", 1, 5, "new"), ("+I", 2, 1, "x")]
    t.write(*batch([("+I", 1, 3, "old")]))  # older than the stored v=5: the stored row stays
    assert state(t) == {1: (5, "new"), 2: (1, "x")}
    # Paimon's LookupChangelogMergeFunctionWrapper / FullChangelogMergeFunctionWrapper: before = after = the
    # stored row, emitted as an update pair unless row-deduplicate finds the values equal; key 2 took no part
    expected = [] if dedupe else [("-U", 1, 5, "new"), ("+U", 1, 5, "new")]
    assert _changes(t, first.id) == expected
    second = t.latest_snapshot()
    assert second is not None
    t.write(*batch([("+I", 1, 7, "newer")]))
    assert _changes(t, second.id) == [("-U", 1, 5, "new"), ("+U", 1, 7, "newer")]


def test_first_row_stays_insert_only_when_a_later_record_loses(table_uri: str) -> None:
    t = create(table_uri, "first-row", **{"changelog-producer": "lookup"})
    t.write(*batch([("+I", 1, 1, "first")]))
    t.write(*batch([("+I", 1, 2, "second")]))
    assert state(t) == {1: (1, "first")}
    assert _changes(t, 0) == [("+I", 1, 1, "first")]


def test_snapshot_ordering_is_validated_as_paimon_does(table_uri: str) -> None:
    with pytest.raises(mt.OptionsError, match=r"sequence\.snapshot-ordering.*write-only"):
        create(table_uri, "deduplicate", **{"sequence.snapshot-ordering": "true"})
    with pytest.raises(mt.OptionsError, match=r"sequence\.snapshot-ordering.*sequence\.field"):
        create(table_uri, "deduplicate-sequence-field", **{"sequence.snapshot-ordering": "true", "write-only": "true"})


def test_snapshot_ordering_numbers_every_record_with_its_snapshot_id(table_uri: str) -> None:
    t = create(table_uri, "deduplicate", bucket="1", **{"sequence.snapshot-ordering": "true", "write-only": "true"})
    t.write(*batch([("+I", k, 0, "base") for k in range(4)]))
    a, b = t.new_writer(), t.new_writer()
    a.write(*batch([("+I", 1, 1, "a"), ("+I", 2, 1, "a")]))
    b.write(*batch([("+I", 2, 2, "b"), ("+I", 3, 2, "b")]))
    t.commit(b.prepare_commit())  # snapshot 2
    t.commit(a.prepare_commit())  # snapshot 3: a started first but committed last, so it wins
    expected = {0: (0, "base"), 1: (1, "a"), 2: (1, "a"), 3: (2, "b")}
    assert state(t) == expected
    files = sorted((f for _, _, f in t.files()), key=lambda f: f.min_sequence_number)
    assert [(f.min_sequence_number, f.max_sequence_number) for f in files] == [(1, 1), (2, 2), (3, 3)]
    assert {f.file_source for f in files} == {FileSource.APPEND}
    t.compact(full=True)
    assert state(t) == expected
    [(_, _, top)] = t.files()
    kv = pq.read_table(t.path_factory.data_file((), 0, top.file_name)).to_pydict()
    assert dict(zip(kv["k"], kv["_SEQUENCE_NUMBER"], strict=True)) == {0: 1, 1: 3, 2: 3, 3: 2}
    t.write(*batch([("+I", 0, 9, "later")]))
    assert state(t)[0] == (9, "later")


def test_snapshot_ordering_ties_within_a_commit_read_the_same_after_compaction(table_uri: str) -> None:
    t = create(
        table_uri,
        "deduplicate",
        bucket="1",
        **{"sequence.snapshot-ordering": "true", "write-only": "true", "write-buffer-size": "1kb"},
        **{"write-buffer-spillable": "false"},  # the spilled runs are not merged into one
    )
    w = t.new_writer()
    for n in range(6):  # several level-0 files of one commit, all numbered with snapshot 1
        w.write(pa.table({"k": list(range(30)), "v": [n] * 30, "s": [f"n{n}"] * 30}, schema=SCHEMA))
    t.commit(w.prepare_commit())
    assert len(t.files()) > 1
    before = state(t)
    t.compact()
    assert state(t) == before
    t.compact(full=True)
    assert state(t) == before
