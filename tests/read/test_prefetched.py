"""An iterator read ahead by a thread: same items, errors raised to the consumer, no thread left behind."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import pytest

from mergetable.read.parallel import Prefetched


def _alive(name: str) -> int:
    return sum(1 for t in threading.enumerate() if t.name == name)


def _wait_until_gone(name: str) -> None:
    deadline = time.monotonic() + 5
    while _alive(name) and time.monotonic() < deadline:
        time.sleep(0.01)


def test_yields_every_item_in_order_and_ends() -> None:
    assert list(Prefetched(iter(range(100)), depth=3)) == list(range(100))


def test_an_error_of_the_source_reaches_the_consumer_after_the_items_before_it() -> None:
    def source() -> Iterator[int]:
        yield 1
        raise OSError("broken page")

    it = Prefetched(source(), depth=4)
    assert next(it) == 1
    with pytest.raises(OSError, match="broken page"):
        next(it)
    assert list(it) == []


@pytest.mark.parametrize("drop", [True, False])
def test_a_consumer_that_stops_early_leaves_no_thread_running(drop: bool) -> None:
    name = f"prefetch-test-{drop}"
    it = Prefetched(iter(range(10**9)), depth=2, name=name)
    assert next(it) == 0
    assert _alive(name) == 1
    if drop:
        del it
        gc.collect()
    else:
        it.close()
        assert list(it) == []
    _wait_until_gone(name)
    assert _alive(name) == 0


def test_close_waits_for_the_thread_to_close_its_source_and_end() -> None:
    """A source stopped mid-item (a slow decode) is closed, its ``finally`` run, before ``close`` returns: nothing
    is left running inside the source when a consumer that stopped early lets the process exit."""
    closed = threading.Event()
    started = threading.Event()

    def source() -> Iterator[int]:
        try:
            for i in range(10**9):
                if i == 3:
                    started.set()
                    time.sleep(0.3)  # the thread is inside an item when the consumer stops
                yield i
        finally:
            closed.set()

    it = Prefetched(source(), depth=2, name="prefetch-test-join")
    assert next(it) == 0
    assert started.wait(5)
    it.close()
    assert closed.is_set()
    assert _alive("prefetch-test-join") == 0
