"""Idempotent writes: application transaction versions (Delta's ``txnAppId`` / ``txnVersion``).

A write may name an application id and a version. The commit tier records, per application id, the
highest version committed so far in the snapshot's ``properties`` (key ``txn.<app id>``), and **every**
snapshot carries the whole map forward from its parent, so the latest snapshot always holds it: snapshot
expiration, compaction and concurrent writers never lose it. A write whose version is not above the
recorded one for its application is skipped: the check runs inside the commit retry loop, against the
snapshot the attempt builds on, so two racing writes of the same (app id, version) commit exactly once.

Streaming sinks use the same mechanism with the query's commit user as application id and the
micro-batch id as version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mergetable.core.errors import OptionsError
from mergetable.metadata.models import Snapshot

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


def txn_versions(snapshot: Snapshot | None) -> dict[str, int]:
    """Every application's last committed version, as recorded in ``snapshot``."""
    props: Mapping[str, str] = (snapshot.properties or {}) if snapshot is not None else {}
    out: dict[str, int] = {}
    for k, v in props.items():
        if k.startswith(TXN_PREFIX) and v.isdigit():
            out[k[len(TXN_PREFIX) :]] = int(v)
    return out


def committed_version(snapshot: Snapshot | None, app_id: str) -> int | None:
    """The last version of ``app_id`` committed up to ``snapshot`` (None: never)."""
    return txn_versions(snapshot).get(app_id)


def carried_properties(
    parent: Snapshot | None, properties: Mapping[str, str] | None, txn: Txn | None
) -> dict[str, str] | None:
    """The properties of a snapshot built on ``parent``: its own, the parent's transaction versions, and ``txn``."""
    out = {TXN_PREFIX + app: str(v) for app, v in txn_versions(parent).items()}
    out.update(properties or {})
    if txn is not None:
        out[txn.key] = str(txn.version)
    return out or None


__all__ = [
    "TXN_PREFIX",
    "Txn",
    "carried_properties",
    "committed_version",
    "make_txn",
    "txn_versions",
]
