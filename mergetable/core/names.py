"""Bare file names: what a name stored in metadata or built from an option may be.

Every path of a table is the table root joined with names mergetable made. A name that comes from
outside (an option, a manifest, a partition value) must therefore be *bare*: one path component, not
``.`` or ``..``, no separator, no control character, at most 255 bytes (the common file-name limit).
Names starting with ``.`` or ``_`` are hidden files to most engines and are never mergetable's (except
its own temporary files, see :func:`is_own_temp_name`).
"""

from __future__ import annotations

import re

from mergetable.core.errors import OptionsError

MAX_NAME_BYTES = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TEMP_SUFFIX = re.compile(r"\.[0-9a-f]{32}\.tmp$")


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a safe bare file name (None when it is)."""
    if not name:
        return "is empty"
    if name in (".", ".."):
        return f"'{name}' is not a file name"
    if "/" in name or "\\" in name:
        return "contains a path separator"
    if _CONTROL.search(name):
        return "contains a control character"
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return f"is longer than {MAX_NAME_BYTES} bytes"
    return None


def check_stored_name(name: str) -> str:
    """A file name read from metadata: bare and not hidden (a pydantic validator; ValueError otherwise)."""
    problem = name_problem(name)
    if problem is None and name[0] in "._":
        problem = "starts with '.' or '_' (a hidden file)"
    if problem is not None:
        raise ValueError(f"unsafe file name {name[:80]!r}: {problem}")
    return name


def check_name_option(option: str, value: str, leading: bool = True) -> str:
    """An option that becomes (part of) a file or directory name: bare, without ``..``, and when it starts
    a name (``leading``) not hidden.

    Raises:
        OptionsError: naming ``option``.
    """
    problem = name_problem(value)
    if problem is None and leading and is_hidden(value):
        problem = "starts with '.' or '_' (hidden files are never the table's)"
    if problem is None and ".." in value:
        problem = "contains '..'"
    if problem is not None:
        raise OptionsError(option, f"invalid value {value[:80]!r}: {problem}")
    return value


def is_hidden(name: str) -> bool:
    """Names starting with ``.`` or ``_``: other engines' metadata and users' hidden files."""
    return name[:1] in (".", "_")


def is_own_temp_name(name: str, own: str) -> bool:
    """Whether ``name`` is a temporary file mergetable writes before publishing a file named ``own``-*."""
    base = name[1:] if name.startswith(".") else name
    return bool(_TEMP_SUFFIX.search(base)) and base.startswith(own)
