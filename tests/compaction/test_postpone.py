

def test_the_cli_compaction_moves_staged_rows_and_orphans_are_found_there(tmp_path: Path) -> None:
    import subprocess
    import sys

    t = _table(str(tmp_path / "t"), **{"write-only": "true"})
    _staged(t, _rows([1, 2], "a", 1))
    stray = tmp_path / "t" / "dt=a" / "bucket-postpone" / "data-stray-0.parquet"
    stray.write_bytes(b"not referenced")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "mergetable.cli.main", "--json", "compact", t.uri],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert t.read().num_rows == 2
    removed = t.remove_orphan_files(older_than_ms=int(stray.stat().st_mtime * 1000) + 1, force=True)
    assert str(stray) in [str(p) for p in removed] or not stray.exists()
