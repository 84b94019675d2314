"""The command-line mistakes of the error catalogue (each runs as ``mergetable ARGV``)."""

from __future__ import annotations

import time

from catalogue_support import CliMistake

from mergetable.cli.errors import UsageError
from mergetable.core.errors import (
    FilterError,
    MissingExtraError,
    OptionsError,
    SchemaError,
    SnapshotNotFoundError,
    TableNotFoundError,
    TagExistsError,
)

CLI = [
    CliMistake("cli-unknown-command", lambda c: ["compactt", c.uri], UsageError, "compactt"),
    CliMistake("cli-no-uri", lambda c: ["describe"], UsageError, "uri"),
    CliMistake("cli-unknown-flag", lambda c: ["read", c.uri, "--colums", "id"], UsageError, "--colums"),
    CliMistake("cli-missing-table", lambda c: ["describe", c.uri + "x"], TableNotFoundError, lambda c: c.uri + "x"),
    CliMistake("cli-data-file", lambda c: ["describe", c.data_file], TableNotFoundError, ".parquet"),
    CliMistake("cli-limit-negative", lambda c: ["read", c.uri, "--limit", "-1"], UsageError, "--limit"),
    CliMistake("cli-limit-text", lambda c: ["read", c.uri, "--limit", "ten"], UsageError, "--limit"),
    CliMistake("cli-snapshots-limit-negative", lambda c: ["snapshots", c.uri, "--limit", "-3"], UsageError, "--limit"),
    CliMistake("cli-snapshot-not-a-number", lambda c: ["read", c.uri, "--snapshot", "one"], UsageError, "--snapshot"),
    CliMistake("cli-unknown-column", lambda c: ["read", c.uri, "--columns", "id,value"], SchemaError, "value"),
    CliMistake("cli-filter-syntax", lambda c: ["read", c.uri, "--filter", "id~1"], OptionsError, "id~1"),
    CliMistake("cli-filter-unknown-column", lambda c: ["read", c.uri, "--filter", "value=1"], SchemaError, "value"),
    CliMistake("cli-filter-wrong-literal", lambda c: ["read", c.uri, "--filter", "id=five"], FilterError, "id"),
    CliMistake("cli-missing-snapshot", lambda c: ["read", c.uri, "--snapshot", "99"], SnapshotNotFoundError, "99"),
    CliMistake("cli-unknown-tag", lambda c: ["read", c.uri, "--tag", "release"], SnapshotNotFoundError, "release"),
    CliMistake("cli-bad-timestamp", lambda c: ["read", c.uri, "--timestamp", "soon"], OptionsError, "soon"),
    CliMistake(
        "cli-snapshot-and-tag", lambda c: ["read", c.uri, "--snapshot", "1", "--tag", "first"], OptionsError, "tag"
    ),
    CliMistake("cli-unknown-format", lambda c: ["read", c.uri, "--format", "xml"], UsageError, "xml"),
    CliMistake("cli-parquet-to-stdout", lambda c: ["read", c.uri, "--format", "parquet"], UsageError, "--output"),
    CliMistake(
        "cli-output-in-missing-directory",
        lambda c: ["read", c.uri, "--format", "csv", "--output", str(c.tmp / "no" / "out.csv")],
        UsageError,
        "out.csv",
    ),
    CliMistake(
        "cli-compact-unknown-partition", lambda c: ["compact", c.uri, "--partition", "day=1"], SchemaError, "day"
    ),
    CliMistake("cli-compact-partition-no-value", lambda c: ["compact", c.uri, "--partition", "dt"], OptionsError, "dt"),
    CliMistake(
        "cli-storage-option-no-equals", lambda c: ["describe", c.uri, "--storage-option", "anon"], OptionsError, "anon"
    ),
    CliMistake(
        "cli-storage-option-typo",
        lambda c: ["describe", c.uri, "--storage-option", "auto_mkdirr=true"],
        OptionsError,
        "auto_mkdirr",
    ),
    CliMistake("cli-tag-exists", lambda c: ["tags", c.uri, "--create", "first"], TagExistsError, "first"),
    CliMistake(
        "cli-tag-delete-unknown", lambda c: ["tags", c.uri, "--delete", "release"], SnapshotNotFoundError, "release"
    ),
    CliMistake("cli-rollback-missing", lambda c: ["rollback", c.uri, "--snapshot", "99"], SnapshotNotFoundError, "99"),
    CliMistake("cli-rollback-no-target", lambda c: ["rollback", c.uri], UsageError, "--snapshot"),
    CliMistake(
        "cli-reset-without-snapshot", lambda c: ["consumers", c.uri, "--reset", "job"], UsageError, "--snapshot"
    ),
    CliMistake(
        "cli-changelog-unknown-end", lambda c: ["changelog", c.uri, "1", "release"], SnapshotNotFoundError, "release"
    ),
    CliMistake(
        "cli-changelog-bad-mode", lambda c: ["changelog", c.uri, "1", "2", "--mode", "all"], OptionsError, "all"
    ),
    CliMistake(
        "cli-orphans-too-young",
        lambda c: ["orphans", c.uri, "--older-than-ms", str(int(time.time() * 1000))],
        OptionsError,
        "older",
    ),
    CliMistake("cli-s3-without-s3fs", lambda c: ["describe", "s3://bucket/t"], MissingExtraError, "s3", without="s3fs"),
]
