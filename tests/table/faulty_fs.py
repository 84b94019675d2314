"""A file system wrapper that injects storage faults at chosen calls (for commit fault-injection tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Calls that reach storage. Everything else is passed through untouched.
STORAGE_CALLS = frozenset({"pipe_file", "cat_file", "exists", "ls", "rm_file", "find", "open", "info", "size"})
READS = frozenset({"cat_file", "exists", "ls", "find", "info", "size"})
# fail: refused before it reaches storage; lost: applied, then the response is lost;
# ambiguous: applied, then the client times out; readback: lost, then the next reads fail too;
# unknown: lost, then every read fails until the faults are cleared.
MODES = ("fail", "lost", "ambiguous", "readback", "unknown")
# A read that was "applied" and then failed is just a failed read: those modes target writes only.
WRITES_ONLY = frozenset({"lost", "ambiguous", "readback"})


class FaultyFS:
    """Delegates to ``fs``; call number ``at`` (counting storage calls from 0) fails as ``mode`` says."""

    def __init__(self, fs: Any) -> None:
        self._fs = fs
        self.calls: list[tuple[str, str]] = []
        self.targets = 0
        self.at: int | None = None
        self.mode = "fail"
        self.fired: tuple[str, str] | None = None
        self.failing_reads = 0

    def arm(self, at: int | None, mode: str = "fail") -> None:
        """Fail the ``at``-th storage call (counting only writes for :data:`WRITES_ONLY` modes)."""
        self.calls, self.at, self.mode, self.fired, self.failing_reads, self.targets = [], at, mode, None, 0, 0

    def disarm(self) -> None:
        """Storage works again (``fired`` still tells which call failed)."""
        self.at, self.failing_reads = None, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._fs, name)
        if name not in STORAGE_CALLS or not callable(attr):
            return attr
        return self._wrap(name, attr)

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, str(args[0]) if args else ""))
            if name in READS and self.failing_reads:
                self.failing_reads -= 1
                raise ConnectionResetError(f"injected: read {name} failed")
            if self.mode in WRITES_ONLY and name in READS:
                return fn(*args, **kwargs)
            index = self.targets
            self.targets += 1
            if index != self.at:
                return fn(*args, **kwargs)
            self.fired = self.calls[-1]
            if self.mode == "fail" or name == "open":
                raise ConnectionRefusedError(f"injected: {name} refused before it was sent")
            result = fn(*args, **kwargs)
            if self.mode == "readback":
                self.failing_reads = 2
            elif self.mode == "unknown":
                self.failing_reads = 10**9
            if self.mode == "ambiguous":
                raise TimeoutError(f"injected: {name} timed out after it was applied")
            del result
            raise ConnectionResetError(f"injected: the response of {name} was lost")

        return call
