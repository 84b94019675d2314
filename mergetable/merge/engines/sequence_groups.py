"""Partial-update configuration: sequence groups, aggregate functions and delete options.

``fields.<g1>[,<g2>…].sequence-group = 'f1,f2,…'`` protects ``f1, f2 …`` with the ordering fields
``g1, g2 …`` (compared lexicographically, NULL lowest). Parsing validates exactly what Paimon's
``PartialUpdateMergeFunction.Factory`` validates, with its messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from mergetable.core.errors import OptionsError
from mergetable.core.options import DeleteBehavior
from mergetable.core.schema import TableSchema
from mergetable.merge.aggregates.base import ALIASES, AggFunction, create_function
from mergetable.merge.validation import field_function, split_field_key

PARTIAL_UPDATE_DELETE = "\n".join(
    [
        "By default, Partial update can not accept delete records, you can choose one of the following solutions:",
        "1. Configure 'ignore-delete' to ignore delete records.",
        "2. Configure 'partial-update.remove-record-on-delete' to remove the whole row when receiving delete records.",
        "3. Configure 'sequence-group's to retract partial columns. Also configure "
        "'partial-update.remove-record-on-sequence-group' to remove the whole row when receiving deleted records "
        "of `specified sequence group`.",
    ]
)
_PK_ERROR = (
    "The sequence-group '{key}' contains primary key field '{field}', which is not allowed. "
    "Primary key columns cannot be put in sequence-group."
)
_REMOVE_ON_DELETE = "partial-update.remove-record-on-delete"
_REMOVE_ON_GROUP = "partial-update.remove-record-on-sequence-group"
_CONFLICT = "{} and {} have conflicting behavior so should not be enabled at the same time."


@dataclass(frozen=True)
class SequenceGroup:
    """One ``fields.<ordering>.sequence-group`` option."""

    option: str
    ordering: tuple[str, ...]
    protected: tuple[str, ...]


@dataclass
class PartialUpdateConfig:
    """Everything the partial-update engine needs to know, validated."""

    groups: list[SequenceGroup] = field(default_factory=list)
    group_of: dict[str, int] = field(default_factory=dict)
    functions: dict[str, AggFunction] = field(default_factory=dict)
    ignore_retract: dict[str, bool] = field(default_factory=dict)
    ignore_delete: bool = False
    remove_on_delete: bool = False
    remove_on_group: frozenset[str] = frozenset()

    @property
    def ordering_fields(self) -> set[str]:
        """Every ordering field of every group."""
        return {f for g in self.groups for f in g.ordering}

    @classmethod
    def parse(cls, schema: TableSchema) -> PartialUpdateConfig:
        """Parse and validate (raises :class:`OptionsError` naming the option)."""
        opts = schema.table_options
        names = list(schema.column_names)
        pk = set(schema.primary_keys)
        cfg = cls(
            ignore_delete=opts.ignore_delete or opts.delete_behavior == DeleteBehavior.IGNORE,
            remove_on_delete=opts.partial_update_remove_record_on_delete,
        )
        registered: set[str] = set()
        protected_all: set[str] = set()
        types = {f.name: f.type for f in schema.arrow_schema}
        for key in sorted(opts.field_options):
            ordering, suffix = split_field_key(key)
            if suffix != "sequence-group":
                continue
            for f in ordering:
                _require(f, names, key)
            protected = tuple(p.strip() for p in opts.field_options[key].split(",") if p.strip())
            index = len(cfg.groups)
            for p in protected:
                _require(p, names, key)
                if p in pk:
                    raise OptionsError(key, _PK_ERROR.format(key=key, field=p))
                if p in registered:
                    raise OptionsError(key, f"Field {p} is defined repeatedly by multiple groups: {key}")
                registered.add(p)
                protected_all.add(p)
                cfg.group_of[p] = index
            for f in ordering:
                if f in pk:
                    raise OptionsError(key, _PK_ERROR.format(key=key, field=f))
                if pa.types.is_nested(types[f]):
                    raise OptionsError(
                        key,
                        f"Field '{f}' with type {types[f]} cannot be used as a sequence-group ordering field in "
                        f"option '{key}'.",
                    )
                registered.add(f)
                cfg.group_of[f] = index
            cfg.groups.append(SequenceGroup(key, tuple(ordering), protected))
        ordering_all = cfg.ordering_fields
        for c in names:
            if c in ordering_all or c in schema.trimmed_primary_keys:
                continue
            name, option = field_function(opts, c)
            if c in pk:
                name, option = "primary-key", option
            if name is None:
                continue
            canonical = ALIASES.get(name.strip().lower(), name.strip().lower())
            if canonical not in ("last_non_null_value", "primary-key") and c not in protected_all:
                raise OptionsError(
                    option, f"Must use sequence group for aggregation functions but not found for field {c}."
                )
            cfg.functions[c] = create_function(name, c, types[c], opts, option)
            cfg.ignore_retract[c] = (opts.field_option(c, "ignore-retract") or "").strip().lower() == "true"
        remove_on_group = opts.partial_update_remove_record_on_sequence_group
        if cfg.remove_on_delete and opts.ignore_delete:
            raise OptionsError(
                "ignore-delete",
                _CONFLICT.format("ignore-delete", _REMOVE_ON_DELETE),
            )
        if remove_on_group and opts.ignore_delete:
            raise OptionsError(
                "ignore-delete",
                _CONFLICT.format("ignore-delete", _REMOVE_ON_GROUP),
            )
        if cfg.remove_on_delete and cfg.groups:
            raise OptionsError(
                _REMOVE_ON_DELETE,
                _CONFLICT.format("sequence-group", _REMOVE_ON_DELETE),
            )
        if remove_on_group:
            if not set(remove_on_group) <= ordering_all:
                raise OptionsError(
                    _REMOVE_ON_GROUP,
                    f"field '{','.join(remove_on_group)}' defined in '{_REMOVE_ON_GROUP}' option must be part of "
                    "sequence groups",
                )
            cfg.remove_on_group = frozenset(remove_on_group)
        return cfg


def _require(name: str, names: list[str], key: str) -> None:
    if name not in names:
        raise OptionsError(key, f"Field {name} can not be found in table schema")


__all__ = ["PARTIAL_UPDATE_DELETE", "PartialUpdateConfig", "SequenceGroup"]
