"""Typed table options over Paimon's string map.

Options are given as ``dict[str, str]`` with Paimon's keys (``bucket``, ``merge-engine``,
``sequence.field`` ...). :meth:`TableOptions.from_map` validates them into a frozen model; an unknown
key or a malformed value raises :class:`~mergetable.core.errors.OptionsError` naming the key.
Fluss spellings (``table.merge-engine``, ``fields.<f>.agg`` ...) are accepted as aliases and normalised
to Paimon's. Per-field options (``fields.<f>.<x>``) are kept as a string map in :attr:`field_options`;
the merge engines interpret them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from mergetable.core import arguments
from mergetable.core.errors import OptionsError
from mergetable.core.names import check_name_option
from mergetable.core.option_map import unknown_option
from mergetable.core.option_values import (
    INT32_MAX,
    MIB,
    parse_bool,
    parse_duration_ms,
    parse_int,
    parse_list,
    parse_memory_size,
)
from mergetable.core.stats_mode import DEFAULT_STATS_MODE, StatsMode, parse_stats_mode


class MergeEngine(StrEnum):
    DEDUPLICATE = "deduplicate"
    PARTIAL_UPDATE = "partial-update"
    AGGREGATION = "aggregation"
    FIRST_ROW = "first-row"
    VERSIONED = "versioned"


class ChangelogProducer(StrEnum):
    NONE = "none"
    INPUT = "input"
    LOOKUP = "lookup"
    FULL_COMPACTION = "full-compaction"


class SortOrder(StrEnum):
    ASCENDING = "ascending"
    DESCENDING = "descending"


class DeleteBehavior(StrEnum):
    ALLOW = "allow"
    IGNORE = "ignore"
    DISABLE = "disable"


#: Default ``read.batch-size``: most rows in one record batch a read yields. Paimon's default (1024) suits
#: its row-at-a-time readers; an Arrow batch amortizes per-batch work over more rows.
DEFAULT_READ_BATCH_SIZE = 64 * 1024
#: Default target size of one read split (Paimon's ``source.split.target-size``).
DEFAULT_SPLIT_SIZE = 128 * MIB
#: Default ``write-buffer-size``: rows buffered in memory before a sorted run is flushed.
DEFAULT_WRITE_BUFFER_SIZE = 256 * MIB
#: Default ``target-file-size`` of a data file.
DEFAULT_TARGET_FILE_SIZE = 128 * MIB
#: Default ``target-file-size`` of an append table (a table without a primary key), as in Paimon.
DEFAULT_APPEND_TARGET_FILE_SIZE = 256 * MIB
#: ``bucket`` of an append table without buckets (Paimon's bucket-unaware mode, the default for append tables).
UNAWARE_BUCKET = -1
#: ``bucket`` of Paimon's postpone bucket mode (key tables): rows staged in ``bucket-postpone`` (bucket -2 in
#: manifests) until a compaction assigns them to their partition's fixed buckets (``docs/bucket-modes.md``).
POSTPONE_BUCKET = -2


def _lower(value: object) -> object:
    return value.strip().lower() if isinstance(value, str) else value


MemorySize = Annotated[int, BeforeValidator(parse_memory_size)]
Duration = Annotated[int, BeforeValidator(parse_duration_ms)]
Bool = Annotated[bool, BeforeValidator(parse_bool)]
Int = Annotated[int, BeforeValidator(parse_int)]
Names = Annotated[tuple[str, ...], BeforeValidator(parse_list)]

# Keys that mean the same as another key (Paimon fallback keys and Fluss spellings).
_FALLBACK_KEYS = {
    "first-row.ignore-delete": "ignore-delete",
    "deduplicate.ignore-delete": "ignore-delete",
    "partial-update.ignore-delete": "ignore-delete",
    "write.compaction-skip": "write-only",
    "table.merge-engine": "merge-engine",
    "table.merge-engine.versioned.ver-column": "versioned.ver-column",
}
_FLUSS_ENGINE_NAMES = {"first_row": "first-row", "default": "deduplicate"}
# Fluss per-field spellings: fields.<f>.agg -> fields.<f>.aggregate-function,
# fields.<f>.<fn>.delimiter -> fields.<f>.list-agg-delimiter.
_FLUSS_FIELD_SUFFIXES = {"agg": "aggregate-function"}


class TableOptions(BaseModel):
    """The effective options of a table. Build with :meth:`from_map`; dump with :meth:`to_map`."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid")

    # layout
    bucket: Int = Field(1, alias="bucket")
    bucket_key: Names = Field((), alias="bucket-key")
    dynamic_bucket_target_row_num: Int = Field(2_000_000, alias="dynamic-bucket.target-row-num")
    dynamic_bucket_initial_buckets: Int | None = Field(None, alias="dynamic-bucket.initial-buckets")
    dynamic_bucket_max_buckets: Int = Field(-1, alias="dynamic-bucket.max-buckets")
    postpone_default_bucket_num: Int = Field(1, alias="postpone.default-bucket-num")
    postpone_batch_write_fixed_bucket: Bool = Field(True, alias="postpone.batch-write-fixed-bucket")
    postpone_target_row_num_per_bucket: Int | None = Field(None, alias="postpone.target-row-num-per-bucket")
    file_format: str = Field("parquet", alias="file.format")
    file_compression: str = Field("zstd", alias="file.compression")
    file_compression_level: Int | None = Field(None, alias="file.compression.zstd-level")
    data_file_prefix: str = Field("data-", alias="data-file.prefix")
    changelog_file_prefix: str = Field("changelog-", alias="changelog-file.prefix")
    partition_default_name: str = Field("__DEFAULT_PARTITION__", alias="partition.default-name")
    stats_mode: str = Field(DEFAULT_STATS_MODE, alias="metadata.stats-mode")
    # merging
    merge_engine: MergeEngine = Field(MergeEngine.DEDUPLICATE, alias="merge-engine")
    ignore_delete: Bool = Field(False, alias="ignore-delete")
    ignore_update_before: Bool = Field(False, alias="ignore-update-before")
    sequence_field: Names = Field((), alias="sequence.field")
    sequence_field_sort_order: SortOrder = Field(SortOrder.ASCENDING, alias="sequence.field.sort-order")
    sequence_snapshot_ordering: Bool = Field(False, alias="sequence.snapshot-ordering")
    rowkind_field: str | None = Field(None, alias="rowkind.field")
    partial_update_remove_record_on_delete: Bool = Field(False, alias="partial-update.remove-record-on-delete")
    partial_update_remove_record_on_sequence_group: Names = Field(
        (), alias="partial-update.remove-record-on-sequence-group"
    )
    aggregation_remove_record_on_delete: Bool = Field(False, alias="aggregation.remove-record-on-delete")
    default_aggregate_function: str | None = Field(None, alias="fields.default-aggregate-function")
    delete_behavior: DeleteBehavior | None = Field(None, alias="table.delete.behavior")
    versioned_ver_column: str | None = Field(None, alias="versioned.ver-column")
    field_options: dict[str, str] = Field(default_factory=dict, alias="field-options")
    # writing
    write_buffer_size: MemorySize = Field(DEFAULT_WRITE_BUFFER_SIZE, alias="write-buffer-size")
    write_buffer_spillable: Bool = Field(True, alias="write-buffer-spillable")
    target_file_size: MemorySize = Field(DEFAULT_TARGET_FILE_SIZE, alias="target-file-size")
    write_only: Bool = Field(False, alias="write-only")
    write_mode: Literal["auto", "append-only", "change-log"] | None = Field(None, alias="write-mode")
    dynamic_partition_overwrite: Bool = Field(True, alias="dynamic-partition-overwrite")
    # cross-partition upsert (docs/buckets.md): keys only in files older than the TTL are left out of the key index
    cross_partition_upsert_index_ttl: Duration | None = Field(None, alias="cross-partition-upsert.index-ttl")
    cross_partition_upsert_bootstrap_parallelism: Int = Field(10, alias="cross-partition-upsert.bootstrap-parallelism")
    # reading
    read_batch_size: Int = Field(DEFAULT_READ_BATCH_SIZE, alias="read.batch-size")
    # commit and manifests
    commit_max_retries: Int = Field(10, alias="commit.max-retries")
    commit_timeout: Duration | None = Field(None, alias="commit.timeout")
    commit_min_retry_wait: Duration = Field(10, alias="commit.min-retry-wait")
    commit_max_retry_wait: Duration = Field(10_000, alias="commit.max-retry-wait")
    commit_max_clock_skew: Duration | None = Field(None, alias="commit.max-clock-skew")  # None: 1 min
    manifest_merge_min_count: Int = Field(30, alias="manifest.merge-min-count")
    manifest_target_file_size: MemorySize = Field(8 * MIB, alias="manifest.target-file-size")
    manifest_full_compaction_threshold_size: MemorySize = Field(
        16 * MIB, alias="manifest.full-compaction-threshold-size"
    )
    # expiration
    snapshot_num_retained_min: Int = Field(10, alias="snapshot.num-retained.min")
    snapshot_num_retained_max: Int = Field(2**31 - 1, alias="snapshot.num-retained.max")
    snapshot_time_retained: Duration = Field(3_600_000, alias="snapshot.time-retained")
    snapshot_expire_limit: Int = Field(50, alias="snapshot.expire.limit")
    snapshot_expire_execution_mode: Literal["sync", "async"] = Field("sync", alias="snapshot.expire.execution-mode")
    changelog_num_retained_min: Int | None = Field(None, alias="changelog.num-retained.min")
    changelog_num_retained_max: Int | None = Field(None, alias="changelog.num-retained.max")
    changelog_time_retained: Duration | None = Field(None, alias="changelog.time-retained")
    consumer_expiration_time: Duration | None = Field(None, alias="consumer.expiration-time")
    # compaction and changelog
    num_sorted_run_compaction_trigger: Int = Field(5, alias="num-sorted-run.compaction-trigger")
    num_sorted_run_stop_trigger: Int | None = Field(None, alias="num-sorted-run.stop-trigger")
    num_levels: Int | None = Field(None, alias="num-levels")
    compaction_max_size_amplification_percent: Int = Field(200, alias="compaction.max-size-amplification-percent")
    compaction_size_ratio: Int = Field(1, alias="compaction.size-ratio")
    compaction_small_file_ratio: float = Field(0.7, alias="compaction.small-file-ratio")
    full_compaction_delta_commits: Int | None = Field(None, alias="full-compaction.delta-commits")
    changelog_producer: ChangelogProducer = Field(ChangelogProducer.NONE, alias="changelog-producer")
    changelog_row_deduplicate: Bool = Field(False, alias="changelog-producer.row-deduplicate")
    changelog_row_deduplicate_ignore_fields: Names = Field((), alias="changelog-producer.row-deduplicate-ignore-fields")
    changelog_compaction_interval: Duration | None = Field(None, alias="changelog-producer.compaction-interval")
    lookup_wait: Bool = Field(True, alias="lookup-wait")
    force_lookup: Bool = Field(False, alias="force-lookup")
    commit_force_compact: Bool = Field(False, alias="commit.force-compact")
    compaction_min_file_num: Int = Field(5, alias="compaction.min.file-num")
    compaction_delete_ratio_threshold: float = Field(0.2, alias="compaction.delete-ratio-threshold")
    # deletion vectors (merge-on-write)
    deletion_vectors_enabled: Bool = Field(False, alias="deletion-vectors.enabled")
    deletion_vectors_bitmap64: Bool = Field(False, alias="deletion-vectors.bitmap64")
    deletion_vectors_merge_on_read: Bool = Field(False, alias="deletion-vectors.merge-on-read")
    deletion_vector_index_file_target_size: MemorySize = Field(2 * MIB, alias="deletion-vector.index-file.target-size")

    def _check_ranges(self) -> TableOptions:
        if self.bucket not in (UNAWARE_BUCKET, POSTPONE_BUCKET) and not 1 <= self.bucket <= INT32_MAX:
            raise OptionsError("bucket", f"must be between 1 and {INT32_MAX}, got {self.bucket}")
        _check_dynamic_buckets(self)
        if self.file_format.lower() != "parquet":
            raise OptionsError("file.format", f"only 'parquet' is supported, got '{self.file_format}'")
        if self.file_compression.lower() not in ("zstd", "snappy", "gzip", "brotli", "lz4", "none", "uncompressed"):
            raise OptionsError("file.compression", f"unknown compression '{self.file_compression}'")
        for key, value in (
            ("write-buffer-size", self.write_buffer_size),
            ("target-file-size", self.target_file_size),
            ("manifest.target-file-size", self.manifest_target_file_size),
            ("read.batch-size", self.read_batch_size),
            ("cross-partition-upsert.index-ttl", 1 if (ttl := self.cross_partition_upsert_index_ttl) is None else ttl),
            ("cross-partition-upsert.bootstrap-parallelism", self.cross_partition_upsert_bootstrap_parallelism),
        ):
            if value <= 0:
                raise OptionsError(key, f"must be positive, got {value}")
        parse_stats_mode(self.stats_mode)
        for field_key, mode in self.field_options.items():
            if field_key.endswith(".stats-mode"):
                parse_stats_mode(mode, field_key)
        check_name_option("data-file.prefix", self.data_file_prefix)
        check_name_option("changelog-file.prefix", self.changelog_file_prefix)
        check_name_option("partition.default-name", self.partition_default_name, leading=False)
        if self.postpone_default_bucket_num < 1:
            raise OptionsError("postpone.default-bucket-num", f"must be >= 1, got {self.postpone_default_bucket_num}")
        target = self.postpone_target_row_num_per_bucket
        if target is not None and target < 1:  # 0 too: the staged rows are divided by it
            raise OptionsError("postpone.target-row-num-per-bucket", f"must be >= 1, got {target}")
        if self.compaction_min_file_num < 1:
            raise OptionsError("compaction.min.file-num", f"must be >= 1, got {self.compaction_min_file_num}")
        if not 0.0 < self.compaction_delete_ratio_threshold <= 1.0:
            raise OptionsError(
                "compaction.delete-ratio-threshold", f"must be in (0, 1], got {self.compaction_delete_ratio_threshold}"
            )
        if self.commit_max_retries < 0:
            raise OptionsError("commit.max-retries", "must be >= 0")
        if self.manifest_merge_min_count < 1:
            raise OptionsError("manifest.merge-min-count", "must be >= 1")
        if self.num_sorted_run_compaction_trigger < 1:
            raise OptionsError("num-sorted-run.compaction-trigger", "must be >= 1")
        if self.num_levels is not None and self.num_levels < 2:
            raise OptionsError("num-levels", "must be >= 2")
        if self.full_compaction_delta_commits is not None and self.full_compaction_delta_commits < 1:
            raise OptionsError("full-compaction.delta-commits", "must be >= 1")
        if self.sequence_snapshot_ordering and self.sequence_field:
            raise OptionsError(
                "sequence.snapshot-ordering", "cannot be combined with 'sequence.field': the snapshot id alone orders"
            )
        if self.sequence_snapshot_ordering and not self.write_only:
            raise OptionsError(
                "sequence.snapshot-ordering",
                "needs 'write-only' = true (as in Paimon): writers do not compact; run the dedicated compaction",
            )
        if self.deletion_vectors_enabled:
            _check_deletion_vectors(self)
        if not 0.0 <= self.compaction_delete_ratio_threshold <= 1.0:
            raise OptionsError("compaction.delete-ratio-threshold", "must be between 0 and 1")
        if self.snapshot_num_retained_min < 1:
            raise OptionsError("snapshot.num-retained.min", "must be >= 1")
        if self.snapshot_num_retained_max < self.snapshot_num_retained_min:
            raise OptionsError("snapshot.num-retained.max", "must be >= snapshot.num-retained.min")
        for key, own, snap in (
            ("num-retained.min", self.changelog_num_retained_min, self.snapshot_num_retained_min),
            ("num-retained.max", self.changelog_num_retained_max, self.snapshot_num_retained_max),
            ("time-retained", self.changelog_time_retained, self.snapshot_time_retained),
        ):
            if own is not None and own > snap:  # Paimon: changelog kept after its snapshot (not supported here)
                raise OptionsError(f"changelog.{key}", f"a changelog kept beyond snapshot.{key} is not supported")
        return self

    # -- derived values -------------------------------------------------------------------------
    @property
    def stop_trigger(self) -> int:
        return self.num_sorted_run_stop_trigger or self.num_sorted_run_compaction_trigger + 3

    @property
    def max_levels(self) -> int:
        return self.num_levels or self.num_sorted_run_compaction_trigger + 1

    def field_stats_mode(self, field: str) -> StatsMode:
        """The statistics mode of a value column (``fields.<field>.stats-mode``, else ``metadata.stats-mode``)."""
        own = self.field_option(field, "stats-mode")
        return parse_stats_mode(own if own is not None else self.stats_mode)

    def field_option(self, field: str, suffix: str) -> str | None:
        """The value of ``fields.<field>.<suffix>``, if set."""
        return self.field_options.get(f"fields.{field}.{suffix}")

    # -- (de)serialisation ----------------------------------------------------------------------
    @classmethod
    def from_map(cls, options: dict[str, str] | None) -> TableOptions:
        """Validate a Paimon-style option map. Raises :class:`OptionsError` naming the bad key."""
        plain, fields = normalize_option_keys(arguments.mapping(options, "options"))
        try:
            opts = cls.model_validate({**plain, "field-options": fields})
        except ValidationError as exc:
            raise _options_error(exc, plain) from None
        return opts._check_ranges()

    def to_map(self) -> dict[str, str]:
        """The effective options as a string map (defaults included), as stored in the schema file."""
        out: dict[str, str] = {}
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            if name == "field_options" or value is None:
                continue
            text = _format_value(value)
            out[info.alias or name] = f"{text} ms" if name in _DURATION_FIELDS else text
        if self.num_sorted_run_stop_trigger is None:
            out["num-sorted-run.stop-trigger"] = str(self.stop_trigger)
        if self.num_levels is None:
            out["num-levels"] = str(self.max_levels)
        out.update(self.field_options)
        return out

    def with_overrides(self, overrides: dict[str, str]) -> TableOptions:
        """A copy with some keys replaced (validated as a whole)."""
        return TableOptions.from_map({**self.to_map(), **overrides})


#: Every table option key (Paimon's names and the accepted other spellings), for suggestions.
TABLE_OPTION_KEYS = frozenset(
    {*(info.alias or name for name, info in TableOptions.model_fields.items() if name != "field_options"),
     *_FALLBACK_KEYS}
)  # fmt: skip

_DURATION_FIELDS = frozenset(
    {
        "commit_timeout",
        "commit_min_retry_wait",
        "commit_max_retry_wait",
        "commit_max_clock_skew",
        "snapshot_time_retained",
        "changelog_time_retained",
        "changelog_compaction_interval",
        "consumer_expiration_time",
        "cross_partition_upsert_index_ttl",
    }
)


def _check_dynamic_buckets(opts: TableOptions) -> None:
    """The ranges of the ``dynamic-bucket.*`` options (Paimon's: ids are shorts, so at most 32767 buckets)."""
    limit = 2**15 - 1
    if opts.dynamic_bucket_target_row_num < 1:
        raise OptionsError(
            "dynamic-bucket.target-row-num", f"must be positive, got {opts.dynamic_bucket_target_row_num}"
        )
    most = opts.dynamic_bucket_max_buckets
    if most != -1 and not 1 <= most <= limit:
        raise OptionsError("dynamic-bucket.max-buckets", f"must be -1 (unlimited) or between 1 and {limit}, got {most}")
    first = opts.dynamic_bucket_initial_buckets
    if first is not None and not 1 <= first <= (limit if most == -1 else most):
        bound = f"'dynamic-bucket.max-buckets' ({most})" if most != -1 else str(limit)
        raise OptionsError("dynamic-bucket.initial-buckets", f"must be between 1 and {bound}, got {first}")


def _check_deletion_vectors(opts: TableOptions) -> None:
    """The combinations Paimon refuses with ``deletion-vectors.enabled`` (``SchemaValidation``)."""
    if opts.changelog_producer not in (ChangelogProducer.NONE, ChangelogProducer.INPUT, ChangelogProducer.LOOKUP):
        raise OptionsError(
            "deletion-vectors.enabled",
            f"is only supported with the none, input or lookup changelog producer, not "
            f"'changelog-producer' = '{opts.changelog_producer.value}'",
        )
    if opts.merge_engine is MergeEngine.FIRST_ROW:
        raise OptionsError(
            "deletion-vectors.enabled",
            "is not supported with 'merge-engine' = 'first-row': that engine never deletes an older row",
        )
    if opts.deletion_vector_index_file_target_size <= 0:
        raise OptionsError("deletion-vector.index-file.target-size", "must be positive")


def normalize_option_keys(options: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split a raw option map into plain options and ``fields.*`` options, resolving aliases."""
    plain: dict[str, str] = {}
    fields: dict[str, str] = {}
    for raw_key, raw_value in options.items():
        if not isinstance(raw_key, str):
            raise OptionsError(str(raw_key), "option keys must be strings")
        key = raw_key.strip()
        value = raw_value if isinstance(raw_value, str) else _format_value(raw_value)
        key = _FALLBACK_KEYS.get(key, key)
        if key == "merge-engine":
            value = _FLUSS_ENGINE_NAMES.get(value.strip().lower(), value.strip().lower())
        if key.startswith("fields.") and key != "fields.default-aggregate-function":
            norm = _normalize_field_key(key)
            if fields.get(norm, value) != value:
                raise OptionsError(raw_key, f"conflicts with another spelling of the same option ('{fields[norm]}')")
            fields[norm] = value
            if key.endswith(".agg"):  # remember the Fluss spelling: Fluss validates such tables more strictly
                fields[key] = value
            continue
        if key in plain and plain[key] != value:
            raise OptionsError(raw_key, f"conflicts with another spelling of the same option ('{plain[key]}')")
        plain[key] = value
    return plain, fields


def _normalize_field_key(key: str) -> str:
    body = key[len("fields.") :]
    if "." not in body:
        raise OptionsError(key, "expected 'fields.<column>.<option>'")
    column, suffix = body.split(".", 1)
    if suffix in _FLUSS_FIELD_SUFFIXES:
        suffix = _FLUSS_FIELD_SUFFIXES[suffix]
    elif suffix.endswith(".delimiter"):  # Fluss: fields.<f>.listagg.delimiter / string_agg.delimiter
        suffix = "list-agg-delimiter"
    return f"fields.{column}.{suffix}"


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return str(value)


def _options_error(exc: ValidationError, plain: dict[str, str]) -> OptionsError:
    err = exc.errors()[0]
    loc = str(err["loc"][0]) if err["loc"] else "?"
    if err["type"] == "extra_forbidden":
        return unknown_option(loc, TABLE_OPTION_KEYS)
    alias = next(
        (info.alias for name, info in TableOptions.model_fields.items() if loc in (name, info.alias)),
        loc,
    )
    key = alias or loc
    shown = plain.get(key, err.get("input"))
    message = str(err["msg"]).removeprefix("Value error, ")
    return OptionsError(key, f"invalid value '{shown}': {message}")


__all__ = [
    "DEFAULT_APPEND_TARGET_FILE_SIZE",
    "POSTPONE_BUCKET",
    "TABLE_OPTION_KEYS",
    "UNAWARE_BUCKET",
    "ChangelogProducer",
    "DeleteBehavior",
    "MergeEngine",
    "SortOrder",
    "TableOptions",
    "normalize_option_keys",
    "parse_bool",
    "parse_duration_ms",
    "parse_memory_size",
]
