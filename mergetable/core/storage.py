"""Storage options (fsspec arguments such as ``key``, ``secret``, ``endpoint_url``), parsed in one place.

They come as ``storage.<name>`` keys of an option map (the Spark data source), as a JSON object in
``storage-options``, or as ``name=value`` pairs (the command line's ``--storage-option``). Text values
``true``/``false`` become booleans and values starting with ``{`` or ``[`` are parsed as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from mergetable.core.errors import OptionsError
from mergetable.core.option_map import OptionMap

STORAGE_PREFIX = "storage."
STORAGE_JSON = "storage-options"


def storage_value(value: str) -> Any:
    """A storage option given as text, typed.

    >>> storage_value("false"), storage_value('{"region_name": "eu"}'), storage_value("http://x")
    (False, {'region_name': 'eu'}, 'http://x')
    """
    text = value.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if text.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return value
    return value


def storage_options(options: Mapping[str, str]) -> dict[str, Any] | None:
    """Storage options from ``storage.<name>`` keys and/or a JSON ``storage-options`` map (None if none).

    >>> storage_options({"path": "s3://b/t", "storage.anon": "true", "storage-options": '{"key": "k"}'})
    {'key': 'k', 'anon': True}
    """
    opts = OptionMap.of(options)
    out: dict[str, Any] = {}
    if STORAGE_JSON in opts:
        try:
            parsed = json.loads(opts[STORAGE_JSON])
        except json.JSONDecodeError as exc:
            raise OptionsError(STORAGE_JSON, f"is not a JSON object: {exc}") from None
        if not isinstance(parsed, dict):
            raise OptionsError(STORAGE_JSON, "must be a JSON object")
        out.update(parsed)
    for k, v in opts.items():
        if k.startswith(STORAGE_PREFIX) and len(k) > len(STORAGE_PREFIX):
            out[k[len(STORAGE_PREFIX) :]] = storage_value(v)
    return out or None


def key_values(items: Iterable[str], what: str) -> dict[str, str]:
    """``k=v`` items (each may hold several, comma-separated) as a map; ``what`` names them in errors."""
    out = {}
    for item in items:
        for part in item.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise OptionsError(what, f"'{part}' is not of the form key=value")
            out[key.strip()] = value.strip()
    return out


def storage_pairs(items: Iterable[str]) -> dict[str, Any] | None:
    """Storage options from ``name=value`` items (None if none).

    >>> storage_pairs(["endpoint_url=http://127.0.0.1:5000", "anon=false"])
    {'endpoint_url': 'http://127.0.0.1:5000', 'anon': False}
    """
    return {k: storage_value(v) for k, v in key_values(items, "storage-option").items()} or None


__all__ = ["STORAGE_JSON", "STORAGE_PREFIX", "key_values", "storage_options", "storage_pairs", "storage_value"]
