"""A Griffe extension of the docs site: mergetable's docstrings, written for doctest and Sphinx, read as Markdown.

* Each run of doctest lines (a ``>>>`` line and the lines up to the next blank line) is wrapped in a ``pycon``
  code fence at its own indentation, and ``# doctest:`` directives are dropped; Markdown would read the
  examples as nested quotes (and their output, ``['+I', '-D']``, as links).
* Sphinx roles (``:class:`~mergetable.Table```, ``:meth:`read```) become code spans (``Table``, ``read``).

Loaded by mkdocstrings (``mkdocs.yml``), before each docstring is parsed.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

DIRECTIVE = re.compile(r"\s*#\s*doctest:.*$")
ROLE = re.compile(r":(?:class|meth|func|mod|attr|data|exc|obj|ref):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"`{name.rsplit('.', 1)[-1] if match.group(1) else name}`"


def to_markdown(text: str) -> str:
    r"""``text`` with its doctest blocks fenced as ``pycon`` and its Sphinx roles as code spans.

    >>> to_markdown("See :class:`~a.b.Table`.\n\nExample:\n    >>> 1 + 1\n    2\nEnd.").splitlines()
    ['See `Table`.', '', 'Example:', '    ```pycon', '    >>> 1 + 1', '    2', '    ```', 'End.']
    """
    out: list[str] = []
    indent: str | None = None  # the indentation of the doctest block being fenced
    inside_fence = False
    for line in text.splitlines():
        stripped = line.lstrip()
        if indent is not None and (not stripped or not line.startswith(indent)):
            out.append(f"{indent}```")
            indent = None
        if indent is None and stripped.startswith("```"):
            inside_fence = not inside_fence
        if indent is None and not inside_fence and stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}```pycon")
        if indent is not None:
            out.append(DIRECTIVE.sub("", line))
        else:
            out.append(line if inside_fence else ROLE.sub(_role, line))
    if indent is not None:
        out.append(f"{indent}```")
    return "\n".join(out)


class DocstringMarkup(griffe.Extension):
    """Rewrites every docstring with :func:`to_markdown` before it is parsed."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
