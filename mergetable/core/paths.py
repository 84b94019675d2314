"""Where every file of a table lives (relative to the table root).

```
schema/schema-<id>                     snapshot/snapshot-<id>, snapshot/LATEST, snapshot/EARLIEST
manifest/manifest-<uuid>-<n>           manifest/manifest-list-<uuid>-<n>
tag/tag-<name>                         consumer/consumer-<id>
[<k>=<v>/…]/bucket-<N>/data-<uuid>-<n>.parquet
[<k>=<v>/…]/bucket-<N>/changelog-<uuid>-<n>.parquet
```
"""

from __future__ import annotations

import re
import urllib.parse
import uuid
from collections.abc import Sequence

SCHEMA_DIR = "schema"
SNAPSHOT_DIR = "snapshot"
MANIFEST_DIR = "manifest"
TAG_DIR = "tag"
CONSUMER_DIR = "consumer"
LATEST = "LATEST"
EARLIEST = "EARLIEST"
_TAG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def schema_path(schema_id: int) -> str:
    return f"{SCHEMA_DIR}/schema-{schema_id}"


def snapshot_path(snapshot_id: int) -> str:
    return f"{SNAPSHOT_DIR}/snapshot-{snapshot_id}"


def tag_path(name: str) -> str:
    return f"{TAG_DIR}/tag-{name}"


def valid_tag_name(name: str) -> bool:
    return bool(_TAG_NAME.match(name)) and not name.isdigit()


def manifest_path(name: str) -> str:
    return f"{MANIFEST_DIR}/{name}"


def new_file_name(prefix: str, counter: int = 0, extension: str = "") -> str:
    """``<prefix><uuid>-<n><extension>``, Paimon's data/manifest naming."""
    return f"{prefix}{uuid.uuid4()}-{counter}{extension}"


def escape_partition_value(value: str) -> str:
    return urllib.parse.quote(value, safe=" -_.~:+@,;")


def partition_dir(keys: Sequence[str], values: Sequence[str | None], default_name: str) -> str:
    """Hive-style ``k1=v1/k2=v2`` directory (null → ``default_name``); empty for an unpartitioned table."""
    parts = []
    for k, v in zip(keys, values, strict=True):
        parts.append(f"{escape_partition_value(k)}={default_name if v is None else escape_partition_value(v)}")
    return "/".join(parts)


def bucket_dir(partition: str, bucket: int) -> str:
    return f"{partition}/bucket-{bucket}" if partition else f"bucket-{bucket}"


def data_file_path(partition: str, bucket: int, file_name: str) -> str:
    return f"{bucket_dir(partition, bucket)}/{file_name}"
