"""What write/delete/update/merge return (``CommitResult``), ``history(include_compaction=False)``, and SQL
expression strings in ``update`` (deltalake's ``updates``) with literals through ``new_values``."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mergetable as mt

pytest.importorskip("duckdb")
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("note", pa.string()), ("qty", pa.int32())])


def _table(tmp_path: Path, **options: str) -> mt.Table:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, ["id", "dt"], ["dt"], {"bucket": "2", **options})
    t.write({"id": [1, 2, 3, 4], "dt": ["a", "a", "b", "b"], "note": ["x", "y", None, "w"], "qty": [1, 2, 3, 4]})
    return t


def test_each_operation_reports_what_it_did(tmp_path: Path) -> None:
    t = _table(tmp_path)
    w = t.write({"id": [5, 6], "dt": ["a", "c"], "note": ["n", "m"], "qty": [5, 6]})
    assert w and w.snapshot_id == t.version == 2 and w.operation == "WRITE"
    added = [e for e in t.delta_entries(w.snapshot) if e.kind.name == "ADD"]
    assert (w.num_added_rows, w.num_inserted_rows, w.num_added_files, w.num_partitions) == (2, 2, len(added), 2)
    assert w.num_removed_files == 0 and w.id == w.snapshot.id  # the snapshot's fields read through it
    d = t.delete([("qty", ">=", 4)])
    assert (d.operation, d.num_deleted_rows, d.num_copied_rows, d.snapshot.properties) == (
        "DELETE", 3, 0, {"operation": "DELETE"}
    )  # fmt: skip
    assert not t.delete([("qty", ">", 100)]) and t.delete([("qty", ">", 100)]).snapshot_id is None
    u = t.update([("dt", "=", "a")], {"qty": "qty * 10"})
    assert (u.num_updated_rows, u.num_deleted_rows, u.to_dict()["num_updated_rows"]) == (2, 0, 2)
    src = pa.table({"id": [1, 3, 9], "dt": ["a", "b", "z"], "note": ["s1", "s3", "s9"], "qty": [0, 0, 0]})
    m = t.merge(src).when_matched_delete(pc.field("source.id") == 1).when_matched_update_all()
    r = m.when_not_matched_insert_all().execute()
    assert (r.num_source_rows, r.num_target_rows_deleted, r.num_target_rows_updated, r.num_target_rows_inserted) == (
        3, 1, 1, 1
    )  # fmt: skip
    assert r.num_output_rows == 3 and r.num_target_files_added == r.num_added_files > 0
    assert set(r.to_dict()) >= {"num_source_rows", "num_target_rows_inserted", "num_target_files_removed"}
    assert "MERGE" in repr(r) and "num_target_rows_updated=1" in repr(r)
    o = t.write({"id": [7], "dt": ["a"], "note": ["o"], "qty": [7]}, overwrite={"dt": "a"})
    replaced = [e for e in t.delta_entries(o.snapshot) if e.kind.name == "DELETE"]
    assert o.num_removed_files == len(replaced) > 0
    with pytest.raises(AttributeError, match="nothing was committed"):
        _ = t.delete([("qty", ">", 100)]).id
    assert t.delete_keys({"id": [7], "dt": ["a"]}).num_deleted_rows == 1


def test_history_can_leave_compactions_out(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.write({"id": [1], "dt": ["a"], "note": ["z"], "qty": [9]})
    t.compact(full=True, progress=False)
    t.delete([("id", "=", 2)])
    assert t.history().column("operation").to_pylist() == ["DELETE", "COMPACT", "APPEND", "APPEND"]
    h = t.history(include_compaction=False)
    assert h.column("operation").to_pylist() == ["DELETE", "APPEND", "APPEND"]
    assert t.history(limit=2, include_compaction=False).column("version").to_pylist() == [4, 2]
    assert pa.table(h).equals(h.table) and h == h.table and len(h) == 3
    text = repr(h).splitlines()
    assert text[0].split()[:3] == ["version", "timestamp", "operation"] and text[2].split()[0] == "4"
    with pytest.raises(mt.MergeTableError, match="include_compaction"):
        t.history(include_compaction="no")  # type: ignore[arg-type]


def test_update_evaluates_sql_expressions(tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.update([("dt", "=", "a")], {"note": "upper(note) || '-' || CAST(qty AS VARCHAR)", "qty": "qty + 100"})
    t.update([("id", "=", 3)], {"note": "coalesce(note, 'none')"})
    t.update([("id", "=", 4)], new_values={"note": "upper(note)"})  # a literal: the text itself
    got = t.read().sort_by("id").to_pydict()
    assert got["note"] == ["X-1", "Y-2", "none", "upper(note)"]
    assert got["qty"] == [101, 102, 3, 4]
    t.update(None, {"note": "'same'"}, new_values={"qty": 0})
    assert set(t.read().column("note").to_pylist()) == {"same"} and set(t.read().column("qty").to_pylist()) == {0}


def test_update_sql_errors_name_the_column_and_the_literal_way(tmp_path: Path) -> None:
    t = _table(tmp_path)
    before = t.version
    with pytest.raises(mt.SchemaError, match=r"column 'note'.*new_values=\{'note': 'done'\}.*\"'done'\""):
        t.update([("id", "=", 1)], {"note": "done"})  # a bare word is a column name in SQL
    with pytest.raises(mt.SchemaError, match="column 'qty'"):
        t.update(None, {"qty": "qty + 'abc'"})
    with pytest.raises(mt.SchemaError, match=r"column 'qty'.*one value per row"):
        t.update(None, {"qty": "sum(qty)"})
    with pytest.raises(mt.SchemaError, match=r"column 'note'.*both"):
        t.update(None, {"note": "'a'"}, new_values={"note": "b"})
    with pytest.raises(mt.SchemaError, match="column 'id'"):
        t.update(None, {"id": "id + 1"})
    with pytest.raises(mt.SchemaError, match="column 'qty'"):
        t.update(None, new_values={"qty": "many"})
    with pytest.raises(mt.SchemaError, match=r"column 'note'.*empty SQL"):
        t.update(None, {"note": " "})
    assert t.version == before  # nothing was committed


def test_merge_values_are_sql_over_both_sides(tmp_path: Path) -> None:
    t = _table(tmp_path)
    src = pa.table({"id": [1, 2, 7], "dt": ["a", "a", "a"], "note": ["s1", None, "s7"], "w": [10, 20, 70]})
    (
        t.merge(src, source_alias="s", target_alias="t")
        .when_matched_update({"note": "coalesce(s.note, t.note) || '+'", "qty": "t.qty + w"}, pc.field("s.id") == 1)
        .when_matched_update({"note": "'matched'"})
        .when_not_matched_insert({"id": pc.field("s.id"), "dt": pc.field("s.dt"), "note": "upper(s.note)", "qty": "w"})
        .when_not_matched_by_source_update({"note": "t.note || '?'"}, pc.field("t.id") == 4)
        .execute()
    )
    got = t.read().sort_by("id").to_pydict()
    assert got["id"] == [1, 2, 3, 4, 7]
    assert got["note"] == ["s1+", "matched", None, "w?", "S7"]
    assert got["qty"] == [11, 2, 3, 4, 70]
    before = t.version
    with pytest.raises(mt.SchemaError, match=r"column 'note'.*'done'.*SQL literal") as err:
        t.merge(src).when_matched_update({"note": "done"}).execute()
    assert "new_values" not in str(err.value)  # merge has no new_values: the SQL literal is the way
    with pytest.raises(mt.SchemaError, match=r"column 'qty'.*(ambiguous|Ambiguous)"):
        t.merge(src.append_column("qty", pa.array([1, 2, 3], pa.int32()))).when_matched_update({"qty": "qty"}).execute()
    assert t.version == before
