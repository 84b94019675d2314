"""String option maps, read the same way by every front end (table options, reads, writes, Spark, the CLI).

:class:`OptionMap` holds an option map with its keys stripped and lower-cased (Spark lower-cases the keys it
hands a data source, so every key is matched case-insensitively; values are kept as given, as text).
It reads an option under several spellings (:meth:`OptionMap.first`), a boolean (:meth:`OptionMap.flag`) or
one of some words (:meth:`OptionMap.choice`), each failing with an
:class:`~mergetable.core.errors.OptionsError` that names the option. :func:`unknown_option` is the one
error for a key nobody knows: it suggests the nearest known key ("did you mean ...?") and says so when the
key is a real Paimon option that mergetable does not support (:data:`PAIMON_UNSUPPORTED_OPTIONS`).

>>> opts = OptionMap.of({"Pushdown": " TRUE ", "versionAsOf": "3"})
>>> opts.choice("pushdown", ("auto", "true", "false"), "auto"), opts.first("version", "versionasof")
('true', ('versionasof', '3'))
>>> str(unknown_option("bukcet", ["bucket", "bucket-key"]))
"option 'bukcet': unknown option (did you mean 'bucket'?)"
>>> str(unknown_option("row-tracking.enabled", ["bucket"]))
"option 'row-tracking.enabled': Paimon option 'row-tracking.enabled' is not supported by mergetable"
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from mergetable.core.errors import OptionsError

#: Options of Apache Paimon (table, scan and write options) that mergetable does not support. A map that
#: sets one is refused with a message saying so, distinct from an unknown key.
PAIMON_UNSUPPORTED_OPTIONS: frozenset[str] = frozenset(
    {
        "async-file-write",
        "branch",
        "bucket-function.type",
        "commit.callbacks",
        "compaction.force-up-level-0",
        "compaction.max.file-num",
        "compaction.total-size-threshold",
        "data-evolution.enabled",
        "data-file.external-paths",
        "data-file.external-paths.strategy",
        "data-file.path-directory",
        "dynamic-bucket.assigner-parallelism",
        "file-index.in-manifest-threshold",
        "file-index.read.enabled",
        "file-reader-async-threshold",
        "file.block-size",
        "file.compression.per.level",
        "file.format.per.level",
        "local-sort.max-num-file-handles",
        "lookup-compact",
        "lookup-compact.max-interval",
        "lookup.cache-file-retention",
        "lookup.cache-max-disk-size",
        "lookup.cache-max-memory-size",
        "lookup.hash-load-factor",
        "manifest.compression",
        "manifest.format",
        "metadata.stats-dense-store",
        "page-size",
        "partition.expiration-check-interval",
        "partition.expiration-time",
        "partition.timestamp-formatter",
        "partition.timestamp-pattern",
        "record-level.expire-time",
        "record-level.time-field",
        "row-tracking.enabled",
        "scan.fallback-branch",
        "scan.file-creation-time-millis",
        "scan.manifest.parallelism",
        "scan.plan-sort-partition",
        "snapshot.clean-empty-directories",
        "sort-spill-buffer-size",
        "sort-spill-threshold",
        "spill-compression",
        "tag.automatic-creation",
        "tag.creation-period",
        "tag.default-time-retained",
        "tag.num-retained-max",
        "write-buffer-for-append",
    }
)


def lower_keys(options: Mapping[Any, Any] | None) -> dict[str, str]:
    """``options`` with keys stripped and lower-cased and values as text (None values dropped).

    >>> lower_keys({" Path ": "/t", "n": 3, "gone": None})
    {'path': '/t', 'n': '3'}
    """
    return {str(k).strip().lower(): str(v) for k, v in (options or {}).items() if v is not None}


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` naming the known name nearest ``name``, or an empty string when none is near.

    >>> did_you_mean("merge-engin", ["merge-engine", "bucket"]), did_you_mean("zzz", ["bucket"])
    (" (did you mean 'merge-engine'?)", '')
    """
    candidates = {str(k).lower(): str(k) for k in known}
    near = difflib.get_close_matches(name.lower(), list(candidates), n=1, cutoff=0.75)
    return f" (did you mean '{candidates[near[0]]}'?)" if near else ""


def unknown_option(key: str, known: Iterable[str], what: str = "option") -> OptionsError:
    """The error for an option ``key`` nobody knows: a Paimon option mergetable does not support says so;
    any other key is an ``unknown <what>`` with the nearest of ``known`` suggested."""
    if key.strip().lower() in PAIMON_UNSUPPORTED_OPTIONS:
        return OptionsError(key, f"Paimon option '{key}' is not supported by mergetable")
    return OptionsError(key, f"unknown {what}{did_you_mean(key, known)}")


class OptionMap(Mapping[str, str]):
    """A read-only option map whose keys are stripped and lower-cased (see the module documentation)."""

    __slots__ = ("_items",)

    def __init__(self, items: dict[str, str]) -> None:
        self._items = items

    @classmethod
    def of(cls, options: Mapping[Any, Any] | None) -> OptionMap:
        """The map of ``options`` (any key case; None values are left out)."""
        return options if isinstance(options, OptionMap) else cls(lower_keys(options))

    def __getitem__(self, key: str) -> str:
        return self._items[key.lower()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"OptionMap({self._items!r})"

    def without(self, *keys: str) -> OptionMap:
        """A copy without ``keys``."""
        drop = {k.lower() for k in keys}
        return OptionMap({k: v for k, v in self._items.items() if k not in drop})

    def first(self, *keys: str) -> tuple[str, str] | None:
        """``(key, value)`` of the one spelling of an option given among ``keys`` (None when none is).

        Two spellings with different values are an error naming the second.
        """
        found = [(k, self._items[k]) for k in (k.lower() for k in keys) if k in self._items]
        for key, value in found[1:]:
            if value != found[0][1]:
                raise OptionsError(key, f"conflicts with '{found[0][0]}' (another spelling of the same option)")
        return found[0] if found else None

    def choice(self, key: str, choices: Iterable[str], default: str, name: str | None = None) -> str:
        """The value of ``key`` (stripped, lower case), which must be one of ``choices``."""
        allowed = tuple(choices)
        value = self._items.get(key.lower(), default).strip().lower()
        if value not in allowed:
            raise OptionsError(name or key, f"must be one of {', '.join(allowed)}, got '{value}'")
        return value

    def flag(self, key: str, default: bool = False, name: str | None = None) -> bool:
        """The boolean value of ``key`` (``true``/``false``, any case)."""
        return self.choice(key, ("true", "false"), "true" if default else "false", name) == "true"

    def check_known(self, known: Iterable[str], prefixes: Iterable[str] = (), what: str = "option") -> None:
        """Refuse the first key that is neither in ``known`` nor starts with one of ``prefixes``."""
        names = frozenset(k.lower() for k in known)
        starts = tuple(prefixes)
        for key in self._items:
            if key not in names and not (starts and key.startswith(starts)):
                raise unknown_option(key, sorted(names), what)


__all__ = ["PAIMON_UNSUPPORTED_OPTIONS", "OptionMap", "did_you_mean", "lower_keys", "unknown_option"]
