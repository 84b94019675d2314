"""Publishing a snapshot file when storage may fail: every outcome is resolved or reported unknown.

A conditional create (``If-None-Match: *`` on object stores, ``link`` on local disk) can fail in three
ways: before it was applied (connection refused, a 5xx answer), after it was applied (the response was
lost), or in a way the client cannot tell apart. :func:`publish_snapshot_file` never guesses: after an
error it reads the file back (with retries). Our exact bytes there mean the commit landed (a snapshot
names manifests with fresh UUIDs, so no other commit can write the same bytes); other bytes mean another
commit took the id; no file means the create was not applied, and it is tried again (when every create
fails with the file confirmed absent, the storage error is raised: nothing was published). Only when the
read-backs fail too is the outcome unknown: then :class:`CommitStateUnknownError` is raised and the
caller must keep every file the snapshot references, since it may be published.
"""

from __future__ import annotations

import random
import time

from mergetable.core.errors import CommitStateUnknownError
from mergetable.core.fileio import FileIO

PUBLISH_ATTEMPTS = 4
READ_BACK_ATTEMPTS = 4
_BASE_WAIT_S = 0.02


def _pause(attempt: int) -> None:
    time.sleep(_BASE_WAIT_S * (2**attempt) * random.uniform(0.5, 1.0))


def read_back(fileio: FileIO, path: str, attempts: int = READ_BACK_ATTEMPTS) -> bytes | None:
    """The bytes at ``path`` (None when it does not exist), retrying transient read failures.

    Raises:
        CommitStateUnknownError: Every read failed, so whether the file exists is unknown.
    """
    error: BaseException | None = None
    for attempt in range(attempts):
        if attempt:
            _pause(attempt)
        try:
            return fileio.read_bytes(path)
        except FileNotFoundError:
            return None
        except Exception as exc:  # storage failure: try again
            error = exc
    raise CommitStateUnknownError(f"cannot read back {path} after {attempts} attempts: {error}") from error


def publish_snapshot_file(fileio: FileIO, path: str, data: bytes, attempts: int = PUBLISH_ATTEMPTS) -> bool:
    """Create ``path`` with ``data`` unless it exists. True: ours is published; False: another file holds it.

    Raises:
        CommitStateUnknownError: Storage kept failing and whether ``data`` was published cannot be told;
            the caller must not delete anything the snapshot references.
        Exception: The last create's error, when every create failed and the file is confirmed absent
            (nothing was published).
    """
    failed = False
    error: BaseException | None = None
    for attempt in range(attempts):
        if attempt:
            _pause(attempt)
        try:
            created = fileio.write_if_absent(path, data)
        except Exception as exc:  # applied or not: find out below
            failed, error = True, exc
        else:
            if created:
                return True
            if not failed:  # it existed before our first try: another commit holds this id
                return False
        existing = read_back(fileio, path)
        if existing is not None:
            return existing == data
        # Not there: the create was not applied (yet). A late arrival of it makes the next create fail
        # with "exists" and the read-back above then finds our bytes.
    # Every create failed and the last read-back saw no file: nothing was published.
    assert error is not None
    raise error
