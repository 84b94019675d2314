"""Option values as Paimon writes them: memory sizes, durations, booleans, integers and lists.

Each parser takes the string of an option map (or a value already typed) and returns the value, or raises a
``ValueError`` that the option model turns into an :class:`~mergetable.core.errors.OptionsError` naming the key.

>>> parse_memory_size("256 mb"), parse_duration_ms("1 h"), parse_bool("TRUE"), parse_list("a, b")
(268435456, 3600000, True, ('a', 'b'))
"""

from __future__ import annotations

import re
from fractions import Fraction

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30

_SIZE_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "k": KIB, "kb": KIB, "kib": KIB,
    "m": MIB, "mb": MIB, "mib": MIB,
    "g": GIB, "gb": GIB, "gib": GIB,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
}  # fmt: skip
_DURATION_UNITS_MS = {
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "": 1000, "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}  # fmt: skip
_NUMBER_UNIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


INT64_MAX = 2**63 - 1
"""The largest value of an integer option (Paimon's ``long``); memory sizes and durations included."""
INT32_MAX = 2**31 - 1
"""The largest ``bucket`` (Paimon's ``int``)."""


def _in_int64(value: object, number: int) -> int:
    """``number`` (parsed from ``value``) when it fits a signed 64-bit integer, else a ``ValueError``.

    >>> _in_int64("10", 10)
    10
    >>> _in_int64("1e30", 10**30)
    Traceback (most recent call last):
    ...
    ValueError: '1e30' is out of range: at most 9223372036854775807
    """
    if not -INT64_MAX - 1 <= number <= INT64_MAX:
        raise ValueError(f"'{value}' is out of range: at most {INT64_MAX}")
    return number


def parse_memory_size(value: object) -> int:
    """Parse ``256mb``, ``128 MB``, ``1g`` or a plain byte count into bytes (at most :data:`INT64_MAX`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _in_int64(value, value)
    m = _NUMBER_UNIT.match(str(value))
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"'{value}' is not a memory size (e.g. 256mb, 1 gb, 1048576)")
    return _in_int64(value, _scaled(m.group(1), _SIZE_UNITS[m.group(2).lower()]))


def parse_duration_ms(value: object) -> int:
    """Parse ``10 s``, ``10ms``, ``1h``, ``1 min`` (a bare number means seconds, as in Paimon) into milliseconds
    (at most :data:`INT64_MAX`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _in_int64(value, value)
    m = _NUMBER_UNIT.match(str(value))
    if not m or m.group(2).lower() not in _DURATION_UNITS_MS:
        raise ValueError(f"'{value}' is not a duration (e.g. 10 s, 500ms, 1 h)")
    return _in_int64(value, _scaled(m.group(1), _DURATION_UNITS_MS[m.group(2).lower()]))


def _scaled(number: str, unit: int) -> int:
    """``number`` (digits, maybe with a fraction) times ``unit``, rounded down, exactly however large."""
    return int(Fraction(number) * unit)


def parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"'{value}' is not a boolean (true or false)")


def parse_int(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError(f"'{value}' is not an integer")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"'{value}' is not an integer") from None
    return _in_int64(value, number)


def parse_list(value: object) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(str(v).strip() for v in value)
    return tuple(part.strip() for part in str(value).split(",") if part.strip())


__all__ = [
    "GIB",
    "INT32_MAX",
    "INT64_MAX",
    "KIB",
    "MIB",
    "parse_bool",
    "parse_duration_ms",
    "parse_int",
    "parse_list",
    "parse_memory_size",
]
