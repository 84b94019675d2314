"""Snapshot times and clock skew: a commit never dates its snapshot from a clock that is far off.

Snapshot times never go back (a snapshot's time is at least its predecessor's), so that time travel by
timestamp can search them. One writer whose clock is far ahead would therefore drag every later snapshot
into the future, and ``read(timestamp_ms=now)`` would pick an old snapshot. So a commit is refused with
:class:`~mergetable.core.errors.ClockSkewError`, before anything is published, when

* the latest snapshot is dated more than ``commit.max-clock-skew`` (default 1 min, as Iceberg's bound) ahead
  of this writer's clock (this clock is behind, or the one that made that snapshot was ahead), or
* this writer's clock differs by more than that from the storage's: the modification time the storage gave
  the manifest list the commit just wrote. It is checked when this clock is that far ahead of the latest
  snapshot (an idle table, or a clock running ahead) and for a table's first snapshot, so a clock running
  ahead is refused before it dates a snapshot in the future.
"""

from __future__ import annotations

from mergetable.core.errors import ClockSkewError
from mergetable.core.fileio import FileIO
from mergetable.core.options import TableOptions
from mergetable.core.read_options import iso_utc
from mergetable.metadata.models import Snapshot

DEFAULT_MAX_CLOCK_SKEW_MS = 60_000
"""``commit.max-clock-skew`` when the table does not set it: one minute, as Iceberg's bound."""
_FIX = "nothing was committed. Fix the clock, or raise 'commit.max-clock-skew'"


def max_clock_skew(options: TableOptions) -> int:
    """The table's ``commit.max-clock-skew`` in milliseconds.

    >>> max_clock_skew(TableOptions.from_map({}))
    60000
    """
    skew = options.commit_max_clock_skew
    return DEFAULT_MAX_CLOCK_SKEW_MS if skew is None else skew


def check_clock(fileio: FileIO, latest: Snapshot | None, now_ms: int, max_skew_ms: int, written: str) -> None:
    """Refuse a commit at ``now_ms`` on ``latest`` whose clock is skewed (see the module docstring); ``written``
    is a file the commit just wrote, whose storage time is compared when needed.

    >>> import tempfile, time
    >>> io = FileIO(tempfile.mkdtemp()); io.write_bytes(io.join("f"), b"")
    >>> check_clock(io, None, int(time.time() * 1000), 60_000, io.join("f"))
    >>> check_clock(io, None, int(time.time() * 1000) + 86_400_000, 60_000, io.join("f"))
    Traceback (most recent call last):
    ...
    mergetable.core.errors.ClockSkewError: this writer's clock ... is 86400 s ahead of the storage's ...
    """
    if latest is not None and latest.time_millis - now_ms > max_skew_ms:
        raise ClockSkewError(
            f"the latest snapshot {latest.id} was made at {iso_utc(latest.time_millis)}, "
            f"{(latest.time_millis - now_ms) / 1000:.0f} s after this writer's clock says it is "
            f"({iso_utc(now_ms)}): a clock is skewed, this machine's or the one that made snapshot {latest.id}; "
            f"{_FIX} (now {max_skew_ms} ms) to accept snapshot times that far apart"
        )
    if latest is not None and now_ms - latest.time_millis <= max_skew_ms:
        return
    stamp = fileio.mtime(written)
    if stamp is None:
        return
    skew = now_ms - int(stamp * 1000)
    if abs(skew) > max_skew_ms:
        side = "ahead of" if skew > 0 else "behind"
        raise ClockSkewError(
            f"this writer's clock ({iso_utc(now_ms)}) is {abs(skew) / 1000:.0f} s {side} the storage's (which "
            f"dated {written} {iso_utc(int(stamp * 1000))}); {_FIX} (now {max_skew_ms} ms) to accept it"
        )


__all__ = ["DEFAULT_MAX_CLOCK_SKEW_MS", "check_clock", "max_clock_skew"]
