"""Options of change-data reads, with Paimon's names: streaming scan modes and batch incremental ranges.

Streaming (``spark.readStream`` and :func:`mergetable.read.stream.follow`):

* ``scan.mode``: ``default`` | ``latest-full`` (alias ``full``) | ``latest`` | ``from-snapshot`` |
  ``from-snapshot-full`` | ``from-timestamp`` | ``compacted-full``.
* one start position: ``scan.snapshot-id`` (Spark/Delta: ``startingVersion``), ``scan.tag-name``,
  ``scan.timestamp-millis`` or ``scan.timestamp`` (ISO-8601; Spark/Delta: ``startingTimestamp``, ISO or ms).
* ``consumer-id``; ``max-snapshots-per-trigger``, ``read.stream.maxFilesPerTrigger`` (alias
  ``maxFilesPerTrigger``), ``read.stream.maxRowsPerTrigger`` (alias ``maxRowsPerTrigger``);
  ``changelog.drop-update-before``; ``streaming-read-overwrite``; ``continuous.discovery-interval``.

Batch change data: ``incremental-between`` (``start,end``: snapshot ids or tags, start exclusive) or
``incremental-between-timestamp`` (``t1,t2``, ms or ISO), with ``incremental-between-scan-mode`` =
``auto`` | ``delta`` | ``changelog`` | ``diff``.

Keys match case-insensitively (Spark lower-cases them). Every problem is an :class:`OptionsError`
naming the option.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from mergetable.commit.consumers import check_consumer_id
from mergetable.core.errors import MergeTableError, OptionsError
from mergetable.core.option_map import lower_keys
from mergetable.core.option_values import parse_bool, parse_duration_ms
from mergetable.core.read_options import to_epoch_millis

T = TypeVar("T")


class ScanMode(StrEnum):
    DEFAULT = "default"
    LATEST_FULL = "latest-full"
    LATEST = "latest"
    FROM_SNAPSHOT = "from-snapshot"
    FROM_SNAPSHOT_FULL = "from-snapshot-full"
    FROM_TIMESTAMP = "from-timestamp"
    COMPACTED_FULL = "compacted-full"


class IncrementalMode(StrEnum):
    AUTO = "auto"
    DELTA = "delta"
    CHANGELOG = "changelog"
    DIFF = "diff"


# canonical key -> accepted spellings (lower case)
_SNAPSHOT = ("scan.snapshot-id", "startingversion")
_TAG = ("scan.tag-name",)
_TS_MILLIS = ("scan.timestamp-millis",)
_TS_ISO = ("scan.timestamp", "startingtimestamp")
_MAX_FILES = ("read.stream.maxfilespertrigger", "maxfilespertrigger")
_MAX_ROWS = ("read.stream.maxrowspertrigger", "maxrowspertrigger")
STREAM_KEYS = frozenset(
    {
        "scan.mode",
        "consumer-id",
        "max-snapshots-per-trigger",
        "changelog.drop-update-before",
        "streaming-read-overwrite",
        "continuous.discovery-interval",
        *_SNAPSHOT,
        *_TAG,
        *_TS_MILLIS,
        *_TS_ISO,
        *_MAX_FILES,
        *_MAX_ROWS,
    }
)
INCREMENTAL_KEYS = frozenset(
    {
        "incremental-between",
        "scan.incremental-between",
        "incremental-between-timestamp",
        "incremental-between-scan-mode",
    }
)
_MODE_NAMES = {"full": ScanMode.LATEST_FULL}


def _one(opts: dict[str, str], keys: tuple[str, ...]) -> tuple[str, str] | None:
    found = [(k, opts[k]) for k in keys if k in opts]
    if len(found) > 1:
        raise OptionsError(found[1][0], f"give only one of {list(keys)}")
    return found[0] if found else None


def _positive(key: str, value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise OptionsError(key, f"'{value}' is not an integer") from None
    if n < 1:
        raise OptionsError(key, f"must be >= 1, got {n}")
    return n


@dataclass(frozen=True)
class StreamOptions:
    """Validated streaming read options. ``scan_mode`` is resolved (never ``default``)."""

    scan_mode: ScanMode = ScanMode.LATEST_FULL
    snapshot_id: int | None = None
    tag: str | None = None
    timestamp_ms: int | None = None
    consumer_id: str | None = None
    max_snapshots_per_trigger: int | None = None
    max_files_per_trigger: int | None = None
    max_rows_per_trigger: int | None = None
    drop_update_before: bool = False
    read_overwrite: bool = False
    discovery_interval_ms: int = 10_000

    @classmethod
    def parse(cls, options: Mapping[str, object]) -> StreamOptions:
        """Parse the streaming keys of ``options`` (other keys are ignored here).

        >>> StreamOptions.parse({"startingVersion": "5"}).scan_mode
        <ScanMode.FROM_SNAPSHOT: 'from-snapshot'>
        >>> StreamOptions.parse({"scan.mode": "latest", "scan.snapshot-id": "5"})
        Traceback (most recent call last):
        ...
        mergetable.core.errors.OptionsError: option 'scan.snapshot-id': has no meaning with scan.mode 'latest'
        """
        opts = lower_keys(options)
        raw_mode = opts.get("scan.mode", "default").strip().lower()
        try:
            mode = _MODE_NAMES.get(raw_mode) or ScanMode(raw_mode)
        except ValueError:
            known = ", ".join(m.value for m in ScanMode)
            raise OptionsError("scan.mode", f"unknown scan mode '{raw_mode}' (known: {known})") from None
        snap = _one(opts, _SNAPSHOT)
        tag = _one(opts, _TAG)
        millis = _one(opts, _TS_MILLIS)
        iso = _one(opts, _TS_ISO)
        starts = [s for s in (snap, tag, millis, iso) if s is not None]
        if len(starts) > 1:
            raise OptionsError(starts[1][0], f"conflicts with '{starts[0][0]}': give one start position")
        snapshot_id = tag_name = timestamp = None
        if snap is not None:
            snapshot_id = _positive(snap[0], snap[1])
        if tag is not None:
            tag_name = tag[1].strip()
        if millis is not None:
            timestamp = to_epoch_millis(millis[1], millis[0])
        if iso is not None:
            timestamp = to_epoch_millis(iso[1], iso[0])
        mode = _resolve_mode(mode, snapshot_id is not None or tag_name is not None, timestamp is not None, starts)
        consumer = opts.get("consumer-id")
        if consumer is not None:
            try:
                check_consumer_id(consumer.strip())
            except MergeTableError as exc:
                raise OptionsError("consumer-id", str(exc)) from None
        limits = {}
        for name, keys in (("files", _MAX_FILES), ("rows", _MAX_ROWS)):
            found = _one(opts, keys)
            if found is not None:
                limits[name] = _positive(*found)
        return cls(
            scan_mode=mode,
            snapshot_id=snapshot_id,
            tag=tag_name,
            timestamp_ms=timestamp,
            consumer_id=consumer.strip() if consumer is not None else None,
            max_snapshots_per_trigger=(
                _positive("max-snapshots-per-trigger", opts["max-snapshots-per-trigger"])
                if "max-snapshots-per-trigger" in opts
                else None
            ),
            max_files_per_trigger=limits.get("files"),
            max_rows_per_trigger=limits.get("rows"),
            drop_update_before=_parsed(opts, "changelog.drop-update-before", parse_bool, False),
            read_overwrite=_parsed(opts, "streaming-read-overwrite", parse_bool, False),
            discovery_interval_ms=_parsed(opts, "continuous.discovery-interval", parse_duration_ms, 10_000),
        )


def _resolve_mode(mode: ScanMode, has_snapshot: bool, has_timestamp: bool, starts: list[tuple[str, str]]) -> ScanMode:
    """Paimon's rules: ``default`` picks the mode from the start position; other modes check theirs."""
    if mode is ScanMode.DEFAULT:
        if has_timestamp:
            return ScanMode.FROM_TIMESTAMP
        return ScanMode.FROM_SNAPSHOT if has_snapshot else ScanMode.LATEST_FULL
    if mode in (ScanMode.FROM_SNAPSHOT, ScanMode.FROM_SNAPSHOT_FULL) and not has_snapshot:
        raise OptionsError("scan.mode", f"'{mode}' needs scan.snapshot-id (startingVersion) or scan.tag-name")
    if mode is ScanMode.FROM_TIMESTAMP and not has_timestamp:
        raise OptionsError("scan.mode", "'from-timestamp' needs scan.timestamp-millis or scan.timestamp")
    takes_snapshot = mode in (ScanMode.FROM_SNAPSHOT, ScanMode.FROM_SNAPSHOT_FULL)
    for key, _ in starts:
        is_snapshot = key in (*_SNAPSHOT, *_TAG)
        if not (takes_snapshot and is_snapshot) and not (mode is ScanMode.FROM_TIMESTAMP and not is_snapshot):
            raise OptionsError(key, f"has no meaning with scan.mode '{mode}'")
    return mode


def _parsed(opts: dict[str, str], key: str, parse: Callable[[str], T], default: T) -> T:
    if key not in opts:
        return default
    try:
        return parse(opts[key])
    except ValueError as exc:
        raise OptionsError(key, str(exc)) from None


@dataclass(frozen=True)
class IncrementalOptions:
    """A batch change-data range: ids/tags (``between``) or timestamps (``timestamps``), and the mode."""

    between: tuple[int | str, int | str] | None = None
    timestamps: tuple[int, int] | None = None
    mode: IncrementalMode = IncrementalMode.AUTO

    @classmethod
    def parse(cls, options: Mapping[str, object]) -> IncrementalOptions | None:
        """None when no incremental range is given; a mode alone is an error naming it."""
        opts = lower_keys(options)
        between = _one(opts, ("incremental-between", "scan.incremental-between"))
        stamps = opts.get("incremental-between-timestamp")
        mode = parse_incremental_mode(opts.get("incremental-between-scan-mode", "auto"))
        if between is None and stamps is None:
            if "incremental-between-scan-mode" in opts:
                raise OptionsError("incremental-between-scan-mode", "needs incremental-between(-timestamp)")
            return None
        if between is not None and stamps is not None:
            raise OptionsError("incremental-between-timestamp", f"conflicts with '{between[0]}'")
        if between is not None:
            a, b = _pair(between[0], between[1])
            return cls(between=(int(a) if a.isdigit() else a, int(b) if b.isdigit() else b), mode=mode)
        key = "incremental-between-timestamp"
        a, b = _pair(key, str(stamps))
        return cls(timestamps=(to_epoch_millis(a, key), to_epoch_millis(b, key)), mode=mode)


def parse_incremental_mode(value: str | IncrementalMode) -> IncrementalMode:
    try:
        return IncrementalMode(str(value).strip().lower())
    except ValueError:
        raise OptionsError(
            "incremental-between-scan-mode", f"unknown mode '{value}' (auto, delta, changelog or diff)"
        ) from None


def _pair(key: str, value: str) -> tuple[str, str]:
    parts = [p.strip() for p in value.split(",")]
    if len(parts) != 2 or not all(parts):
        raise OptionsError(key, f"expected 'start,end', got '{value}'")
    return parts[0], parts[1]


__all__ = [
    "INCREMENTAL_KEYS",
    "STREAM_KEYS",
    "IncrementalMode",
    "IncrementalOptions",
    "ScanMode",
    "StreamOptions",
    "parse_incremental_mode",
]
