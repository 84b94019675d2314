"""``metadata.stats-mode``: how much of each value column's statistics a data file records (Paimon's modes).

``none`` records nothing, ``counts`` only null counts, ``full`` min, max and null count as they are, and
``truncate(N)`` (the default, ``truncate(16)``) cuts string and binary min/max to N characters or bytes:
the min to its prefix (which is still ≤ every value), the max to its prefix with the last character or
byte incremented (still ≥ every value; no bound at all when no position can be incremented). A column
can have its own mode with ``fields.<column>.stats-mode``. Key columns always keep full statistics, so
key-range pruning stays exact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mergetable.core.errors import OptionsError

DEFAULT_STATS_MODE = "truncate(16)"
_TRUNCATE = re.compile(r"^truncate\((\d+)\)$")
_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


@dataclass(frozen=True)
class StatsMode:
    """``kind``: none, counts, full or truncate; ``length`` for truncate."""

    kind: str
    length: int = 0

    @property
    def bounds(self) -> bool:
        """Whether min and max are recorded."""
        return self.kind in ("full", "truncate")

    @property
    def counts(self) -> bool:
        """Whether null counts are recorded."""
        return self.kind != "none"


def parse_stats_mode(value: str, option: str = "metadata.stats-mode") -> StatsMode:
    text = value.strip().lower()
    if text in ("none", "counts", "full"):
        return StatsMode(text)
    m = _TRUNCATE.match(text)
    if m is None or int(m.group(1)) < 1:
        raise OptionsError(option, f"invalid value '{value}': expected none, counts, full or truncate(<n >= 1>)")
    return StatsMode("truncate", int(m.group(1)))


def truncate_min(value: str | bytes, length: int) -> str | bytes:
    """A lower bound of ``value`` of at most ``length`` characters (bytes for binary): its prefix."""
    return value[:length]


def truncate_max(value: str | bytes, length: int) -> str | bytes | None:
    """An upper bound of ``value`` of at most ``length`` characters (bytes), or None when there is none."""
    if len(value) <= length:
        return value
    if isinstance(value, bytes):
        for i in range(length - 1, -1, -1):
            if value[i] < 0xFF:
                return value[:i] + bytes([value[i] + 1])
        return None
    for i in range(length - 1, -1, -1):
        cp = ord(value[i]) + 1
        if cp in _SURROGATES:
            cp = _SURROGATES.stop
        if cp <= _MAX_CODE_POINT:
            return value[:i] + chr(cp)
    return None
