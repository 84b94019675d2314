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

from mergetable.core.txn import TXN_PREFIX, Txn
from mergetable.metadata.models import Snapshot


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


__all__ = ["carried_properties", "committed_version", "txn_versions"]
