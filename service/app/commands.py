"""The CLI's commands: each `cmd_<name>(args) -> exit code`, argument parsing in cli.py.

These are the service's outermost layer: they read settings, open the edges
(`connectors`), build a decoding `Session` and run it. Output meant for people goes to
stdout; logs go to stderr.

- `peek` prints what test_decoding would, except pgcdc's own logical messages (prefix
  `__pgcdc.`: the DDL capture's table definitions, about 1 kB each, snapshot watermarks
  and signals), which the worker does not publish either; `--show-internal` prints them.
- `status` says what to do when something is missing: no slot (run `pgcdc setup`), no
  worker answering on the metrics port (its counters are then a sentence, not a raw
  `<urlopen error ...>`).
- `snapshot` refuses to emit a signal nobody would act on: without the slot it is a
  `SourceSetupError` (run `pgcdc setup`, then `pgcdc run`); with the slot but no
  walsender streaming from it (no worker running) too, unless `--queue` leaves it in
  the WAL for the next `pgcdc run`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import struct
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg2
import structlog

from connectors.postgres.server import connect, current_wal_lsn, set_connect_retry_budget
from connectors.postgres.slots import drop_slot_once_released, ensure_physical_slot, slot_state
from service.app.logging import configure_logging
from service.config import Settings, load_settings
from service.errors import ConfigError, SourceSetupError, SourceUnavailableError, WalError
from service.lsn import format_lsn, parse_lsn
from service.wal.format import XLOG_BLCKSZ, format_for_magic

log = structlog.get_logger(__name__)

# How long peek waits for the walsender of its closed stream to release its slot.
PEEK_SLOT_RELEASE_S = 10.0


def _settings(args: argparse.Namespace) -> Settings:
    settings = load_settings(args.config)
    configure_logging(settings.log)
    # Every command retries an unreachable source for its budget before exit 3.
    set_connect_retry_budget(settings.source.retry_budget_s)
    return settings


def _connect(settings: Settings) -> Any:
    try:
        return connect(settings.source.dsn())
    except SourceUnavailableError as exc:
        raise SourceUnavailableError(
            f"cannot connect to {settings.source.host}:{settings.source.port}"
            f"/{settings.source.dbname}: {exc}"
        ) from exc


def _print_line(lsn: int, xid: int, data: object) -> None:
    print(data, flush=True)


# --- setup / teardown ------------------------------------------------------------------


def cmd_setup(args: argparse.Namespace) -> int:
    from connectors.postgres.setup import setup  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    settings = _settings(args)
    report = dataclasses.asdict(
        setup(
            settings.source.dsn(),
            settings.source.slot,
            settings.filters,
            worker_role=args.worker_role,
        )
    )
    if report.get("restart_lsn") is not None:
        report["restart_lsn"] = format_lsn(report["restart_lsn"])
    print(json.dumps(report, default=str, indent=2))
    return 0


def cmd_teardown(args: argparse.Namespace) -> int:
    from connectors.postgres.setup import teardown  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    settings = _settings(args)
    teardown(settings.source.dsn(), settings.source.slot, drop_slot=not args.keep_slot)
    print(f"removed the DDL capture{'' if args.keep_slot else ' and slot ' + settings.source.slot}")
    return 0


# --- waldump -------------------------------------------------------------------------


_PAGE_HEADER = 24  # XLogPageHeaderData: magic, info, tli, pageaddr, rem_len (+ padding)


def _wal_version(directory: Path, start: int) -> int:
    """The major version, from the page magic of the segment holding `start`."""
    if not directory.is_dir():
        raise ConfigError(f"{directory} is not a directory of WAL segment files", field="--dir")
    from connectors.postgres.archive import detect_segment_size, iter_wal_chunks  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    size = detect_segment_size(directory)
    for lsn, data in iter_wal_chunks(directory, start, segment_size=size):
        if not any(data[:_PAGE_HEADER]):
            # A pre-allocated or recycled segment is zero-filled past the written WAL:
            # the readers end the WAL at such a page, so there is nothing to dump from it.
            raise WalError(
                f"no WAL has been written at the start position in {directory} yet "
                "(its page is zero-filled)",
                lsn=start,
            )
        (magic,) = struct.unpack_from("<H", data, 0)
        return format_for_magic(magic, lsn=lsn).version
    raise WalError(f"no WAL at the start position in {directory}", lsn=start)


def cmd_waldump(args: argparse.Namespace) -> int:
    from connectors.postgres.archive import read_records  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)
    from service.app.waldump import dump  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    version = _wal_version(args.dir, args.start)
    records = read_records(args.dir, args.start, args.end)
    shown = 0
    for line in dump(records, version, events=args.events):
        if not line.startswith("    "):
            if args.limit and shown >= args.limit:
                break
            shown += 1
        print(line)
    return 0


# --- peek / replay ---------------------------------------------------------------------


def _session(
    settings: Settings,
    start_lsn: int,
    version: int,
    options: dict[str, str],
    writer: Any,
    *,
    decode_from: int | None = None,
    plugin: Any = None,
) -> Any:
    from service.app.session import Session, SessionConfig  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)
    from service.app.unknown_types import make_policy  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)
    from service.output.text import TestDecodingPlugin  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    config = SessionConfig(
        dsn=settings.source.dsn(),
        slot=settings.source.slot,
        work_mem=int(settings.decoding.work_mem),
        memory_accounting=settings.decoding.memory_accounting,
        spill_dir=settings.decoding.state_dir / "spill",
        unknown_types=make_policy(settings, filtered=False),
        plugin_options={"server-version": str(version), **options},
    )
    return Session(
        config,
        TestDecodingPlugin() if plugin is None else plugin,
        "text",
        writer,
        version=version,
        start_lsn=start_lsn,
        decode_from=decode_from,
    )


def cmd_peek(args: argparse.Namespace) -> int:
    settings = _settings(args)
    conn = _connect(settings)
    slot = f"{settings.source.slot}_peek"
    # Peek's slot is its own (not temporary: the walsender's session must own it), so
    # peeking never moves the worker's slot. It is dropped again on the way out, however
    # that way starts: the server marks a slot active while it creates it, so Ctrl-C can
    # land before streaming does, and the slot must not outlive that either.
    failed = True  # until the stream ends without an exception
    try:
        _peek(args, settings, conn, slot)
        failed = False
    finally:
        try:
            _drop_peek_slot(conn, slot, unwinding=failed)
        finally:
            conn.close()
    return 0


def _peek(args: argparse.Namespace, settings: Settings, conn: Any, slot: str) -> None:
    """Create peek's slot and print what it streams until the idle timeout or
    --max-lines; the stream is closed (its walsender lets the slot go) on the way out."""
    from connectors.postgres.server import force_running_xacts  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)
    from connectors.postgres.stream import PhysicalStream  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)
    from service.app.peek import PeekPlugin  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    version = int(conn.server_version) // 10000
    with conn.cursor() as cur:
        _, reserved = ensure_physical_slot(cur, slot)
    if reserved is None:
        raise SourceSetupError(f"peek slot {slot} reserves no WAL", field="slot_name")
    start = reserved
    lines = 0

    def write(lsn: int, xid: int, data: object) -> None:
        nonlocal lines
        lines += 1
        _print_line(lsn, xid, data)

    plugin = None if args.show_internal else PeekPlugin()
    session = _session(settings, start, version, dict(args.option), write, plugin=plugin)
    stream = PhysicalStream(
        settings.source.dsn(),
        slot,
        start_lsn=start,
        create_slot=False,
        retry_budget_s=settings.source.retry_budget_s,
    )
    try:
        force_running_xacts(settings.source.dsn(), version)
        for lsn, data in stream.chunks(idle_timeout=args.timeout):
            session.feed(lsn, data)
            stream.confirm(session.restart_lsn())
            if args.max_lines and lines >= args.max_lines:
                break
    finally:
        # The stream first: its walsender holds the slot until the connection is gone.
        try:
            stream.close()
        finally:
            session.close()


def _drop_peek_slot(conn: Any, slot: str, *, unwinding: bool) -> None:
    """Drop peek's slot once the walsender of its closed stream has let it go.

    A slot that cannot be dropped retains WAL until someone does, so it is never left
    silently: it is a `SourceSetupError` naming it, except while an error is already
    unwinding (the decoder's, say), which is what the user must see: then the slot is
    named in a `peek_slot_left_behind` warning instead.
    """
    cause: psycopg2.Error | None = None
    try:
        with conn.cursor() as cur:
            state = slot_state(cur, slot)
            if state is None or state.slot_type != "physical":
                return  # never created, or not peek's (ensure_physical_slot refused it)
            if drop_slot_once_released(cur, slot, PEEK_SLOT_RELEASE_S):
                return
        problem = f"was still active {PEEK_SLOT_RELEASE_S:.0f}s after peek closed its stream"
    except psycopg2.Error as exc:
        cause = exc
        problem = f"could not be dropped: {str(exc).strip()}"
    hint = f"drop it with SELECT pg_drop_replication_slot('{slot}') once it is inactive"
    if unwinding:
        log.warning("peek_slot_left_behind", slot=slot, problem=problem, hint=hint)
        return
    raise SourceSetupError(
        f"peek slot {slot} {problem}; it retains WAL until dropped: {hint}", field="source.slot"
    ) from cause


def cmd_replay(args: argparse.Namespace) -> int:
    from connectors.postgres.archive import detect_segment_size, iter_wal_chunks  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    settings = _settings(args)
    version = _wal_version(args.dir, args.start)
    # Replaying an archive decodes what commits after --start, not only after "now".
    session = _session(
        settings, args.start, version, dict(args.option), _print_line, decode_from=args.start
    )
    try:
        size = detect_segment_size(args.dir)
        session.pump(
            iter_wal_chunks(args.dir, args.start & ~(XLOG_BLCKSZ - 1), segment_size=size),
            until_lsn=args.end,
        )
    finally:
        session.close()
    # Silence on stdout is ambiguous: say whether the range ever became decodable
    # (SnapBuildProcessRunningXacts needs RUNNING_XACTS records with no older xact running).
    snap = session.snap
    if snap.consistent_at is None:
        log.warning(
            "replay_never_consistent",
            start=format_lsn(args.start),
            snapshot_state=snap.state.name,
            hint="no transaction was decoded: start before a RUNNING_XACTS record "
            "(a CHECKPOINT writes one) that no older transaction outlives",
        )
    else:
        log.info("replay_consistent", at=format_lsn(snap.consistent_at))
    return 0


# --- status --------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    settings = _settings(args)
    conn = _connect(settings)
    out: dict[str, Any] = {"config": settings.redacted()}
    current = current_wal_lsn(conn)
    with conn.cursor() as cur:
        state = slot_state(cur, settings.source.slot)
    server = conn.get_parameter_status("server_version")
    conn.close()
    out["server"] = {"version": server, "current_wal_lsn": format_lsn(current)}
    hints: list[str] = []
    if state is None:
        hints.append(
            f"no replication slot {settings.source.slot} on the source: run `pgcdc setup` "
            "(same settings) to create it and the DDL capture, then `pgcdc run`"
        )
    out["slot"] = (
        None
        if state is None
        else {
            "name": settings.source.slot,
            "type": state.slot_type,
            "active": state.active,
            "restart_lsn": None if state.restart_lsn is None else format_lsn(state.restart_lsn),
            "wal_status": state.wal_status,
            "retained_bytes": state.retained_bytes,
        }
    )
    out["offsets"] = _last_offset(settings)
    if isinstance(out["offsets"], dict):
        server = current
        confirmed = parse_lsn(out["offsets"]["confirmed_lsn"])
        out["offsets"]["lag_bytes"] = max(0, server - confirmed)
    out["counters"] = _worker_counters(settings)
    if isinstance(out["counters"], str) and state is not None:
        hints.append(
            f"no worker serves metrics at {settings.metrics.host}:{settings.metrics.port} "
            "(metrics.host, metrics.port): start `pgcdc run`, or point these settings at "
            "the running worker"
        )
    out["snapshot"] = _snapshot_progress(settings)
    if hints:
        out["hints"] = hints
    print(json.dumps(out, indent=2, default=str))
    return 0


def _why(exc: OSError) -> str:
    """What went wrong reaching a URL, in words: `connection refused`, not the repr of
    urllib's URLError wrapping the socket error."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    reason: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower()
    return str(reason) or type(reason).__name__


def _worker_counters(settings: Settings) -> dict[str, float] | str:
    """The slot-stats counters of a running worker, from its /metrics endpoint."""
    host = "127.0.0.1" if settings.metrics.host in ("0.0.0.0", "::") else settings.metrics.host
    url = f"http://{host}:{settings.metrics.port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            body = resp.read().decode()
    except OSError as exc:  # URLError, HTTPError and timeouts are OSErrors
        return f"no worker answering at {url} ({_why(exc)})"
    counters: dict[str, float] = {}
    prefix = "pgcdc_slot_"
    for line in body.splitlines():
        if line.startswith(prefix) and "_total{" in line:
            name = line[len(prefix) : line.index("_total{")]
            counters[name] = float(line.rsplit(" ", 1)[1])
    return counters


def _last_offset(settings: Settings) -> dict[str, Any] | str:
    try:
        from connectors.kafka.offsets import read_last_offset  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

        began = time.monotonic()
        record = read_last_offset(settings)
    except Exception as exc:  # status reports what it cannot reach instead of failing
        return f"unavailable: {type(exc).__name__}: {exc}"
    if record is None:
        return "none committed yet"
    return {
        "confirmed_lsn": format_lsn(record.confirmed_lsn),
        "restart_lsn": format_lsn(record.restart_lsn),
        "schema_version": record.schema_version,
        "read_in_s": round(time.monotonic() - began, 3),
    }


def cmd_snapshot(args: argparse.Namespace) -> int:
    """Emit a snapshot signal as a transactional logical message (acted on at commit)."""
    from connectors.tablesnap.chunks import SIGNAL_PREFIX  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    settings = _settings(args)
    if args.pause or args.resume:
        signal: dict[str, Any] = {"type": "pause-snapshot" if args.pause else "resume-snapshot"}
    elif args.stop:
        signal = {"type": "stop-snapshot", "data": {"data-collections": args.tables}}
    elif not args.tables:
        raise ConfigError("name at least one TABLE to snapshot", field="TABLE")
    else:
        tables = [t if "." in t else f"public.{t}" for t in args.tables]
        data: dict[str, Any] = {"data-collections": tables}
        if args.where:
            data["additional-condition"] = args.where
        signal = {"type": "execute-snapshot", "data": data}
    conn = _connect(settings)
    try:
        with conn.cursor() as cur:
            _check_signal_reader(cur, settings.source.slot, queue=args.queue)
            cur.execute(
                "SELECT pg_logical_emit_message(true, %s, %s)::text",
                (SIGNAL_PREFIX, json.dumps(signal)),
            )
            row = cur.fetchone()
        conn.commit()
    finally:
        conn.close()
    print(json.dumps({"signal": signal, "lsn": row[0] if row else None}))
    return 0


def _check_signal_reader(cur: Any, slot: str, *, queue: bool) -> None:
    """A signal is acted on by the worker streaming from `slot`: refuse one nobody reads.

    Without the slot the signal would be decoded by nobody, ever. With the slot but no
    walsender using it, no worker runs: the signal waits in the WAL (the slot retains
    it) until one starts, which is what `--queue` asks for.
    """
    state = slot_state(cur, slot)
    if state is None:
        raise SourceSetupError(
            f"no replication slot {slot} on the source, so no worker would act on this "
            "signal: run `pgcdc setup`, then `pgcdc run`, and signal again",
            field="source.slot",
        )
    if not state.active and not queue:
        raise SourceSetupError(
            f"no worker is streaming from slot {slot} (it is inactive): start `pgcdc run` "
            "first, or pass --queue to leave the signal in the WAL for its next start",
            field="source.slot",
        )


def _snapshot_progress(settings: Settings) -> dict[str, Any] | str:
    """The last committed snapshot-progress state, summarized per table."""
    try:
        from connectors.tablesnap.progress import read_last_progress  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

        record = read_last_progress(settings)
    except Exception as exc:  # status reports what it cannot reach instead of failing
        return f"unavailable: {type(exc).__name__}: {exc}"
    if record is None:
        return "none committed yet"
    state = record.state
    jobs = list(state.get("jobs", []))
    return {
        "paused": bool(state.get("paused")),
        "tables_done": sum(1 for j in jobs if j.get("done")),
        "tables_total": len(jobs),
        "tables": [
            {
                "table": j.get("table"),
                "done": j.get("done"),
                "stopped": bool(j.get("stopped")),
                "rows": j.get("rows"),
                "estimate": j.get("estimate"),
                "chunks": j.get("chunks"),
                "where": j.get("where"),
            }
            for j in jobs
        ],
        "last_chunk": record.last,
    }


def cmd_run(args: argparse.Namespace) -> int:
    from service.app.worker import run_worker  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    settings = _settings(args)
    if getattr(args, "fresh_start", False):
        settings.snapshot.fresh_start = True
    return run_worker(settings)


def cmd_demo(args: argparse.Namespace) -> int:
    from service.app.demo import run_demo  # noqa: PLC0415  (imported when the command runs: keeps the CLI fast to start)

    return run_demo(keep_running=args.keep_running)
