"""The read request: what a read asks for, validated once, whichever front end it came through.

:class:`ReadRequest` holds the columns, the filter (as given: it is bound to the schema by
:func:`mergetable.core.filters.bind_filters` when the table is known), the time travel (one of snapshot id,
timestamp, tag or version), an incremental range and the split size. :meth:`ReadRequest.of` builds it
from Python arguments (``Table.read``/``scan``/``plan``), :meth:`ReadRequest.from_options` from a string
option map with Paimon's names and the Spark/Delta spellings as aliases (the Spark data source):

=========================  ===========================================================
option                     aliases
=========================  ===========================================================
``snapshot-id``            ``scan.snapshot-id``
``timestamp-millis``       ``scan.timestamp-millis``
``timestamp``              ``scan.timestamp``, ``timestampAsOf``
``tag``                    ``scan.tag-name``, ``tag-name``
``version``                ``scan.version``, ``versionAsOf`` (a tag name, else a snapshot id)
``incremental-between``    ``scan.incremental-between`` (``start,end``: ids or tags, start exclusive)
``split.target-size``      ``source.split.target-size``
``columns``, ``filter``    (``filter`` as JSON DNF)
=========================  ===========================================================

Timestamps are accepted as epoch milliseconds, ``datetime``/``date`` objects or ISO-8601 strings, in every
front end; a time without a zone is local time (as in Paimon and the ``timestamp`` Spark option).
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from mergetable.core.arguments import unknown_keywords
from mergetable.core.errors import OptionsError
from mergetable.core.option_map import OptionMap
from mergetable.core.option_values import parse_list, parse_memory_size
from mergetable.core.options import DEFAULT_SPLIT_SIZE
from mergetable.core.predicates import Conjunct, Filters

SnapshotRef = int | str
Timestamp = int | str | datetime.datetime | datetime.date

# canonical option -> aliases (all lower case: option maps are matched case-insensitively)
TIME_TRAVEL_OPTIONS: dict[str, tuple[str, ...]] = {
    "snapshot-id": ("scan.snapshot-id",),
    "timestamp-millis": ("scan.timestamp-millis",),
    "timestamp": ("scan.timestamp", "timestampasof"),
    "tag": ("scan.tag-name", "tag-name"),
    "version": ("scan.version", "versionasof"),
}
READ_OPTIONS: dict[str, tuple[str, ...]] = {
    **TIME_TRAVEL_OPTIONS,
    "incremental-between": ("scan.incremental-between",),
    "split.target-size": ("source.split.target-size",),
    "columns": (),
    "filter": (),
}
READ_OPTION_KEYS = frozenset(k for canonical, aliases in READ_OPTIONS.items() for k in (canonical, *aliases))
TIME_TRAVEL_KEYS = frozenset(k for canonical, aliases in TIME_TRAVEL_OPTIONS.items() for k in (canonical, *aliases))


def iso_utc(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC text with a ``Z``.

    >>> iso_utc(1714521600123)
    '2024-05-01T00:00:00.123Z'
    """
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def to_epoch_millis(value: Timestamp, name: str = "timestamp") -> int:
    """Milliseconds since the epoch of epoch millis, a ``datetime``/``date`` or an ISO-8601 string.

    A value without a zone is local time. ``name`` is the option or argument named in errors.

    >>> to_epoch_millis("2024-05-01T00:00:00Z"), to_epoch_millis(1714521600000)
    (1714521600000, 1714521600000)
    """
    if isinstance(value, bool):
        raise OptionsError(name, f"{value!r} is not a timestamp")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        text = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
        try:
            value = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise OptionsError(
                name, f"'{value}' is not epoch milliseconds or an ISO-8601 timestamp (e.g. 2024-05-01 12:00:00)"
            ) from None
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, datetime.date):
        return int(datetime.datetime.combine(value, datetime.time()).timestamp() * 1000)
    raise OptionsError(name, f"{value!r} is not a timestamp (epoch millis, datetime or ISO-8601 string)")


class ReadArgs(TypedDict, total=False):
    """Keyword arguments of ``Table.read``/``scan``/``plan`` besides columns and filter (:meth:`ReadRequest.of`)."""

    snapshot_id: int | str | None
    timestamp_ms: Timestamp | None
    tag: str | None
    version: int | str | None
    incremental_between: tuple[SnapshotRef, SnapshotRef] | str | None
    split_size: int | str


@dataclass(frozen=True)
class TimeTravel:
    """At most one of: a snapshot id, a timestamp (epoch ms), a tag, a version (tag name, else snapshot id)."""

    snapshot_id: int | None = None
    timestamp_ms: int | None = None
    tag: str | None = None
    version: str | None = None

    @classmethod
    def of(
        cls,
        snapshot_id: int | str | None = None,
        timestamp_ms: Timestamp | None = None,
        tag: str | None = None,
        version: int | str | None = None,
    ) -> TimeTravel:
        given = [n for n, v in (("snapshot_id", snapshot_id), ("timestamp_ms", timestamp_ms), ("tag", tag),
                                ("version", version)) if v is not None]  # fmt: skip
        if len(given) > 1:
            raise OptionsError(given[1], f"give at most one of snapshot_id, timestamp_ms, tag and version, got {given}")
        return cls(
            snapshot_id=None if snapshot_id is None else _int("snapshot_id", snapshot_id),
            timestamp_ms=None if timestamp_ms is None else to_epoch_millis(timestamp_ms, "timestamp_ms"),
            tag=tag,
            version=None if version is None else str(version).strip(),
        )

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.snapshot_id, self.timestamp_ms, self.tag, self.version))


@dataclass(frozen=True)
class ReadRequest:
    """A validated read: see the module documentation. Build with :meth:`of` or :meth:`from_options`."""

    columns: tuple[str, ...] | None = None
    filter: Filters | None = None
    travel: TimeTravel = TimeTravel()
    incremental_between: tuple[SnapshotRef, SnapshotRef] | None = None
    split_size: int = DEFAULT_SPLIT_SIZE
    source: tuple[str, str] | None = None  # the time-travel option as given, for messages

    @classmethod
    def of(
        cls,
        columns: Sequence[str] | None = None,
        filter: Filters | None = None,
        snapshot_id: int | str | None = None,
        timestamp_ms: Timestamp | None = None,
        tag: str | None = None,
        version: int | str | None = None,
        incremental_between: tuple[SnapshotRef, SnapshotRef] | str | None = None,
        split_size: int | str = DEFAULT_SPLIT_SIZE,
        **unknown: Any,
    ) -> ReadRequest:
        """The request of Python arguments (``Table.read`` and friends).

        >>> ReadRequest.of(columns=["id"], timestamp_ms="2024-05-01T00:00:00Z").travel.timestamp_ms
        1714521600000
        """
        unknown_keywords(unknown, ["columns", "filter", *ReadArgs.__annotations__], "a read")
        travel = TimeTravel.of(snapshot_id, timestamp_ms, tag, version)
        incremental = _incremental("incremental_between", incremental_between)
        if incremental is not None and travel.given:
            raise OptionsError(
                "incremental_between", "cannot be combined with snapshot_id, timestamp_ms, tag or version"
            )
        if columns is not None and (isinstance(columns, str) or not list(columns)):
            raise OptionsError("columns", f"must be a non-empty list of column names, got {columns!r}")
        return cls(
            columns=None if columns is None else tuple(columns),
            filter=filter,
            travel=travel,
            incremental_between=incremental,
            split_size=_positive_size("split_size", split_size),
        )

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ReadRequest:
        """The request of a string option map; keys other than :data:`READ_OPTION_KEYS` are ignored.

        >>> ReadRequest.from_options({"versionAsOf": "3", "columns": "id, v"}).travel.version
        '3'
        """
        opts = OptionMap.of(options)
        found: dict[str, tuple[str, str]] = {}  # canonical -> (key as spelled, value)
        for canonical, aliases in READ_OPTIONS.items():
            if (hit := opts.first(canonical, *aliases)) is not None:
                found[canonical] = hit
        travel_keys = sorted(k for k in found if k in TIME_TRAVEL_OPTIONS)
        if len(travel_keys) > 1:
            raise OptionsError(travel_keys[1], f"give only one time-travel option, got {travel_keys}")
        if "incremental-between" in found and travel_keys:
            raise OptionsError("incremental-between", f"cannot be combined with {travel_keys[0]}")
        source = found[travel_keys[0]] if travel_keys else None
        value = {k: v for k, (_, v) in found.items()}
        timestamp = value.get("timestamp-millis", value.get("timestamp"))
        columns = parse_list(value["columns"]) if "columns" in value else None
        if columns is not None and not columns:
            raise OptionsError("columns", "is empty")
        increment, split = found.get("incremental-between"), found.get("split.target-size")
        return cls(
            columns=columns,
            filter=parse_filter(value["filter"]) if "filter" in value else None,
            travel=TimeTravel(
                snapshot_id=_int(found["snapshot-id"][0], value["snapshot-id"]) if "snapshot-id" in value else None,
                timestamp_ms=None if timestamp is None or source is None else to_epoch_millis(timestamp, source[0]),
                tag=value.get("tag"),
                version=value["version"].strip() if "version" in value else None,
            ),
            incremental_between=None if increment is None else _incremental(*increment),
            split_size=DEFAULT_SPLIT_SIZE if split is None else _positive_size(*split),
            source=source,
        )


def _int(name: str, value: int | str) -> int:
    if isinstance(value, bool):
        raise OptionsError(name, f"{value!r} is not an integer")
    try:
        return int(value.strip() if isinstance(value, str) else value)
    except ValueError:
        raise OptionsError(name, f"'{value}' is not an integer") from None


def _positive_size(name: str, value: int | str) -> int:
    try:
        n = int(parse_memory_size(value))
    except ValueError as exc:
        raise OptionsError(name, str(exc)) from None
    if n <= 0:
        raise OptionsError(name, f"must be positive, got {value}")
    return n


def _incremental(
    name: str, value: tuple[SnapshotRef, SnapshotRef] | str | None
) -> tuple[SnapshotRef, SnapshotRef] | None:
    """``'start,end'`` or a pair: snapshot ids or tag names, start exclusive (Paimon's ``incremental-between``)."""
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",")] if isinstance(value, str) else list(value)
    if len(parts) != 2 or any(p == "" or p is None for p in parts):
        raise OptionsError(name, f"expected 'start,end' (snapshot ids or tag names), got '{value}'")
    a, b = (int(p) if isinstance(p, str) and p.isdigit() else p for p in parts)
    return a, b


_FILTER_TEXT = re.compile(r"^\s*([^\s=!<>]+)\s*(==|=|!=|<=|>=|<|>)\s*(.*?)\s*$")


def parse_filter_text(expr: str) -> tuple[str, str, str]:
    """``<column><op><value>`` (ops ``= == != < <= > >=``) as a predicate whose literal is the text of the
    value, unquoted; :func:`~mergetable.core.filters.bind_filters` coerces it to the column's type.

    >>> parse_filter_text("dt >= '2024-05-01'")
    ('dt', '>=', '2024-05-01')
    """
    m = _FILTER_TEXT.match(expr)
    if not m:
        raise OptionsError("filter", f"'{expr}' is not of the form <column><op><value> (ops: = != < <= > >=)")
    column, op, text = m.groups()
    return column, op, text.strip("'\"")


def parse_filter(text: str) -> list[Conjunct]:
    """A DNF filter given as JSON: ``[["id", ">", 5], ["dt", "in", ["a", "b"]]]`` (AND) or a list of those (OR)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionsError("filter", f"is not JSON: {exc}") from None

    def pred(p: Any) -> tuple[str, str, Any]:
        if not (isinstance(p, list) and len(p) == 3 and isinstance(p[0], str) and isinstance(p[1], str)):
            raise OptionsError("filter", f"{p!r} is not a [column, op, value] triple")
        return (p[0], p[1].lower(), p[2])

    if not isinstance(raw, list) or not raw:
        raise OptionsError(
            "filter", "must be a non-empty JSON list of [column, op, value] triples (or of lists of them)"
        )
    if all(isinstance(x, list) and x and isinstance(x[0], list) for x in raw):
        return [[pred(p) for p in conj] for conj in raw]
    return [[pred(p) for p in raw]]


__all__ = [
    "DEFAULT_SPLIT_SIZE",
    "READ_OPTIONS",
    "READ_OPTION_KEYS",
    "TIME_TRAVEL_KEYS",
    "TIME_TRAVEL_OPTIONS",
    "ReadArgs",
    "ReadRequest",
    "SnapshotRef",
    "TimeTravel",
    "Timestamp",
    "iso_utc",
    "parse_filter",
    "parse_filter_text",
    "to_epoch_millis",
]
