"""What is Spark's own in the options of the ``mergetable`` data source.

The read options themselves (time travel with Paimon's and Delta's spellings, incremental range, columns,
filter, split size) are parsed by :class:`mergetable.core.read_options.ReadRequest`, and storage options
(``storage.<name>``, ``storage-options``) by :mod:`mergetable.core.storage`. Here: the table location
(``path``), ``pushdown``, ``batch-size`` and ``sections``, and the write options. Spark lower-cases option keys (values
are untouched), so every key here is matched in lower case and ``fields.<column>.<option>`` keys get their
column's spelling back from the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pyspark.sql.datasource import DataSourceReader

from mergetable.core.errors import OptionsError
from mergetable.core.option_map import OptionMap
from mergetable.core.read_options import READ_OPTION_KEYS, TIME_TRAVEL_OPTIONS, ReadRequest, parse_filter
from mergetable.core.storage import STORAGE_JSON, STORAGE_PREFIX, storage_options
from mergetable.core.write_options import WRITE_KEYS, WRITE_TUNABLES, restore_field_case, table_uri
from mergetable.core.write_options import WriteOptions as CoreWriteOptions
from mergetable.read.scan_modes import INCREMENTAL_KEYS, STREAM_KEYS
from mergetable.spark.write_modes import MODE_KEYS

_SPARK_READ_KEYS = ("path", "pushdown", "batch-size", "sections")
_SECTIONS = ("all", "merged", "merging")
#: Values of the ``pushdown`` read option.
PUSHDOWN_VALUES = ("auto", "true", "false")
#: Default rows per Arrow batch a Spark reader yields (``batch-size``).
DEFAULT_BATCH_SIZE = 256 * 1024
#: Paimon Spark's switch for change rows, and Delta's spelling of it (lower case, as Spark passes keys)
READ_CHANGELOG_KEYS = ("read.changelog", "readchangefeed")
#: change data: Paimon's streaming and incremental options and the change-row switches
CHANGE_KEYS = frozenset({*STREAM_KEYS, *INCREMENTAL_KEYS, *READ_CHANGELOG_KEYS})
READ_KEYS = frozenset({*_SPARK_READ_KEYS, STORAGE_JSON, *READ_OPTION_KEYS, *CHANGE_KEYS})


def pushdown_scoped_per_scan() -> bool:
    """Whether this PySpark keeps pushed-down read plans per scan (they came together with ``pushLimit``).

    Where it does not (PySpark 4.x up to 4.3), ``pushdown=true`` is refused: one pushed plan per loaded
    relation serves every later scan of the DataFrame (see :mod:`mergetable.spark.source`).

    >>> isinstance(pushdown_scoped_per_scan(), bool)
    True
    """
    return hasattr(DataSourceReader, "pushLimit")


def _pushdown(opts: OptionMap) -> str:
    """The ``pushdown`` option's value; ``true`` only where :func:`pushdown_scoped_per_scan`."""
    pushdown = opts.choice("pushdown", PUSHDOWN_VALUES, "auto")
    if pushdown == "true" and not pushdown_scoped_per_scan():
        raise OptionsError(
            "pushdown",
            "'true' is refused on this PySpark, which keeps one pushed-down read plan per loaded DataFrame and runs "
            "it for every later scan of that DataFrame (a filtered query's rows would answer an unfiltered one); "
            "use 'auto' (the default), or the 'filter' option to prune",
        )
    return pushdown


# -- reading ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReadOptions:
    """Parsed read options: the core :class:`ReadRequest` plus what only Spark has (pushdown, batch size)."""

    uri: str
    request: ReadRequest = field(default_factory=ReadRequest)
    storage: dict[str, Any] | None = None
    pushdown: str = "auto"
    batch_size: int = DEFAULT_BATCH_SIZE
    sections: Literal["all", "merged", "merging"] = "all"
    """``merged``: only the sections that are not raw-convertible (``Table.plan``'s ``sections``); what
    :func:`mergetable.spark.api.read` asks for when it scans the raw-convertible ones with Spark's Parquet reader.
    ``merging``: only those that need a merge (a deletion-vector table's other sections are read there too)."""

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        opts = OptionMap.of(options)
        opts.check_known(READ_KEYS, (STORAGE_PREFIX,), "read option")
        pushdown = _pushdown(opts)
        batch_size = _positive("batch-size", opts["batch-size"]) if "batch-size" in opts else DEFAULT_BATCH_SIZE
        sections = opts.choice("sections", _SECTIONS, "all")
        request = ReadRequest.from_options(opts)
        if sections != "all" and request.incremental_between is not None:
            raise OptionsError("sections", "must be 'all' for an incremental read")
        return cls(
            uri=table_uri(opts),
            request=request,
            storage=storage_options(opts),
            pushdown=pushdown,
            batch_size=batch_size,
            sections="merged" if sections == "merged" else "merging" if sections == "merging" else "all",
        )

    @property
    def columns(self) -> tuple[str, ...] | None:
        return self.request.columns

    @property
    def split_size(self) -> int:
        return self.request.split_size

    @property
    def time_travel(self) -> dict[str, str]:
        """The time-travel option given, under its canonical name (empty when none)."""
        if self.request.source is None:
            return {}
        key, value = self.request.source
        return {next(c for c, a in TIME_TRAVEL_OPTIONS.items() if key in (c, *a)): value}


def _positive(key: str, value: str) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise OptionsError(key, f"'{value}' is not an integer") from None
    if n <= 0:
        raise OptionsError(key, f"must be positive, got {value}")
    return n


# -- writing ---------------------------------------------------------------------------------------------
class WriteOptions(CoreWriteOptions):
    """:class:`mergetable.core.write_options.WriteOptions` refusing every read option of the data source."""

    @classmethod
    def parse(
        cls, options: Mapping[str, str], columns: list[str], read_keys: frozenset[str] = READ_KEYS
    ) -> WriteOptions:
        return super().parse(OptionMap.of(options).without(*MODE_KEYS), columns, read_keys)  # see write_modes


__all__ = [
    "PUSHDOWN_VALUES",
    "READ_KEYS",
    "STORAGE_JSON",
    "STORAGE_PREFIX",
    "WRITE_KEYS",
    "WRITE_TUNABLES",
    "ReadOptions",
    "WriteOptions",
    "parse_filter",
    "pushdown_scoped_per_scan",
    "restore_field_case",
    "storage_options",
    "table_uri",
]
