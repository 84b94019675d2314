"""A table's options as ``Table.options`` returns them: every option, printed as a table of those that differ.

:class:`OptionsView` is a plain ``dict`` (every stored option, defaults included) whose ``repr`` and notebook view
(``_repr_html_``) show only the options whose value differs from mergetable's default, as two columns, so that a
user sees at a glance how a table was configured.

>>> opts = OptionsView({**TableOptions().to_map(), "bucket": "4", "merge-engine": "aggregation"})
>>> opts["bucket"], len(opts) > 2
('4', True)
>>> print(repr(opts))
option        value
------------  -----------
bucket        4
merge-engine  aggregation
"""

from __future__ import annotations

import html

from mergetable.core.options import TableOptions


class OptionsView(dict[str, str]):
    """Every option of a table; prints (``repr``, ``_repr_html_``) only those that differ from the defaults."""

    def non_default(self) -> dict[str, str]:
        """The options whose value differs from mergetable's default, sorted by name."""
        # a new table's bucket is -1 (dynamic buckets with a primary key, no buckets without)
        defaults = {**TableOptions().to_map(), "bucket": "-1"}
        return {k: v for k, v in sorted(self.items()) if defaults.get(k) != v}

    def __repr__(self) -> str:
        rows = self.non_default()
        if not rows:
            return "(every option at its default)"
        width = max(len("option"), *(len(k) for k in rows))
        value_width = max(len("value"), *(len(v) for v in rows.values()))
        lines = [f"{'option'.ljust(width)}  value", f"{'-' * width}  {'-' * value_width}"]
        lines += [f"{k.ljust(width)}  {v}" for k, v in rows.items()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = self.non_default()
        body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in rows.items())
        caption = f"{len(rows)} of {len(self)} options differ from their defaults"
        return (
            f"<table><caption>{caption}</caption><thead><tr><th>option</th><th>value</th></tr></thead>"
            f"<tbody>{body}</tbody></table>"
        )


__all__ = ["OptionsView"]
