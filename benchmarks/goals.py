"""One way for every benchmark to report a goal: a measured ratio (or figure), its target and PASS/MISS.

Each script calls :func:`report` for each goal it measures; the line it prints starts with ``GOAL |`` so
``run_all.py`` can gather every goal of one ``make bench`` run into the closing summary table.

    >>> report("ingest vs raw pyarrow", 1.07, 1.15)
    GOAL | ingest vs raw pyarrow | 1.07x | <= 1.15x | PASS
    True
    >>> report("peak RSS of scan() (MB)", 612.0, 500.0, unit=" MB")
    GOAL | peak RSS of scan() (MB) | 612 MB | <= 500 MB | MISS
    False
"""

from __future__ import annotations

PREFIX = "GOAL |"


def report(name: str, measured: float, target: float, unit: str = "x") -> bool:
    """Print one goal line (lower is better) and return whether it passed."""
    ok = measured <= target
    fmt = "{:.2f}" if unit == "x" else "{:.0f}"
    shown, wanted = fmt.format(measured) + unit, fmt.format(target) + unit
    print(f"{PREFIX} {name} | {shown} | <= {wanted} | {'PASS' if ok else 'MISS'}", flush=True)
    return ok


def parse(line: str) -> tuple[str, str, str, str] | None:
    """The (name, measured, target, flag) of a goal line, or None for any other line."""
    if not line.startswith(PREFIX):
        return None
    parts = [p.strip() for p in line[len(PREFIX) :].split("|")]
    if len(parts) != 4:
        return None
    return parts[0], parts[1], parts[2], parts[3]
