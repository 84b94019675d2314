from __future__ import annotations

import pytest

from mergetable.core.errors import OptionsError
from mergetable.core.option_values import parse_duration_ms, parse_memory_size
from mergetable.core.options import ChangelogProducer, MergeEngine, TableOptions


def test_defaults_follow_paimon() -> None:
    o = TableOptions.from_map({})
    assert o.merge_engine is MergeEngine.DEDUPLICATE
    assert o.changelog_producer is ChangelogProducer.NONE
    assert o.num_sorted_run_compaction_trigger == 5
    assert o.stop_trigger == 8
    assert o.max_levels == 6
    assert o.commit_max_retries == 10
    assert o.manifest_merge_min_count == 30
    assert o.target_file_size == 128 << 20
    assert o.write_buffer_size == 256 << 20
    assert o.file_compression == "zstd"
    assert o.bucket == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [("256mb", 256 << 20), ("128 MB", 128 << 20), ("1g", 1 << 30), ("1048576", 1 << 20), ("64 kb", 64 << 10)],
)
def test_memory_sizes(text: str, expected: int) -> None:
    assert parse_memory_size(text) == expected


@pytest.mark.parametrize(("text", "expected"), [("10ms", 10), ("10 s", 10_000), ("1h", 3_600_000), ("2 min", 120_000)])
def test_durations(text: str, expected: int) -> None:
    assert parse_duration_ms(text) == expected


@pytest.mark.parametrize(
    ("options", "culprit"),
    [
        ({"no-such-option": "1"}, "no-such-option"),
        ({"bucket": "many"}, "bucket"),
        ({"bucket": "0"}, "bucket"),
        ({"bucket": "-3"}, "bucket"),
        ({"bucket": "-2", "postpone.default-bucket-num": "0"}, "postpone.default-bucket-num"),
        ({"compaction.min.file-num": "0"}, "compaction.min.file-num"),
        ({"write-mode": "sometimes"}, "write-mode"),
        ({"merge-engine": "magic"}, "merge-engine"),
        ({"ignore-delete": "maybe"}, "ignore-delete"),
        ({"write-buffer-size": "lots"}, "write-buffer-size"),
        ({"commit.timeout": "soon"}, "commit.timeout"),
        ({"file.format": "orc"}, "file.format"),
        ({"changelog-producer": "always"}, "changelog-producer"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], culprit: str) -> None:
    with pytest.raises(OptionsError) as info:
        TableOptions.from_map(options)
    assert info.value.option == culprit
    assert culprit in str(info.value)


def test_round_trip_through_string_map() -> None:
    o = TableOptions.from_map({"bucket": "3", "commit.min-retry-wait": "25ms", "sequence.field": "a,b"})
    again = TableOptions.from_map(o.to_map())
    assert again.to_map() == o.to_map()
    assert again.commit_min_retry_wait == 25
    assert again.sequence_field == ("a", "b")


def test_fluss_and_fallback_aliases() -> None:
    o = TableOptions.from_map(
        {
            "table.merge-engine": "first_row",
            "first-row.ignore-delete": "true",
            "fields.tags.agg": "listagg",
            "fields.tags.listagg.delimiter": ";",
            "write.compaction-skip": "true",
        }
    )
    assert o.merge_engine is MergeEngine.FIRST_ROW
    assert o.ignore_delete is True
    assert o.write_only is True
    assert o.field_option("tags", "aggregate-function") == "listagg"
    assert o.field_option("tags", "list-agg-delimiter") == ";"


def test_conflicting_spellings_rejected() -> None:
    with pytest.raises(OptionsError):
        TableOptions.from_map({"merge-engine": "deduplicate", "table.merge-engine": "aggregation"})


@pytest.mark.parametrize(
    ("options", "culprit"),
    [
        ({"bucket": str(10**30)}, "bucket"),
        ({"bucket": str(2**31)}, "bucket"),
        ({"write-buffer-size": "-5"}, "write-buffer-size"),
        ({"write-buffer-size": str(2**63)}, "write-buffer-size"),
        ({"write-buffer-size": "99999999999999 tb"}, "write-buffer-size"),
        ({"write-buffer-size": "9" * 400 + ".5 mb"}, "write-buffer-size"),
        ({"target-file-size": "-1"}, "target-file-size"),
        ({"snapshot.num-retained.min": str(2**70)}, "snapshot.num-retained.min"),
        ({"commit.timeout": str(10**30) + " d"}, "commit.timeout"),
        ({"read.batch-size": str(-(2**64))}, "read.batch-size"),
    ],
)
def test_absurd_integers_are_options_errors_naming_the_option(options: dict[str, str], culprit: str) -> None:
    with pytest.raises(OptionsError) as info:
        TableOptions.from_map(options)
    assert info.value.option == culprit


def test_the_largest_integers_still_parse() -> None:
    o = TableOptions.from_map(
        {"bucket": str(2**31 - 1), "write-buffer-size": str(2**63 - 1), "target-file-size": "1.5 kb"}
    )
    assert (o.bucket, o.write_buffer_size, o.target_file_size) == (2**31 - 1, 2**63 - 1, 1536)
