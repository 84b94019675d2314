"""Spark-side write modes: ``partitionOverwriteMode``, Delta's ``replaceWhere`` and column-name case.

A Python data source's writer runs in a Python worker that cannot see the session's SQL configuration, so
these come as write options (Spark lower-cases their keys):

* ``partitionOverwriteMode`` = ``static`` | ``dynamic`` (Spark's per-write option, which wins over
  ``spark.sql.sources.partitionOverwriteMode``): with ``mode("overwrite")`` on a partitioned table,
  ``static`` replaces the whole table and ``dynamic`` only the partitions the data holds. Unset (and no
  per-write ``dynamic-partition-overwrite``), the session's ``spark.sql.sources.partitionOverwriteMode``
  decides, static by default, as for Spark's file sources, Delta (2.0+) and Paimon's Spark writer. The table
  option ``dynamic-partition-overwrite`` (Paimon's, default true) governs ``Table.write(overwrite=True)`` only,
  as Paimon's Spark writer ignores it too. The session's setting is read by the write tasks, to which Spark
  hands the session's SQL settings (:data:`SESSION_OVERWRITE_MODE`), and reported to the commit; a write
  without any task (no input partition) is static. :func:`mergetable.spark.write` and ``MergeTable`` pass
  the session's setting as the option.
* ``replaceWhere`` = ``"dt = '2024-01-01' AND region = 'eu'"`` with ``mode("overwrite")``: replace exactly the
  partitions the predicate names (equalities on partition columns); written rows outside it are refused, as
  Delta's constraint check does.
* ``caseSensitive`` = ``false`` (Spark's default for ``spark.sql.caseSensitive``): data columns match table
  columns whatever their case; ``true`` matches them exactly.
* ``mergeSchema`` = ``true`` (Delta's): columns of the data that the table lacks are added to it (one schema
  commit before the data is written) and wider input types widen the table's. Paimon's ``write.merge-schema``
  adds the columns; its ``write.merge-schema.type-widening`` also widens; ``write.merge-schema.explicit-cast``
  (lossy changes) is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mergetable.core.errors import OptionsError, SchemaError, UnsupportedError
from mergetable.core.option_map import OptionMap

PARTITION_OVERWRITE_MODE = "partitionoverwritemode"
#: The session setting that write tasks read from their local properties (Spark copies SQL settings there).
SESSION_OVERWRITE_MODE = "spark.sql.sources.partitionOverwriteMode"
DYNAMIC_PARTITION_OVERWRITE = "dynamic-partition-overwrite"
REPLACE_WHERE = "replacewhere"
CASE_SENSITIVE = "casesensitive"
MERGE_SCHEMA, PAIMON_MERGE_SCHEMA = "mergeschema", "write.merge-schema"
TYPE_WIDENING, EXPLICIT_CAST = "write.merge-schema.type-widening", "write.merge-schema.explicit-cast"
MODE_KEYS = frozenset(
    {PARTITION_OVERWRITE_MODE, REPLACE_WHERE, CASE_SENSITIVE, MERGE_SCHEMA, PAIMON_MERGE_SCHEMA, TYPE_WIDENING}
    | {EXPLICIT_CAST}
)
_EQUALITY = re.compile(r"^\s*`?([^`=\s]+)`?\s*=\s*(?:'((?:[^']|'')*)'|\"([^\"]*)\"|([^\s'\"]+))\s*$")


@dataclass(frozen=True)
class WriteMode:
    overwrite: bool | dict[str, str] = False
    option_overrides: dict[str, str] = field(default_factory=dict)
    case_sensitive: bool = False
    merge_schema: bool = False
    """Add the data's new columns to the table before writing."""
    widen_types: bool = False
    """With ``merge_schema``: also widen table columns to wider input types."""
    session_overwrite_mode: bool = False
    """A whole-table overwrite that no option made static or dynamic: the session's setting decides."""


def parse_replace_where(text: str, partition_keys: Sequence[str]) -> dict[str, str]:
    """``k = 'v' AND k2 = 3`` on partition columns as a partition spec ``{"k": "v", "k2": "3"}``."""
    spec: dict[str, str] = {}
    for part in re.split(r"\s+and\s+", text.strip(), flags=re.IGNORECASE):
        m = _EQUALITY.match(part)
        if m is None:
            raise UnsupportedError(
                f"replaceWhere '{text}': only equalities on partition columns joined by AND are supported "
                f"(partition columns: {list(partition_keys)}); for other predicates delete with MergeTable and append"
            )
        column = next((k for k in partition_keys if k.lower() == m.group(1).lower()), None)
        if column is None:
            raise SchemaError(
                f"replaceWhere names a column that is not a partition column {list(partition_keys)}", m.group(1)
            )
        value = m.group(2).replace("''", "'") if m.group(2) is not None else (m.group(3) or m.group(4))
        spec[column] = value
    return spec


def parse_write_mode(options: Mapping[str, str], overwrite: bool, partition_keys: Sequence[str]) -> WriteMode:
    opts = OptionMap.of(options)
    overrides: dict[str, str] = {}
    session = False
    if PARTITION_OVERWRITE_MODE in opts:
        mode = opts.choice(PARTITION_OVERWRITE_MODE, ("static", "dynamic"), "static", "partitionOverwriteMode")
        overrides[DYNAMIC_PARTITION_OVERWRITE] = "true" if mode == "dynamic" else "false"
    elif DYNAMIC_PARTITION_OVERWRITE not in opts:  # static unless the session says dynamic (see the module)
        overrides[DYNAMIC_PARTITION_OVERWRITE] = "false"
        session = overwrite
    case_sensitive = opts.flag(CASE_SENSITIVE, False, "caseSensitive")
    target: bool | dict[str, str] = overwrite
    if REPLACE_WHERE in opts:
        if not overwrite:
            raise OptionsError("replaceWhere", "needs mode('overwrite')")
        if not partition_keys:
            raise UnsupportedError("replaceWhere on an unpartitioned table: use mode('overwrite') or MergeTable.delete")
        if overrides.get(DYNAMIC_PARTITION_OVERWRITE) == "true":  # Delta refuses the two together as well
            raise OptionsError("replaceWhere", "cannot be combined with partitionOverwriteMode 'dynamic'")
        target, session = parse_replace_where(opts[REPLACE_WHERE], partition_keys), False
    merge, widen = _merge_schema(opts)
    return WriteMode(target, overrides, case_sensitive, merge, widen, session)


def _merge_schema(opts: OptionMap) -> tuple[bool, bool]:
    """(merge the schema, widen types) from Delta's ``mergeSchema`` and Paimon's ``write.merge-schema*``."""
    delta = opts.flag(MERGE_SCHEMA, False, "mergeSchema")
    paimon = opts.flag(PAIMON_MERGE_SCHEMA)
    widening = opts.flag(TYPE_WIDENING)
    if opts.flag(EXPLICIT_CAST):
        raise UnsupportedError(
            f"{EXPLICIT_CAST}: lossy column type changes are not supported (only widening, see docs/evolution.md)"
        )
    return delta or paimon, delta or (paimon and widening)


def case_renames(columns: Sequence[str], table_columns: Sequence[str], case_sensitive: bool) -> dict[str, str]:
    """Data column → table column for names that differ only in case (empty when case-sensitive)."""
    if case_sensitive:
        return {}
    lower: dict[str, list[str]] = {}
    for c in table_columns:
        lower.setdefault(c.lower(), []).append(c)
    out = {}
    for c in columns:
        if c in table_columns:
            continue
        matches = lower.get(c.lower(), [])
        if len(matches) == 1:
            out[c] = matches[0]
    return out


__all__ = [
    "MODE_KEYS",
    "SESSION_OVERWRITE_MODE",
    "WriteMode",
    "case_renames",
    "parse_replace_where",
    "parse_write_mode",
]
