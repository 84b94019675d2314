"""Several streams produced by a thread pool and consumed one after another, with bounded look-ahead.

Each item's stream is produced by one worker thread into a small queue; the consumer drains the streams in
item order. At most ``workers`` streams are open at once and each runs at most ``depth`` results ahead of
the consumer, so memory stays bounded however large a stream is. pyarrow releases the GIL while it decodes,
so the workers use every core. Closing the consumer stops the producers at their next result.

A producer that stops closes its source (a generator's ``finally`` blocks run, a reader is released) in its own
thread, and closing a consumer waits for that: when a reader stops early (a ``--limit``, a closed pipe), no
thread is left inside Arrow's C++ code. A thread still there when the interpreter finalizes is ended by force,
and unwinding C++ frames that way aborts the process ("terminate called without an active exception").
"""

from __future__ import annotations

import atexit
import functools
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from mergetable.core.threads import process_pool

T = TypeVar("T")
R = TypeVar("R")

_DONE = object()
_POLL_SECONDS = 0.05
KEY_RANGE_MIN_CORES = 3
"""Cores from which a read in this process cuts large sections into key ranges by default (see
:func:`in_process_key_ranges`)."""


def in_process_key_ranges(cores: int | None = None) -> bool:
    """Whether a read in this process cuts a section above ``split.target-size`` into key ranges merged by
    threads of their own, when the caller gives no split size (``cores``: this machine's, by default).

    A section read whole still uses every core: its runs are decoded ahead by threads of their own and by
    Arrow's, while one thread merges. A cut adds a merging thread but decodes each run's row group at every cut
    twice. On two cores that costs more than it gains (20M rows in one bucket, six runs: ``read()`` 0.80 s
    whole against 0.90 s in two ranges, ``scan()`` 1.54 s against 1.81 s); with more cores the merge becomes
    the longest path and ranges pay. Spark tasks and :meth:`mergetable.Table.plan` always cut.

    >>> in_process_key_ranges(2), in_process_key_ranges(8)
    (False, True)
    """
    return (cores if cores is not None else os.cpu_count() or 1) >= KEY_RANGE_MIN_CORES


def merge_threads(cores: int | None = None) -> int:
    """Windows of one section merged at once by :func:`ordered_map` (``cores``: this machine's, by default).

    The windows of a section (:mod:`mergetable.read.windows`) hold disjoint keys, so they merge on threads of their
    own: the one thread that cuts windows only slices decoded row groups, and each row group is decoded once,
    whatever the core count (a key-range cut decodes the row groups at its edge twice). Below
    :data:`KEY_RANGE_MIN_CORES` cores a window is merged by the thread that cut it.

    >>> merge_threads(2), merge_threads(16)
    (1, 16)
    """
    n = cores if cores is not None else os.cpu_count() or 1
    return n if in_process_key_ranges(n) else 1


def _merge_pool() -> ThreadPoolExecutor:
    """One pool of merge threads for the process, at least one per core; a caller's ``ahead`` bounds how many it
    uses."""
    return process_pool("merge", max(8, os.cpu_count() or 1))


def ordered_map(fn: Callable[[T], R], items: Iterable[T], ahead: int) -> Iterator[R]:
    """``fn(item)`` for every item, in order, with at most ``ahead`` calls running or done ahead of the consumer on
    the process's merge pool (``ahead <= 1``: in this thread). ``items`` is consumed in the calling thread only.

    >>> list(ordered_map(lambda x: x * x, range(6), 3))
    [0, 1, 4, 9, 16, 25]
    """
    if ahead <= 1:
        yield from map(fn, items)
        return
    pool = _merge_pool()
    pending: deque[Future[R]] = deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for f in pending:
            f.cancel()
        wait(pending)


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def ordered_streams(
    items: Iterable[T], produce: Callable[[T], Iterator[R]], workers: int, depth: int | None = 2
) -> Iterator[R]:
    """Everything ``produce(item)`` yields, for every item in order, produced by ``workers`` threads
    (``depth=None``: each stream runs ahead as far as it can, for a consumer that keeps everything anyway)."""
    stop = threading.Event()

    def drain(q: queue.Queue[Any]) -> Iterator[R]:
        while True:
            value = q.get()
            if value is _DONE:
                return
            if isinstance(value, _Failed):
                raise value.error
            yield value

    open_streams: deque[queue.Queue[Any]] = deque()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mergetable-read") as pool:
        try:
            for item in items:
                q: queue.Queue[Any] = queue.Queue(maxsize=0 if depth is None else max(1, depth))
                pool.submit(_fill, q, stop, functools.partial(produce, item))
                open_streams.append(q)
                if len(open_streams) >= workers:
                    yield from drain(open_streams.popleft())
            while open_streams:
                yield from drain(open_streams.popleft())
        finally:
            stop.set()


class Prefetched(Iterator[R]):
    """An iterator read ahead by a daemon thread into a queue of ``depth`` items.

    The thread holds only the source iterator, never this object. :meth:`close` stops the thread at its next item
    (it never blocks for longer than a poll interval) and waits for it to close the source and end; dropping this
    object stops it too, without waiting, and whatever is still running when the interpreter exits is stopped
    and waited for then (see :func:`_stop_prefetchers`).

    >>> ahead = Prefetched(iter(range(1000)), 4)
    >>> next(ahead), next(ahead)
    (0, 1)
    >>> ahead.close()
    >>> list(ahead), ahead.running
    ([], False)
    """

    def __init__(self, source: Iterator[R], depth: int, name: str = "mergetable-prefetch") -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._done = False
        args = (self._queue, self._stop, lambda: source)
        self._thread = threading.Thread(target=_fill_tracked, args=args, name=name, daemon=True)
        with _LIVE_LOCK:
            _LIVE[self._thread] = self._stop
        self._thread.start()

    @property
    def running(self) -> bool:
        """Whether the thread reading ahead is still alive."""
        return self._thread.is_alive()

    def __next__(self) -> R:
        if self._done:
            raise StopIteration
        value = self._queue.get()
        if value is _DONE:
            self._done = True
            raise StopIteration
        if isinstance(value, _Failed):
            self._done = True
            raise value.error
        return value

    def close(self) -> None:
        """Stop the thread at its next item and wait until it has closed the source and ended."""
        self._done = True
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def __del__(self) -> None:
        self._stop.set()


_LIVE: dict[threading.Thread, threading.Event] = {}
"""The prefetching threads still running, with the event that stops each."""
_LIVE_LOCK = threading.Lock()


def _fill_tracked(q: queue.Queue[Any], stop: threading.Event, source: Callable[[], Iterable[Any]]) -> None:
    """:func:`_fill` in a thread listed in :data:`_LIVE` while it runs."""
    try:
        _fill(q, stop, source)
    finally:
        with _LIVE_LOCK:
            _LIVE.pop(threading.current_thread(), None)


@atexit.register
def _stop_prefetchers() -> None:
    """Stop every prefetching thread still running and wait for it, before the interpreter finalizes (which ends
    daemon threads by force, aborting the process when one is inside C++ code)."""
    with _LIVE_LOCK:
        live = list(_LIVE.items())
    for _, stop in live:
        stop.set()
    for thread, _ in live:
        thread.join()


def _fill(q: queue.Queue[Any], stop: threading.Event, source: Callable[[], Iterable[Any]]) -> None:
    """Put every item of ``source()`` into ``q``, then ``_DONE`` (or the error that ended it), until ``stop``; then
    close the source's iterator (a generator's ``finally`` blocks run, a reader is released) in this thread."""

    def put(value: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(value, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    items: Iterator[Any] | None = None
    outcome: Any = _DONE
    try:
        items = iter(source())
        for item in items:
            if not put(item):
                break
    except BaseException as exc:  # handed to the consumer, which raises it
        outcome = _Failed(exc)
    try:
        close = getattr(items, "close", None)
        if close is not None:
            close()
    except BaseException as exc:
        if outcome is _DONE:
            outcome = _Failed(exc)
    put(outcome)
