"""The ``mergetable`` command line: compact a table and look inside it.

    mergetable create | write | delete URI ...                 (mergetable.cli.writes)
    mergetable count | history | schema URI ...                (mergetable.cli.info)
    mergetable compact URI [--full] [--partition k=v[,k=v]]...
    mergetable rescale URI --bucket N [--partition k=v[,k=v]]...
    mergetable describe | snapshots | files | read | changelog | tags | consumers | expire | orphans URI ...
    mergetable rollback URI --snapshot N | --tag T
    mergetable alter URI add-column | drop-column | rename-column | change-type | set-option | unset-option ...

Every command takes ``--json`` (machine-readable output) and ``--storage-option k=v`` (repeatable, passed
to fsspec, e.g. ``endpoint_url=http://…``); ``mergetable COMMAND --help`` ends with examples
(:mod:`mergetable.cli.help`). Failures never show a traceback: see :mod:`mergetable.cli.errors`
for the one-line (or JSON) error and the exit statuses; :mod:`mergetable.cli.rows` streams ``read`` output.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

import mergetable
from mergetable.cli import alter, info, progress, writes
from mergetable.cli.errors import Parser, UsageError, guarded, report
from mergetable.cli.help import add_command
from mergetable.cli.output import Output, timestamp
from mergetable.cli.rows import add_row_options, non_negative_int, write_rows
from mergetable.core.read_options import parse_filter_text
from mergetable.core.storage import key_values, storage_pairs
from mergetable.interop.describe import TableDescription, describe_table
from mergetable.metadata.models import FileKind
from mergetable.table import Table, open_table


# -- argument parsing ------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="mergetable",
        description="Create, write, compact and inspect mergetable tables.",
        epilog="Run 'mergetable COMMAND --help' for a command's options and examples.",
    )
    parser.add_argument("--version", action="version", version=f"mergetable {mergetable.__version__}")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--storage-option", action="append", default=[], metavar="K=V", help="fsspec storage option")
    common = Parser(add_help=False)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print results as JSON")
    common.add_argument(
        "--storage-option", action="append", default=argparse.SUPPRESS, metavar="K=V", help="fsspec storage option"
    )
    common.add_argument("uri", help="table location (path or fsspec URL)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    writes.register(sub, common)
    info.register(sub, common)

    p = add_command(sub, "compact", [common], "compact the table and commit one COMPACT snapshot")
    p.add_argument("--full", action="store_true", help="compact every bucket into the top level")
    p.add_argument(
        "--partition", action="append", default=[], metavar="K=V[,K=V]", help="only this partition (repeatable)"
    )
    p.add_argument("--order-by", default=None, metavar="C[,C]", help="append tables: rewrite sorted by these columns")
    p.add_argument("--strategy", choices=["order", "zorder"], default="order", help="of --order-by (default: order)")
    progress.add_progress_option(p)
    p.set_defaults(run=_compact)

    p = add_command(sub, "rescale", [common], "rewrite the table (or partitions) into N buckets in one snapshot")
    p.add_argument("--bucket", type=_positive_int, required=True, metavar="N", help="the new number of buckets")
    p.add_argument(
        "--partition", action="append", default=[], metavar="K=V[,K=V]", help="only this partition (repeatable)"
    )
    p.set_defaults(run=_rescale)

    p = add_command(sub, "describe", [common], "schema, options, latest snapshot and each bucket's LSM tree")
    p.add_argument("--buckets", type=non_negative_int, default=20, help="draw at most N buckets (0: all)")
    p.set_defaults(run=_describe)

    p = add_command(sub, "snapshots", [common], "list snapshots")
    p.add_argument("--limit", type=non_negative_int, default=None, help="only the newest N")
    p.set_defaults(run=_snapshots)

    p = add_command(sub, "files", [common], "list the live data files")
    p.add_argument("--snapshot", type=int, default=None, help="of this snapshot (default: latest)")
    p.set_defaults(run=_files)

    p = add_command(sub, "read", [common], "print rows")
    _read_options(p)
    p.add_argument("--snapshot", type=int, default=None, help="time travel to a snapshot id")
    p.add_argument("--tag", default=None, help="time travel to a tag")
    p.add_argument(
        "--timestamp", default=None, help="time travel to epoch millis or an ISO-8601 time (local if no zone)"
    )
    p.add_argument("--version", default=None, help="time travel to a tag name, else a snapshot id")
    p.set_defaults(run=_read)

    p = add_command(sub, "changelog", [common], "print the changes of snapshots (START, END]")
    p.add_argument("start", help="start snapshot id or tag (exclusive)")
    p.add_argument("end", help="end snapshot id or tag (inclusive)")
    p.add_argument("--mode", default="auto", help="incremental-between-scan-mode: auto, delta, changelog or diff")
    _read_options(p)
    p.set_defaults(run=_changelog)

    p = add_command(sub, "consumers", [common], "list, reset or delete the consumers of streaming reads")
    p.add_argument("--reset", metavar="ID", default=None, help="make consumer ID read --snapshot next")
    p.add_argument("--snapshot", type=int, default=None, help="snapshot id for --reset")
    p.add_argument("--delete", metavar="ID", default=None, help="delete a consumer")
    p.set_defaults(run=_consumers)

    p = add_command(sub, "tags", [common], "list, create or delete tags")
    p.add_argument("--create", metavar="NAME", default=None, help="tag the latest (or --snapshot) snapshot")
    p.add_argument("--snapshot", type=int, default=None, help="snapshot id for --create")
    p.add_argument("--delete", metavar="NAME", default=None, help="delete a tag")
    p.set_defaults(run=_tags)

    p = add_command(sub, "expire", [common], "expire snapshots per the table's snapshot.* options")
    p.add_argument("--older-than", default=None, help="expire snapshots older than this ISO-8601 time or epoch ms")
    p.add_argument("--retain-last", type=int, default=None, help="always keep the newest N snapshots")
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, change nothing")
    progress.add_progress_option(p)
    p.set_defaults(run=_expire)

    p = add_command(sub, "rollback", [common], "make a snapshot or tag the latest, removing later ones")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--snapshot", type=int, default=None, help="the snapshot id to roll back to")
    target.add_argument("--tag", default=None, help="the tag to roll back to")
    p.set_defaults(run=_rollback)

    p = add_command(sub, "orphans", [common], "remove files no snapshot or tag references")
    p.add_argument("--older-than-ms", type=int, default=None, help="only files older than this (default: 1 day ago)")
    p.add_argument("--dry-run", action="store_true", help="only list them")
    p.add_argument("--force", action="store_true", help="allow a cutoff younger than 1 day (commits in flight!)")
    progress.add_progress_option(p)
    p.set_defaults(run=_orphans)
    alter.register(sub, common)
    return parser


def _read_options(p: argparse.ArgumentParser) -> None:
    add_row_options(p)
    p.add_argument("--columns", default=None, help="comma-separated columns")
    p.add_argument("--filter", action="append", default=[], metavar="EXPR", help="e.g. 'id>=5' (repeatable, AND)")


def _filters(exprs: Sequence[str]) -> list[tuple[str, str, Any]] | None:
    return [parse_filter_text(e) for e in exprs] or None


def _columns(text: str | None) -> list[str] | None:
    return [c.strip() for c in text.split(",") if c.strip()] if text else None


# -- commands -------------------------------------------------------------------------------------------
def _compact(table: Table, args: argparse.Namespace, out: Output) -> None:
    partitions = [key_values([spec], "partition") for spec in args.partition] or None
    with progress.bar("compacting", "bucket", progress.wanted(args, out.as_json)) as bar:
        snap = table.compact(
            full=args.full,
            partitions=partitions,
            progress=bar,
            order_by=_columns(args.order_by),
            strategy=args.strategy,
        )
    if snap is None:
        out.emit({"snapshot": None, "buckets": 0}, "nothing to compact")
        return
    delta = table.delta_entries(snap)
    kinds = Counter(e.kind for e in delta)
    changelog = table.changelog_entries(snap)
    result = {
        "snapshot": snap.id,
        "buckets": len({(e.partition, e.bucket) for e in delta}),
        "files_deleted": kinds[FileKind.DELETE],
        "files_added": kinds[FileKind.ADD],
        "changelog_files": len(changelog),
        "full": args.full,
    }
    out.emit(
        result,
        f"compacted {result['buckets']} bucket(s) into snapshot {snap.id}: "
        f"{result['files_deleted']} file(s) replaced by {result['files_added']}"
        + (f", {len(changelog)} changelog file(s)" if changelog else ""),
    )


def _positive_int(text: str) -> int:
    value = int(text) if text.strip().lstrip("-").isdigit() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {text!r}")
    return value


def _rescale(table: Table, args: argparse.Namespace, out: Output) -> None:
    partitions = [key_values([spec], "partition") for spec in args.partition] or None
    snap = table.rescale(args.bucket, partitions)
    option = table.options["bucket"]
    if snap is None:
        out.emit({"snapshot": None, "partitions": 0, "bucket": option}, f"nothing to rewrite (bucket = {option})")
        return
    delta = table.delta_entries(snap)
    kinds = Counter(e.kind for e in delta)
    result = {
        "snapshot": snap.id,
        "partitions": len({e.partition for e in delta}),
        "files_deleted": kinds[FileKind.DELETE],
        "files_added": kinds[FileKind.ADD],
        "bucket": option,
    }
    out.emit(
        result,
        f"rescaled {result['partitions']} partition(s) into {args.bucket} bucket(s) in snapshot {snap.id}: "
        f"{result['files_deleted']} file(s) replaced by {result['files_added']}; the table's bucket option is {option}",
    )


def _describe(table: Table, args: argparse.Namespace, out: Output) -> None:
    latest = table.latest_snapshot()
    picture = describe_table(table, None if latest is None else latest.id)
    levels = picture.files_per_level()
    data = {
        "uri": table.uri,
        "primary_key": list(table.primary_key),
        "partition_keys": list(table.partition_keys),
        "fields": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in table.schema],
        "options": table.options,
        "latest_snapshot": None if latest is None else _snapshot_row(latest),
        "buckets": len(picture.buckets),
        "files_by_level": {str(k): v for k, v in levels.items()},
        "rows_in_files": picture.records,
        "compaction_trigger": picture.compaction_trigger,
        "lsm": _lsm_json(picture),
    }
    more = 0 < args.buckets < len(picture.buckets)
    lines = [
        f"table        {table.uri}",
        f"primary key  {', '.join(table.primary_key)}",
        f"partitioned  {', '.join(table.partition_keys) or '-'}",
        "columns",
        *[f"  {f.name}: {f.type}{'' if f.nullable else ' not null'}" for f in table.schema],
        "options",
        *[f"  {k} = {v}" for k, v in sorted(table.options.items())],
        f"latest       {'-' if latest is None else f'snapshot {latest.id} ({latest.commit_kind.value})'}",
        f"files        {picture.files} in {len(picture.buckets)} bucket(s); by level: "
        + (", ".join(f"L{k}: {v}" for k, v in levels.items()) or "-"),
        "",
        "LSM tree per bucket (bar: bytes per level; every L0 file is a sorted run, each higher level one)",
        picture.text(args.buckets, getattr(out.stream, "encoding", None), header=False),
        *(["(--buckets 0 draws all)"] if more else []),
    ]
    out.emit(data, "\n".join(lines))


def _lsm_json(picture: TableDescription) -> list[dict[str, Any]]:
    """The buckets of ``picture.to_dict()``, also under the names ``describe --json`` gave them first.

    ``sorted_runs`` is ``runs``, ``compaction_due`` whether they reached the compaction trigger (status
    ``compaction due`` or ``behind``), and each level's ``rows`` is its ``records``.
    """
    buckets: list[dict[str, Any]] = picture.to_dict()["buckets"]
    return [
        {
            **b,
            "sorted_runs": b["runs"],
            "compaction_due": b["status"] != "ok",
            "levels": [{**level, "rows": level["records"]} for level in b["levels"]],
        }
        for b in buckets
    ]


def _snapshot_row(s: Any) -> dict[str, Any]:
    return {
        "id": s.id,
        "kind": s.commit_kind.value,
        "time": timestamp(s.time_millis),
        "total_records": s.total_record_count,
        "delta_records": s.delta_record_count,
        "changelog_records": s.changelog_record_count,
        "commit_user": s.commit_user,
    }


def _snapshots(table: Table, args: argparse.Namespace, out: Output) -> None:
    snaps = table.snapshots()
    if args.limit is not None:
        snaps = snaps[-args.limit :] if args.limit > 0 else []
    rows = [_snapshot_row(s) for s in snaps]
    headers = ["id", "kind", "time", "total_records", "delta_records", "changelog_records"]
    out.table(headers, [[r[h] for h in headers] for r in rows], rows)


def _files(table: Table, args: argparse.Namespace, out: Output) -> None:
    rows = []
    for partition, bucket, f in table.files(args.snapshot):
        spec = "/".join(f"{k}={v}" for k, v in zip(table.partition_keys, partition, strict=True))
        rows.append(
            {
                "partition": spec,
                "bucket": bucket,
                "level": f.level,
                "file": f.file_name,
                "rows": f.row_count,
                "bytes": f.file_size,
                "min_seq": f.min_sequence_number,
                "max_seq": f.max_sequence_number,
                "source": f.file_source.name,
            }
        )
    rows.sort(key=lambda r: (r["partition"], r["bucket"], r["level"], r["file"]))
    headers = list(rows[0]) if rows else ["partition", "bucket", "level", "file", "rows", "bytes"]
    out.table(headers, [[r[h] for h in headers] for r in rows], rows)


def _read(table: Table, args: argparse.Namespace, out: Output) -> None:
    reader = table.scan(
        columns=_columns(args.columns),
        filter=_filters(args.filter),
        snapshot_id=args.snapshot,
        tag=args.tag,
        timestamp_ms=args.timestamp,
        version=args.version,
    )
    write_rows(reader, args, out)


def _changelog(table: Table, args: argparse.Namespace, out: Output) -> None:
    data = table.changelog(
        args.start, args.end, columns=_columns(args.columns), filter=_filters(args.filter), mode=args.mode
    )
    write_rows(pa.RecordBatchReader.from_batches(data.schema, data.to_batches()), args, out)


def _consumers(table: Table, args: argparse.Namespace, out: Output) -> None:
    if args.reset:
        if args.snapshot is None:
            raise UsageError("--reset needs --snapshot N")
        table.reset_consumer(args.reset, args.snapshot)
        out.emit(
            {"reset": args.reset, "next_snapshot": args.snapshot}, f"consumer '{args.reset}' reads {args.snapshot} next"
        )
        return
    if args.delete:
        table.delete_consumer(args.delete)
        out.emit({"deleted": args.delete}, f"deleted consumer '{args.delete}'")
        return
    rows = [{"consumer": cid, "next_snapshot": n} for cid, n in table.consumers().items()]
    out.table(["consumer", "next_snapshot"], [[r["consumer"], r["next_snapshot"]] for r in rows], rows)


def _tags(table: Table, args: argparse.Namespace, out: Output) -> None:
    if args.create:
        tag = table.create_tag(args.create, snapshot_id=args.snapshot)
        out.emit({"created": args.create, "snapshot": tag.id}, f"created tag '{args.create}' on snapshot {tag.id}")
        return
    if args.delete:
        table.delete_tag(args.delete)
        out.emit({"deleted": args.delete}, f"deleted tag '{args.delete}'")
        return
    rows = [
        {"tag": name, "snapshot": t.id, "created": timestamp(t.tag_create_time) if t.tag_create_time else None}
        for name, t in table.tags().items()
    ]
    out.table(["tag", "snapshot", "created"], [[r["tag"], r["snapshot"], r["created"]] for r in rows], rows)


def _expire(table: Table, args: argparse.Namespace, out: Output) -> None:
    with progress.deletions("expiring", args, out.as_json):
        older = args.older_than
        result = table.expire_snapshots(
            older_than=int(older) if older is not None and older.isdigit() else older,
            retain_last=args.retain_last,
            dry_run=args.dry_run,
        )
    data = {
        "expired_snapshots": result.expired_snapshots,
        "deleted_files": len(result.deleted_files),
        "dry_run": args.dry_run,
    }
    verb = ("would expire", "would delete") if args.dry_run else ("expired", "deleted")
    out.emit(
        data, f"{verb[0]} {len(result.expired_snapshots)} snapshot(s), {verb[1]} {len(result.deleted_files)} file(s)"
    )


def _rollback(table: Table, args: argparse.Namespace, out: Output) -> None:
    r = table.rollback_to(snapshot_id=args.snapshot, tag=args.tag)
    data = {
        "snapshot": r.snapshot_id,
        "committed": r.committed,
        "removed_snapshots": r.removed_snapshots,
        "removed_tags": r.removed_tags,
    }
    made = f" as snapshot {r.committed}" if r.committed is not None else ""
    out.emit(
        data,
        f"rolled back to snapshot {r.snapshot_id}{made}: {len(r.removed_snapshots)} snapshot(s) left the history",
    )


def _orphans(table: Table, args: argparse.Namespace, out: Output) -> None:
    with progress.deletions("removing orphans", args, out.as_json):
        paths = table.remove_orphan_files(older_than_ms=args.older_than_ms, dry_run=args.dry_run, force=args.force)
    verb = "would remove" if args.dry_run else "removed"
    out.emit({"dry_run": args.dry_run, "files": paths}, "\n".join([f"{verb} {len(paths)} file(s)", *paths]))


# -- entry point ----------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see :mod:`mergetable.cli.errors`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        return report(exc, "--json" in argv)
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    out = Output(args.json)
    return guarded(lambda: _run(args, out), args.json, lambda: args.uri)


def _run(args: argparse.Namespace, out: Output) -> None:
    """Run the command: on the opened table, or (``create``, ``write``) on the location, which may hold none."""
    storage = storage_pairs(args.storage_option)
    if hasattr(args, "run_at"):
        run_at: Callable[[str, dict[str, Any] | None, argparse.Namespace, Output], None] = args.run_at
        run_at(args.uri, storage, args, out)
        return
    run: Callable[[Table, argparse.Namespace, Output], None] = args.run
    run(open_table(args.uri, storage), args, out)


if __name__ == "__main__":
    sys.exit(main())
