"""The commands' ``--help``: a one-line summary and runnable examples (shown as the help's epilog).

Every command of the ``mergetable`` parser is added through :func:`add_command`, which looks up its examples
in :data:`EXAMPLES`; a command without examples is a programming error, so ``mergetable COMMAND --help``
always ends with at least one command line to copy.
"""

from __future__ import annotations

import argparse
from typing import Any

EXAMPLES: dict[str, tuple[str, ...]] = {
    "create": (
        "mergetable create orders --column 'id BIGINT' --column 'dt STRING' --column 'amount DECIMAL(12, 2)' \\\n"
        "    --primary-key id,dt --partition-by dt --option bucket=4",
        "mergetable create orders --like orders.parquet --primary-key id",
        "mergetable create events --like events.parquet --partition-by dt   # no key: an append table",
    ),
    "write": (
        "mergetable write orders day1.parquet day2.parquet",
        "mergetable write orders all.parquet --mode overwrite   # replaces every row, as mt.write_table",
        "mergetable write orders new.csv --mode overwrite --partition dt=2024-05-01   # only this partition",
        "mergetable write orders rows.jsonl --primary-key id --partition-by dt   # creates the table if missing",
    ),
    "delete": (
        "mergetable delete orders --filter 'dt=2024-05-01' --filter 'amount<0'",
        "mergetable delete orders --filter 'id>=1000' --dry-run",
    ),
    "count": ("mergetable count orders", "mergetable count orders --filter 'dt=2024-05-01' --tag v1"),
    "history": ("mergetable history orders --limit 10", "mergetable --json history orders --no-compaction"),
    "schema": ("mergetable schema orders", "mergetable schema orders --snapshot 3 --json"),
    "describe": ("mergetable describe orders", "mergetable describe orders --json"),
    "compact": (
        "mergetable compact orders",
        "mergetable compact orders --full --partition dt=2024-05-01",
        "mergetable compact events --order-by user,ts --strategy zorder   # an append table: cluster its files",
    ),
    "rescale": (
        "mergetable rescale orders --bucket 8   # every partition, and the table's bucket option",
        "mergetable rescale orders --bucket 16 --partition dt=2024-05-01   # only this partition",
    ),
    "snapshots": ("mergetable snapshots orders --limit 5",),
    "files": ("mergetable files orders --snapshot 3",),
    "read": (
        "mergetable read orders --filter 'dt=2024-05-01' --columns id,amount --limit 10",
        "mergetable read orders --format parquet --output orders.parquet",
    ),
    "changelog": ("mergetable changelog orders 3 5 --format json",),
    "consumers": ("mergetable consumers orders", "mergetable consumers orders --reset etl --snapshot 7"),
    "tags": ("mergetable tags orders --create v1", "mergetable tags orders --delete v1"),
    "expire": ("mergetable expire orders", "mergetable expire orders --retain-last 10 --dry-run"),
    "rollback": ("mergetable rollback orders --tag v1",),
    "orphans": ("mergetable orphans orders --dry-run",),
    "alter": (
        "mergetable alter orders add-column note STRING --after amount",
        "mergetable alter orders set-option snapshot.num-retained.max=50",
    ),
}
"""Example command lines of each command, as its ``--help`` shows them."""


def epilog(command: str) -> str:
    """The ``--help`` epilog of ``command``: its examples, one per line.

    >>> print(epilog("count"))
    examples:
      mergetable count orders
      mergetable count orders --filter 'dt=2024-05-01' --tag v1
    """
    lines = "\n".join("  " + line for example in EXAMPLES[command] for line in example.split("\n"))
    return f"examples:\n{lines}"


def add_command(sub: Any, name: str, parents: list[argparse.ArgumentParser], summary: str) -> argparse.ArgumentParser:
    """Add the command ``name`` to the subcommands ``sub``, with ``summary`` and its examples in ``--help``."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        parents=parents,
        help=summary,
        description=summary[:1].upper() + summary[1:] + ".",
        epilog=epilog(name),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser
