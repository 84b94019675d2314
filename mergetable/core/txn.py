"""Application transactions (Delta's ``txnAppId`` / ``txnVersion``): the value and its validation.

How versions are recorded and checked at commit time: :mod:`mergetable.commit.txn`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mergetable.core.errors import OptionsError

TXN_PREFIX = "txn."


@dataclass(frozen=True)
class Txn:
    """An application transaction: ``version`` of application ``app_id`` (versions only ever grow)."""

    app_id: str
    version: int

    @property
    def key(self) -> str:
        return TXN_PREFIX + self.app_id


def make_txn(
    app_id: object, version: object, app_option: str = "txn_app_id", version_option: str = "txn_version"
) -> Txn | None:
    """A :class:`Txn` from user input (None when neither is given), with typed errors naming the option.

    >>> make_txn("job-1", "7")
    Txn(app_id='job-1', version=7)
    >>> make_txn(None, None) is None
    True
    """
    if app_id is None and version is None:
        return None
    if app_id is None or (isinstance(app_id, str) and not app_id.strip()):
        raise OptionsError(app_option, f"is required with '{version_option}' (give both or neither)")
    if version is None:
        raise OptionsError(version_option, f"is required with '{app_option}' (give both or neither)")
    if isinstance(version, bool):
        raise OptionsError(version_option, f"must be a non-negative integer, got {version!r}")
    if isinstance(version, int):
        number = version
    else:
        text = str(version).strip()
        if not text.isdigit():
            raise OptionsError(version_option, f"must be a non-negative integer, got {version!r}")
        number = int(text)
    if number < 0:
        raise OptionsError(version_option, f"must be a non-negative integer, got {version!r}")
    return Txn(str(app_id).strip(), number)


__all__ = ["TXN_PREFIX", "Txn", "make_txn"]
