"""Flushing several buckets at once: their sort and Parquet encoding run on threads (Arrow releases the GIL).

A writer's flush turns each buffered bucket into a sorted run of level-0 files. The buckets are independent,
so :func:`bounded_map` runs them on a process-wide pool, one per core at most, in a memory budget: a bucket in
flight holds its rows and the sorted copy it makes, so a bucket starts only while the copies of those in flight
fit in what the write buffer leaves free (the first one always starts, as a flush of one bucket at a time did);
a finished bucket gives back its rows and its copy. Results come back in the order the items were given.

On 2 cores shared with other work it does not pay: a 200k-row merge into 4 buckets (one operation in a fresh
process) took 0.134 s against 0.139 s one bucket after the other, but 0.156 s of CPU against 0.140 s, and a
5M-row merge into 20M rows peaked 28 MB higher; so below :data:`FLUSH_MIN_CORES` cores (as the read side's merge
threads, :func:`mergetable.read.parallel.merge_threads`) the buckets are written one after the other.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import TypeVar

from mergetable.core.threads import process_pool

T = TypeVar("T")
R = TypeVar("R")

FLUSH_MIN_CORES = 3
"""Below this many cores a flush writes one bucket after the other (see the module docstring)."""


def flush_threads(cores: int | None = None) -> int:
    """Buckets flushed at once (``cores``: this machine's, by default): one per core from :data:`FLUSH_MIN_CORES`.

    >>> flush_threads(2), flush_threads(16)
    (1, 16)
    """
    n = cores if cores is not None else os.cpu_count() or 1
    return n if n >= FLUSH_MIN_CORES else 1


def bounded_map(
    fn: Callable[[T], R], items: Sequence[T], sizes: Sequence[int], free: int, threads: int | None = None
) -> Iterator[R]:
    """``fn`` of each item, in order, at most ``threads`` (default :func:`flush_threads`) at once and only while
    ``free`` bytes hold the copies in flight: an item of ``sizes[i]`` bytes takes that much while it runs and
    gives back twice as much when done (its input and its copy). One item always runs. After an item fails no
    other starts; those running are waited for and their results handed out, then the first error is raised.

    >>> list(bounded_map(lambda x: x * 2, [1, 2, 3], [10, 10, 10], free=15, threads=2))
    [2, 4, 6]
    """
    threads = min(threads or flush_threads(), len(items))
    pending = deque(zip(items, sizes, strict=True))  # popped as they start: a finished item is not held here
    del items
    if threads <= 1:
        while pending:
            yield fn(pending.popleft()[0])
        return
    pool = process_pool("flush", max(8, os.cpu_count() or 1))  # one for the process; ``threads`` bound its use
    running: deque[tuple[Future[R], int]] = deque()
    error: BaseException | None = None
    while pending or running:
        while pending and error is None and len(running) < threads and (not running or pending[0][1] <= free):
            item, size = pending.popleft()
            free -= size
            running.append((pool.submit(fn, item), size))
            del item
        if not running:
            break
        future, size = running.popleft()
        try:
            result = future.result()
        except BaseException as exc:  # raised once the others are done: their results are still handed out
            error = error or exc
            continue
        finally:
            free += 2 * size
            del future
        yield result
        del result
    if error is not None:
        raise error


__all__ = ["FLUSH_MIN_CORES", "bounded_map", "flush_threads"]
