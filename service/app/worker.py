"""The worker (`pgcdc run`): WAL in, every committed transaction into Kafka, exactly once.

Start-up:
0. the source is checked (connectors.postgres.preflight): version, wal_level, and the
   privileges the worker needs (connectors.postgres.privileges); each missing one is
   named with its GRANT in one `SourcePrivilegeError` (fatal, exit 1). Then every
   captured column's type is checked (`service.app.unknown_types`, the check
   `pgcdc setup` runs): with decoding.unknown_types = fail a column pgcdc cannot decode
   stops the worker here, listed, before Kafka, the stream or the snapshot; with omit
   or bytes each is logged and counted. Table definitions met later are decided the
   same way when first planned (`service.types.rowdecode`), before a row is published;
1. the Kafka sink starts (`init_transactions` fences an older worker with the same
   transactional.id) and reads the last committed offset of this slot, trusted only
   from the offsets topic pgcdc created (`OffsetsTopicError` otherwise: fatal, exit 1;
   a broker with auto.create.topics.enable=true re-creates a deleted topic with its
   own defaults). The offsets topic missing while the schema history is present is
   `OffsetsMissingError` (fatal);
2. with an offset: the schema history is restored from the snapshot committed with it,
   WAL is read again from its restart LSN (what the slot no longer has, from
   `source.archive` first: `service.app.resume`), and every commit whose record starts
   before its confirmed LSN is skipped (`SnapBuilder.restored`); without one: the physical slot
   is created or reused, and RUNNING_XACTS is forced; at the consistent point the
   catalog snapshot is taken and, with `snapshot.mode = initial` and the default
   `snapshot.method = blocking`, every existing row of the captured tables is read by
   `snapshot.parallelism` readers sharing that snapshot (connectors.tablesnap.export)
   and published as op `r`, one chunk per Kafka transaction, each with its progress
   record and the offset of the consistent point, while decoding stays paused there;
   then decoding goes on, and every stream transaction committed before the
   snapshot's LSN shares one Kafka transaction whose offset is committed once decoding
   has passed that LSN (`_settle_snapshot`). A worker dying before the first chunk's
   commit leaves nothing and no offset, so the next start does it all again; one dying
   later resumes from the committed chunks (the rest by watermarks, see
   connectors.tablesnap.export). With `snapshot.method = chunked` the initial snapshot
   is read by watermarks while streaming goes on (connectors.tablesnap.snapshotter);
3. the metrics endpoint serves /metrics, /healthz and /readyz.

Then, per committed source transaction, the Avro plugin writes its records into the
open Kafka transaction and `end_source_txn(confirmed=commit end, restart=restart LSN,
schema version)` closes it or lets it batch; a changed schema history is staged into
the same Kafka transaction. Slot feedback moves only in `on_committed`, after Kafka
committed. Heartbeats on an idle database write a heartbeat record and an offset, so
the slot keeps moving; they go out from the stream's idle callback, so the replication
connection (and with it the slot) stays held while the database is idle. The sink
commits as soon as the stream has nothing more buffered (`PhysicalStream.on_idle`), or
when its caps say so (adaptive batching).

A Kafka transaction that fails after records went into it is aborted by the sink, which
keeps no copy of them (`ReplayFromOffsetsError`). `run` then replays in process: the
session, the stream and the sink are closed, a fresh sink (whose init_transactions ends
whatever the broker still holds; it accepts only the offsets and schema-history topics
the first one verified, never re-creating them) reads the last committed offsets, and
decoding starts again from their restart LSN, so the aborted transactions are decoded
again from the WAL (and the reorder buffer's spill) and published once. Replays in a
row without a Kafka commit between them back off (0.5 s doubling up to 5 s) and go on
for `kafka.retry_budget_s` from the first; then the worker exits 3 (retryable).

Standby (`source.standby`, before step 1): while the slot is active under another
walsender, or another worker holds the slot's claim (connectors.postgres.claim: an
advisory lock on the source), the worker waits, polling once a second, with /readyz
503 and `pgcdc_standby` 1, and touches neither Kafka (init_transactions would fence the
active worker) nor the slot. Once the slot is released and the claim taken it starts as
above, and keeps the claim until it exits, so the killed worker restarted by its
supervisor waits as the next standby instead of fencing the one taking over. Only with
the claim lost (its connection cut) can two workers pass the wait: then fencing decides,
and the fenced one, restarted, waits as the standby.

SIGTERM or SIGINT: stop reading, commit what is complete (or abort the open Kafka
transaction), send the final slot feedback, exit 0.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import psycopg2
import structlog

from connectors.avro.plugin import AvroPlugin
from connectors.kafka.schema_store import KafkaSchemaStore
from connectors.kafka.sink import KafkaSink
from connectors.postgres.claim import SlotClaim
from connectors.postgres.preflight import preflight, source_identity
from connectors.postgres.server import (
    connect,
    current_wal_lsn,
    force_running_xacts,
    latest_redo,
    set_statement_timeout,
)
from connectors.postgres.slots import (
    advance_when_released,
    drop_slot,
    ensure_physical_slot,
    slot_state,
)
from connectors.postgres.stream import PhysicalStream
from connectors.postgres.walarchive import ArchiveBridge
from connectors.tablesnap.export import SharedSnapshot, export_visibility
from connectors.tablesnap.progress import ProgressRecord, progress_topic, read_last_progress
from connectors.tablesnap.snapshotter import Snapshotter
from service.app import gctune, malloctune, switchtune
from service.app.metrics import Metrics
from service.app.resume import resume_source
from service.app.session import Session, SessionConfig
from service.app.toast import ToastWiring
from service.app.unknown_types import check_at_start, make_policy
from service.backoff import Backoff
from service.config import Settings
from service.decode.events import CommitEvent
from service.errors import (
    BrokerUnavailableError,
    OffsetsMissingError,
    PgcdcError,
    ReplayFromOffsetsError,
    RestartableError,
    SlotGapError,
    SourceSetupError,
    SourceUnavailableError,
    TimelineDivergedError,
    TimelineSwitchReplay,
)
from service.lsn import format_lsn
from service.output.api import OutputRecord, PluginWrapper, RecordRun, RelationInfo
from service.output.filters import TableFilter
from service.pgconst import UNIX_EPOCH_SECS
from service.schema.tabledef import CatalogSnapshot
from service.wal.format import XLOG_BLCKSZ

log = structlog.get_logger(__name__)

METRICS_EVERY_S = 0.1  # while WAL flows, the gauges and counters follow at this pace


class ShutdownRequested(PgcdcError):
    """SIGTERM arrived during a replay that outlived kafka.shutdown_timeout_s: unwinds
    the replay so its open Kafka transaction is aborted (a PgcdcError, so the plugin
    wrapper lets it through unchanged)."""


class Worker:
    """One worker for one slot; `run()` until `stop` is set."""

    def __init__(self, settings: Settings, *, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.stop = threading.Event()
        self.metrics = metrics or Metrics(settings.source.slot)
        self.stream: PhysicalStream | None = None
        self.sink = KafkaSink(
            settings,
            on_committed=self._on_kafka_commit,
            retry_budget_s=settings.kafka.retry_budget_s,
        )
        self.session: Session | None = None
        # Held from the end of the standby wait until the process exits (`release_claim`).
        self.claim = SlotClaim(
            settings.source.dsn(),
            settings.source.slot,
            keepalive_s=settings.source.keepalives_idle_s,
        )
        # toast.unchanged: the fill, its TOAST-table reader and xmin hold, per session
        self.toast: ToastWiring | None = None
        self._schema_saved = -1
        self._last_heartbeat = time.monotonic()
        # The source commit time (PostgreSQL µs) of the last source transaction handed to
        # the sink since its last Kafka commit; None when every one handed on is
        # confirmed. A Kafka commit of heartbeats or snapshot chunks alone finds it None
        # and leaves pgcdc_lag_seconds alone (metrics module docstring).
        self._unconfirmed_commit_time: int | None = None
        self._seen = {
            "records": 0,
            "aborts": 0,
            "retries": 0,
            "registry_calls": 0,
            "registry_errors": 0,
        }
        self._sql: Any = None  # a plain connection for the server's WAL position
        # The end LSN of the last source transaction handed to the sink (committed to
        # Kafka or still in its open batch): a heartbeat's offset must not go below it.
        self._ended_lsn = 0
        self._sent_mark = 0  # sink.records_sent after the last `_end_txn`
        self._trace_txns = settings.log.level == "debug"  # `txn_published` lines
        # While set: the initial snapshot's Kafka transaction stays open until decoding
        # has passed this LSN (see `snapshot_horizon`); no offset is written before.
        self._snapshot_until: int | None = None
        self._stop_seen: float | None = None  # when a write first saw `stop` set
        self._replays = 0  # in-process replays since the last Kafka commit
        # The retry budget of those replays (kafka.retry_budget_s), from the first.
        self._replay_backoff: Backoff | None = None
        self._metrics_due = 0.0  # when `_sync_metrics` is next due while WAL flows
        self._state_volume_failed = False  # statvfs of decoding.state_dir failed last time
        # Events written into the open Kafka transaction, per (topic, op): added to the
        # pgcdc_events counters when it commits (`_on_kafka_commit`), dropped when a new
        # session replays it. A Counter.inc per record (a lock each) cost ~7% of the
        # worker's CPU under bulk load (py-spy), and counted records later aborted.
        self._uncounted: dict[tuple[str, str], int] = {}
        # Chunks between watermarks while streaming goes on: on-demand snapshots always,
        # the initial snapshot too when snapshot.method = chunked.
        self.snapshotter: Snapshotter | None = Snapshotter(settings, self.metrics)
        # decoding.unknown_types, shared by every row decoder of this worker
        self.unknown_types = make_policy(settings, self.metrics)
        self.snapshotter.unknown_types = self.unknown_types
        self._chunked_initial = settings.snapshot.method == "chunked"
        # The blocking initial snapshot of a first start: readers sharing the aligned
        # snapshot (connectors.tablesnap.export), set up by the session at alignment.
        self._export: SharedSnapshot | None = None
        # Resumed in the middle of it: the shared snapshot's horizon, until a commit
        # past it with every initial table done (then `snapshot_committed` is logged).
        self._resumed_horizon: int | None = None
        # A resumed session's WAL from the archive, handed out once before the stream
        # (`service.app.resume`, issue 31 part 3); None when the slot covers the offsets.
        self._bridge: ArchiveBridge | None = None

    # --- callbacks ------------------------------------------------------------------

    def _on_kafka_commit(self, confirmed_lsn: int, restart_lsn: int) -> None:
        """Kafka committed: only now may the slot move (and the metrics say so)."""
        if self.stream is not None:
            self.stream.confirm(restart_lsn)
        if self.toast is not None:
            self.toast.confirm(confirmed_lsn)
        self._replays, self._replay_backoff = 0, None
        if self._uncounted:
            events, slot_name = self.metrics.events, self.settings.source.slot
            for (topic, op), n in self._uncounted.items():
                events.labels(slot_name, topic, op).inc(n)
            self._uncounted.clear()
        horizon, snap = self._resumed_horizon, self.snapshotter
        if snap is not None:
            snap.kafka_committed()
        if horizon is not None and confirmed_lsn >= horizon and snap is not None:
            with snap.lock:
                finished = not any(j.marker == "initial" for j in snap.state.pending())
            if finished:
                self._resumed_horizon = None
                log.info("snapshot_committed", confirmed_lsn=format_lsn(confirmed_lsn))
        m, slot = self.metrics, self.settings.source.slot
        m.confirmed_lsn.labels(slot).set(confirmed_lsn)
        m.restart_lsn.labels(slot).set(restart_lsn)
        m.kafka_commits.labels(slot).inc()
        commit_time, self._unconfirmed_commit_time = self._unconfirmed_commit_time, None
        if commit_time is not None:
            behind = max(0.0, time.time() - (commit_time / 1e6 + UNIX_EPOCH_SECS))
            m.lag_seconds.labels(slot).set(behind)
            m.commit_latency.labels(slot).observe(behind)

    def _end_txn(self, ev: CommitEvent) -> None:
        assert self.session is not None
        history = self.session.history
        assert history is not None  # nothing commits for output before alignment
        if history.version != self._schema_saved:
            KafkaSchemaStore(self.settings, self.sink).save(history.version, history.to_snapshot())
            self._schema_saved = history.version
        self._unconfirmed_commit_time = ev.commit_time
        sent = self.sink.records_sent
        # Each transaction's records (its events and transaction metadata, and whatever
        # a commit of the batch before it produced), at debug level: what a fault run's
        # story shows for a transaction the verifier found lost.
        if self._trace_txns:  # decided once: no formatting per transaction otherwise
            log.debug(
                "txn_published",
                xid=ev.xid,
                commit_lsn=format_lsn(ev.lsn),
                records=sent - self._sent_mark,
            )
        if self._snapshot_until is not None and ev.end_lsn < self._snapshot_until:
            self._sent_mark = sent
            return  # committed before the snapshot's LSN: stays in the snapshot's batch
        self._ended_lsn = ev.end_lsn
        self.sink.end_source_txn(ev.end_lsn, self.session.restart_lsn(), history.version)
        self._sent_mark = self.sink.records_sent
        if self._snapshot_until is not None:  # the snapshot's batch ends here
            self._snapshot_until = None
            self.sink.flush()
            self._snapshot_committed(ev.end_lsn)

    # --- life cycle -----------------------------------------------------------------

    def _open(self) -> tuple[Session, int]:
        s = self.settings
        dsn = s.source.dsn()
        # wal_level, privileges, credentials: fatal if wrong, naming the fix.
        version = preflight(
            dsn,
            None if s.snapshot.mode == "never" else s.filters,
            toast_fill=s.toast.unchanged == "fill",
            chunked_snapshot=s.snapshot.mode != "never" and s.snapshot.method == "chunked",
        )
        # Every captured column's type, before Kafka, the stream or the snapshot: with
        # decoding.unknown_types = fail an undecodable one is fatal here, listed.
        check_at_start(s, self.unknown_types)
        last = self.sink.start()
        config = SessionConfig(
            dsn=dsn,
            slot=s.source.slot,
            work_mem=int(s.decoding.work_mem),
            memory_accounting=s.decoding.memory_accounting,
            spill_dir=s.decoding.state_dir / "spill",
            unknown_types=self.unknown_types,
        )
        avro = AvroPlugin(s)
        plugin: object = avro if self.snapshotter is None else self.snapshotter.hooks(avro)
        sink_write, sink_write_run = self.sink.write, self.sink.write_run
        sink_write_runs = self.sink.write_runs
        # Whatever the previous session wrote uncommitted is replayed by this one.
        uncounted = self._uncounted
        uncounted.clear()

        stop, grace = self.stop, s.kafka.shutdown_timeout_s

        def check_stop(lsn: int, xid: int) -> None:
            if stop.is_set():  # SIGTERM mid replay: finish it only within the grace
                now = time.monotonic()
                self._stop_seen = self._stop_seen or now
                if now - self._stop_seen >= grace:
                    raise ShutdownRequested(
                        "stopping in the middle of a source transaction", lsn=lsn, xid=xid
                    )

        def write(lsn: int, xid: int, record: object) -> None:
            check_stop(lsn, xid)
            sink_write(lsn, xid, record)
            if isinstance(record, OutputRecord):
                labels = (record.topic, record.op or "-")
                uncounted[labels] = uncounted.get(labels, 0) + 1

        def count_run(run: RecordRun) -> None:
            labels = (run.topic, run.op or "-")
            tombstones = run.tombstones
            uncounted[labels] = uncounted.get(labels, 0) + len(run.values) - tombstones
            if tombstones:
                labels = (run.topic, "-")
                uncounted[labels] = uncounted.get(labels, 0) + tombstones

        def write_run(lsn: int, xid: int, run: RecordRun) -> None:
            check_stop(lsn, xid)
            sink_write_run(lsn, xid, run)
            count_run(run)

        def write_runs(lsn: int, xid: int, runs: list[RecordRun]) -> None:
            check_stop(lsn, xid)
            sink_write_runs(lsn, xid, runs)
            for run in runs:
                count_run(run)

        stored = KafkaSchemaStore(s, self.sink).load_latest()
        if last is None and stored is not None and not s.snapshot.fresh_start:
            # The history is committed in the same Kafka transaction as the first
            # offsets: history without offsets means the offsets topic was lost, and a
            # silent new snapshot would skip the gap's changes (issue 11, defect 5).
            raise OffsetsMissingError(
                f"no offsets for slot {s.source.slot} in {self.sink.offsets_topic}, but "
                f"the schema-history topic holds version {stored[0]} from an earlier "
                "run: the offsets topic was deleted or truncated. Restore it, or start "
                "over deliberately with a new snapshot: `pgcdc run --fresh-start` "
                "(snapshot.fresh_start)",
            )
        if last is not None and stored is None:
            # Offsets without the history they were committed with: starting fresh would
            # publish everything again, guessing a history would decode wrongly.
            raise RestartableError(
                f"offsets of slot {s.source.slot} exist but its schema history is missing "
                "from Kafka; restore the history topic or reset the offsets topic",
                lsn=last.confirmed_lsn,
            )
        stream_from: int | None = None
        if last is not None and stored is not None:
            try:
                stream_from, self._bridge = resume_source(s, last.restart_lsn, last.confirmed_lsn)
            except SlotGapError as exc:
                if not s.snapshot.fresh_start:
                    raise
                log.warning("worker_fresh_start", reason=str(exc))
                last = None
        elif stored is not None:
            log.warning("worker_fresh_start", reason="offsets missing, history present")
        if last is not None and stored is not None:
            start = last.restart_lsn
            session = Session(
                config,
                plugin,
                "avro",
                write,
                run_writer=write_run,
                runs_writer=write_runs,
                version=version,
                start_lsn=start,
                restore=(last.confirmed_lsn, stored[1]),
                plugin_state={"settings": s},
            )
            self._schema_saved = stored[0]
            log.info(
                "worker_resumed",
                restart_lsn=format_lsn(start),
                confirmed_lsn=format_lsn(last.confirmed_lsn),
            )
        else:
            start = self._fresh_start_lsn(dsn, version)
            self._export = None
            if s.snapshot.mode != "never" and not self._chunked_initial:
                assert self.snapshotter is not None
                self._export = SharedSnapshot(s, self.snapshotter)
            session = Session(
                config,
                plugin,
                "avro",
                write,
                run_writer=write_run,
                runs_writer=write_runs,
                version=version,
                start_lsn=start,
                align=True,
                snapshot_reader=self._export,
                plugin_state={"settings": s},
            )
            session.on_aligned = self._aligned
            log.info("worker_started", restart_lsn=format_lsn(start))
        # On a fresh start too the stream begins where the slot was read above, once:
        # a second read (READ_REPLICATION_SLOT) could see a later position.
        self.stream = PhysicalStream(
            dsn,
            s.source.slot,
            start_lsn=start if stream_from is None else stream_from,
            busy_grace_s=s.source.slot_busy_grace_s,
            receive_timeout=s.source.receive_timeout_s,
            retry_budget_s=s.source.retry_budget_s,
        )
        session.decoding.on_committed = self._end_txn
        session.sink.progress = self._replay_progress
        self.toast = ToastWiring(s, self.metrics)
        self.toast.attach(session, self.stream)
        self.stream.on_idle = self._on_idle
        if self.snapshotter is not None:
            self.snapshotter.emitter = PluginWrapper(avro, session.wrapper.ctx)
            if last is not None:
                self._resume_snapshot(session, last.confirmed_lsn)
        return session, start

    def _fresh_start_lsn(self, dsn: str, version: int) -> int:
        """Where a first start (no offsets) decodes from, having had a RUNNING_XACTS
        record written (`_running_xacts`): the later of the slot's restart LSN and, on
        a primary, its latest checkpoint's redo point (`latest_redo`; on PG15 the
        CHECKPOINT that wrote the record made it). Everything committed before the
        consistent point is the snapshot's, so the WAL before that redo point (all of
        it since `pgcdc setup` on a slot never used) was decoded only to be dropped: a
        bulk load and its autovacuum right before a first start made the worker read
        436 MB first. A redo point is what decoding needs to start at: pg_class's pages
        are rebuilt from their first full-page image after it (service.schema.pgclass),
        and the transactions running there are listed by the RUNNING_XACTS after it, so
        the snapshot builder waits them out as from the slot's own redo point."""
        restart = self._slot_restart_lsn()
        redo = self._running_xacts(dsn, version)
        return restart if redo is None else max(restart, redo)

    def _running_xacts(self, dsn: str, version: int) -> int | None:
        """Have a RUNNING_XACTS record written so the snapshot builder becomes consistent
        now; on a primary that wrote it, its latest redo point after (`latest_redo`),
        else None. A standby cannot write one: its WAL has the primary's, so the primary
        (source.primary_host) is asked; without one, the wait for the primary's
        bgwriter (every 15 s while the primary writes WAL) is logged."""
        primary = self.settings.source.primary_dsn()
        if primary is not None:
            force_running_xacts(primary, version)
            return None
        conn = connect(dsn)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_catalog.pg_is_in_recovery()")
                row = cur.fetchone()
                standby = row is not None and bool(row[0])
            if not standby:
                force_running_xacts(dsn, version)
                return latest_redo(conn)
        finally:
            conn.close()
        log.warning(
            "running_xacts_wait_for_primary",
            note="the source is a standby and source.primary_host is not set: "
            "consistency waits for the primary's next RUNNING_XACTS record (its bgwriter "
            "writes one every 15 s while the primary writes WAL, none while it is idle)",
        )
        return None

    def _replay_progress(self) -> None:
        """Called from inside a long replay: keep the walsender and the watchdog fed."""
        self.metrics.health.beat()
        if self.stream is not None:
            self.stream.keepalive()

    def _resume_snapshot(self, session: Session, confirmed_lsn: int) -> None:
        """Restore the chunked snapshot's state; queue newly captured tables if asked.

        A restart in the middle of the shared-snapshot initial snapshot, before the
        stream passed that snapshot's LSN, skips the transactions visible in it again
        (`SnapshotState.export`), as the aligned session did: each transaction stays in
        the snapshot or in the stream, never both. The unfinished tables are then read
        by watermarks (connectors.tablesnap.export, point 3).
        """
        snap, s = self.snapshotter, self.settings
        assert snap is not None
        progress = read_last_progress(s)
        snap.restore(dict(progress.state) if progress is not None else None)
        unfinished = [j.table for j in snap.state.pending() if j.marker == "initial"]
        if unfinished:
            log.info("snapshot_started", tables=len(unfinished), resumed=True)
        export = snap.state.export
        if export is not None and confirmed_lsn < snapshot_horizon(int(export["lsn"])):
            session.snap.skip_visible_in(export_visibility(export).xid_visible)
            self._resumed_horizon = snapshot_horizon(int(export["lsn"]))
        if export is not None and unfinished:
            log.warning(
                "snapshot_resumed_by_watermarks",
                snapshot_lsn=format_lsn(int(export["lsn"])),
                confirmed_lsn=format_lsn(confirmed_lsn),
                tables=unfinished,
                note="the exported snapshot is gone: these tables are finished by DBLog "
                "watermarks while streaming goes on, so a row changed meanwhile may see "
                "its change before its r",
            )
        if progress is None:
            # Offsets from before chunked snapshots (or a blocking one): whatever is
            # captured now counts as captured, so only later additions are new.
            snap.fresh(snap.captured_tables(), snapshot=False)
        elif s.snapshot.mode == "initial_and_new_tables":
            snap.add_new_tables(snap.captured_tables())
        else:
            return
        with snap.lock:
            value = ProgressRecord(None, snap.state.to_json()).encode()
        self.sink.stage(progress_topic(s), s.source.slot.encode(), value)

    def _aligned(self, snapshot: CatalogSnapshot) -> None:
        """Consistent: from here every transaction not in `snapshot` is published."""
        self.metrics.health.ready, self.metrics.health.reason = True, "streaming"
        log.info(
            "worker_consistent", snapshot_lsn=format_lsn(snapshot.lsn), tables=len(snapshot.tables)
        )
        self._snapshot_until = snapshot_horizon(snapshot.lsn)
        if self.snapshotter is not None:
            # The chunked snapshot's first state rides on the alignment's offset commit.
            include = TableFilter(self.settings.filters)
            tables = [
                t.qualified_name
                for t in snapshot.tables
                if t.relkind == "r" and include(t.schema, t.name)
            ]
            initial = self.settings.snapshot.mode != "never"
            value = self.snapshotter.fresh(tables, snapshot=initial)
            self.sink.stage(
                progress_topic(self.settings), self.settings.source.slot.encode(), value
            )
        export, self._export = self._export, None
        if export is not None:
            # Decoding stays paused here, at the consistent point, until every chunk
            # of the shared snapshot is committed (each with the offset of this point).
            assert self.session is not None
            confirmed = self.session.decoding.last_end_lsn
            if not export.run(self, confirmed, self.stop):
                raise ShutdownRequested("stopping in the middle of the initial snapshot")
        self._settle_snapshot()

    def _settle_snapshot(self) -> None:
        """Commit the initial snapshot once decoding has passed its LSN.

        Why not at once: a transaction whose commit record lies before the snapshot's
        `pg_current_wal_lsn()` may still have been running when the snapshot was taken
        (its commit record is written before it leaves the proc array), so it is not
        in the snapshot and is published from the stream. Until the stream has passed
        that LSN no `confirmed` LSN is right for a restart: a lower one republishes
        transactions the snapshot already holds, a higher one loses that one. So the
        snapshot's rows, and every transaction published before that point, share one
        Kafka transaction whose offset is the first position past the snapshot's LSN.
        """
        session, until = self.session, self._snapshot_until
        if until is None or session is None or session.history is None:
            return
        lsn = session.decoding.last_end_lsn
        if lsn < until:
            return
        self._snapshot_until = None
        history = session.history
        if history.version != self._schema_saved:
            KafkaSchemaStore(self.settings, self.sink).save(history.version, history.to_snapshot())
            self._schema_saved = history.version
        self.sink.end_source_txn(lsn, session.restart_lsn(), history.version)
        self.sink.flush()
        self._snapshot_committed(lsn)

    def _snapshot_committed(self, lsn: int) -> None:
        """The initial snapshot's batch is committed at `lsn`: chunks may start
        (`snapshot_ready` is true from now on), so the snapshotter's idle readers are
        woken rather than left to their next poll."""
        log.info("snapshot_committed", confirmed_lsn=format_lsn(lsn))
        if self.snapshotter is not None:
            self.snapshotter.ring()

    # --- what the snapshotter asks (connectors.tablesnap.snapshotter.WorkerPort) ---------------

    def snapshot_ready(self) -> bool:
        """Chunks may start: aligned, and the alignment's offset is past its horizon."""
        session = self.session
        return (
            session is not None
            and session.aligned
            and self._snapshot_until is None
            and self.sink.last_committed is not None
        )

    def snapshot_keepalive(self) -> None:
        """While the shared snapshot is read (decoding paused): walsender and watchdog."""
        self._replay_progress()

    def relation_at(self, oid: int, lsn: int) -> RelationInfo | None:
        assert self.session is not None
        found = self.session.rows.relations_by_oid([oid], lsn, 0)
        return found[0] if found else None

    def stage_snapshot_progress(self, topic: str, key: bytes, value: bytes) -> None:
        self.sink.stage(topic, key, value)

    def commit_snapshot_chunk(self, lsn: int, *, now: bool) -> None:
        """A chunk published at `lsn`: end it with an offset there, as a source
        transaction ends, and commit `now` (a table's last chunk). Otherwise the sink's
        batch rule commits it, or the next idle moment once no chunk is in flight
        (`_on_idle`). Every commit calls the snapshotter back (`_on_kafka_commit`).

        Called at a watermark, between source transactions: everything decoded before
        `lsn` is published or deliberately skipped, so `lsn` may be confirmed (as a
        heartbeat's position is), never less than what is already committed or ended.
        """
        session = self.session
        assert session is not None and session.history is not None
        history = session.history
        if history.version != self._schema_saved:
            KafkaSchemaStore(self.settings, self.sink).save(history.version, history.to_snapshot())
            self._schema_saved = history.version
        committed = self.sink.last_committed.confirmed_lsn if self.sink.last_committed else 0
        confirmed = max(committed, self._ended_lsn, lsn)
        self._ended_lsn = confirmed
        self.sink.end_source_txn(confirmed, session.restart_lsn(), history.version)
        if now:
            self.sink.flush()

    def _wal(self, stream: PhysicalStream) -> Iterator[tuple[int, bytes]]:
        """The session's WAL: the archive bridge's range first, when there is one,
        then the stream from exactly where it ends."""
        bridge, self._bridge = self._bridge, None
        if bridge is not None:
            yield from bridge.chunks(self.stop)
            if self.stop.is_set():
                return
        yield from stream.chunks(self.stop)

    def _slot_restart_lsn(self) -> int:
        """The slot's restart LSN, creating the slot (reserving WAL) if it is missing."""
        slot = self.settings.source.slot
        conn = connect(self.settings.source.dsn())
        try:
            with conn.cursor() as cur:
                _, restart = ensure_physical_slot(cur, slot)
                if restart is None and self.settings.snapshot.fresh_start:
                    # Invalidated (max_slot_wal_keep_size): a new start needs a new slot.
                    drop_slot(cur, slot)
                    _, restart = ensure_physical_slot(cur, slot)
        finally:
            conn.close()
        if restart is None:
            raise SourceSetupError(f"physical slot {slot} reserves no WAL", field="slot_name")
        return restart

    def _wait_as_standby(self) -> bool:
        """Wait while another walsender holds the slot or another worker its claim;
        False if stopped meanwhile."""
        m, slot = self.metrics, self.settings.source.slot
        announced: int | None = None  # walsender PID last logged; 0: the claim's holder
        while not self.stop.is_set():
            if not self.claim.held:
                conn = connect(self.settings.source.dsn(), "pgcdc-standby")
                try:
                    with conn.cursor() as cur:
                        state = slot_state(cur, slot)
                finally:
                    conn.close()
            m.health.beat()  # waiting is what a standby is for: it stays live
            if self.claim.held or state is None or not state.active:
                if self.claim.try_take():
                    if announced is not None:
                        log.info("worker_standby_takes_over", previous_pid=announced)
                    m.standby.labels(slot).set(0)
                    return True
                # Released, but another worker claimed it first and is starting.
                active_pid, why = 0, f"standby: slot {slot} is claimed by another worker"
            else:
                active_pid = state.active_pid or 0
                why = f"standby: slot {slot} is active for PID {active_pid}"
            if announced != active_pid:
                log.info("worker_standby", slot=slot, active_pid=active_pid or None)
                announced = active_pid
            m.standby.labels(slot).set(1)
            m.health.ready = False
            m.health.reason = why
            self.stop.wait(1.0)
        return False

    def release_claim(self) -> None:
        """Let the next worker start (the process is about to exit)."""
        self.claim.release()

    def run(self) -> int:
        """Run sessions until stopped, replaying in process after an aborted Kafka
        transaction (see the module docstring)."""
        while True:
            try:
                return self._run_session()
            except ReplayFromOffsetsError as exc:
                self._check_not_diverged(exc)
                self._replays += 1
                if self._replay_backoff is None:  # the first since the last Kafka commit
                    self._replay_backoff = Backoff(self.settings.kafka.retry_budget_s, 0.5)
                if self._replay_backoff.spent():
                    raise BrokerUnavailableError(
                        f"Kafka aborted {self._replays} transactions in a row, over "
                        f"{self.settings.kafka.retry_budget_s:.0f}s without a commit "
                        f"(kafka.retry_budget_s): {exc}",
                        lsn=exc.lsn,
                    ) from exc
                log.warning("worker_replay_from_offsets", error=str(exc), replays=self._replays)
                self._fresh_sink()
                self._replay_backoff.sleep(self.stop.wait)
                if self.stop.is_set():
                    return 0

    def _check_not_diverged(self, exc: ReplayFromOffsetsError) -> None:
        """A timeline switch behind what Kafka holds is not replayable: the offsets
        confirm WAL of the abandoned timeline past its switch point (issue 31)."""
        if not isinstance(exc, TimelineSwitchReplay) or exc.lsn is None:
            return
        last = self.sink.last_committed
        if last is not None and last.confirmed_lsn > exc.lsn:
            raise TimelineDivergedError(
                f"Kafka holds transactions decoded up to {format_lsn(last.confirmed_lsn)} "
                f"on a timeline the source abandoned at {format_lsn(exc.lsn)}: they were "
                "never replicated to the promoted server. Reconcile the topics, then start "
                "over deliberately (`pgcdc run --fresh-start`)",
                lsn=exc.lsn,
            ) from exc

    def _fresh_sink(self) -> None:
        """A new sink (and chunked snapshotter) for the next session; counters carry on."""
        old = self.sink
        self.sink = KafkaSink(
            self.settings,
            on_committed=self._on_kafka_commit,
            retry_budget_s=self.settings.kafka.retry_budget_s,
        )
        # The topics verified at the first start stay the only ones accepted: a deleted
        # offsets topic must not be re-created by the replay's start (issue 27).
        self.sink.guard.adopt(old.guard)
        self.sink.aborts, self.sink.retries = old.aborts, old.retries
        self.sink.kafka_txns, self.sink.records_sent = old.kafka_txns, old.records_sent
        self.session, self.stream, self._bridge = None, None, None
        self._schema_saved, self._ended_lsn = -1, 0
        self._snapshot_until, self._stop_seen = None, None
        self._resumed_horizon = None
        self._unconfirmed_commit_time = None  # the replay decodes them again
        if self.snapshotter is not None:
            self.snapshotter = Snapshotter(self.settings, self.metrics)

    def _run_session(self) -> int:
        m = self.metrics
        if self.settings.source.standby and not self._wait_as_standby():
            log.info("worker_stopped", decoded_lsn=None)
            return 0
        self.session, _ = self._open()
        session, stream = self.session, self.stream
        assert stream is not None
        if self.snapshotter is not None:
            self.snapshotter.start(self)
        if session.aligned:
            m.health.ready, m.health.reason = True, "streaming"
        else:
            m.health.reason = "waiting for a consistent point"
        interval = self.settings.kafka.heartbeat_interval_s
        failed = True  # until the loop ends without an exception
        try:
            while not self.stop.is_set():
                # No idle timeout: the stream stays connected while the database is
                # idle (heartbeats go out from `_on_idle`). Reconnecting on every idle
                # interval released the slot each time, and a standby could take it.
                for lsn, data in self._wal(stream):
                    m.health.beat()
                    session.feed(lsn, data)
                    self._settle_snapshot()
                    if time.monotonic() >= self._metrics_due:
                        self._sync_metrics()
                    self.sink.poll()
                    if time.monotonic() - self._last_heartbeat >= interval:
                        self._heartbeat()
                    if self.stop.is_set():
                        break
                if not self.stop.is_set():
                    self._heartbeat()
            failed = False
        except ShutdownRequested as exc:  # `failed` stays set: the Kafka txn is aborted
            log.info("worker_shutdown_aborts_transaction", error=str(exc))
        finally:
            m.health.ready, m.health.reason = False, "stopping"
            if self.snapshotter is not None:
                self.snapshotter.close()
            if self._export is not None:  # aligned never: the importers still open
                self._export.close()
                self._export = None
            # On an exception the open Kafka transaction may hold part of a source
            # transaction: abort it, never commit it (issue 11, defect 1).
            self._close_sink(commit=not failed)
            if self.stream is not None:
                self.stream.close()
            if self._sql is not None:
                self._sql.close()
            if self.toast is not None:
                self.toast.close()
            session.close()
        self._final_feedback()
        log.info("worker_stopped", decoded_lsn=format_lsn(session.decoding.last_end_lsn))
        return 0

    def _close_sink(self, *, commit: bool) -> None:
        """Close the sink; while already unwinding an exception, a second failure (the
        broker is gone too) is logged so that the first one is what the worker reports."""
        if commit:
            self.sink.close()
            return
        try:
            self.sink.close(commit=False)
        except PgcdcError as exc:
            log.warning("kafka_close_failed", error=str(exc))

    def _final_feedback(self) -> None:
        """After a clean stop, move the slot to the last committed restart LSN.

        The stream reports the restart LSN only on its status interval, so the slot would
        otherwise keep WAL back to an older point until the next start. The replication
        connection is closed by now; once its walsender has released the slot, the same
        move is made with pg_replication_slot_advance (forward only, as the walsender's
        PhysicalConfirmReceivedLocation). Failing here loses nothing (the slot only
        retains more WAL than needed), so it is logged, not raised.
        """
        last = self.sink.last_committed
        if last is None or self.sink.dead:
            return
        slot, target = self.settings.source.slot, last.restart_lsn
        try:
            outcome = advance_when_released(self.settings.source.dsn(), slot, target)
        except (PgcdcError, psycopg2.Error) as exc:
            log.warning("slot_final_feedback_failed", error=str(exc).strip())
            return
        if outcome == "advanced":
            log.info("slot_final_feedback", restart_lsn=format_lsn(target))
        elif outcome == "active":
            log.warning("slot_final_feedback_failed", error="slot still active")

    def _sync_counters(self) -> None:
        """Move the counters kept by the pipeline's parts up to their current values."""
        assert self.session is not None
        m, slot = self.metrics, self.settings.source.slot
        for counter, now, key in (
            (m.records.labels(slot), self.session.decoding.records, "records"),
            (m.kafka_aborts.labels(slot), self.sink.aborts, "aborts"),
            (m.kafka_errors.labels(slot, "retry"), self.sink.retries, "retries"),
            (m.registry_calls.labels(slot), self._registrar_count("calls"), "registry_calls"),
            (m.registry_errors.labels(slot), self._registrar_count("errors"), "registry_errors"),
        ):
            if now > self._seen[key]:
                counter.inc(now - self._seen[key])
                self._seen[key] = now

    def _registrar_count(self, which: str) -> int:
        plugin = self.session.wrapper.plugin if self.session is not None else None
        registrar = getattr(plugin, "registrar", None)
        return int(getattr(registrar, which, 0)) if registrar is not None else 0

    def _server_position(self) -> None:
        """The server's current WAL LSN, for lag in bytes (one cheap query a heartbeat)."""
        m, slot = self.metrics, self.settings.source.slot
        try:
            if self._sql is None or self._sql.closed:
                # No retry: a metric is reported stale, never waited for.
                self._sql = connect(self.settings.source.dsn(), "pgcdc-lag", retry_budget_s=0)
            server = current_wal_lsn(self._sql)
        except (SourceUnavailableError, psycopg2.Error) as exc:  # a metric: report it stale
            log.warning("server_position_unavailable", error=str(exc).strip())
            self._sql = None
            return
        m.server_lsn.labels(slot).set(server)
        confirmed = self.sink.last_committed.confirmed_lsn if self.sink.last_committed else 0
        m.lag_bytes.labels(slot).set(max(0, server - confirmed) if confirmed else 0)

    def _sync_metrics(self) -> None:
        """Positions, buffer gauges and counters up to date. At most every
        METRICS_EVERY_S while WAL flows (a walsender message can be one small commit:
        updating some 20 labelled series for each cost ~5% of the CPU under pgbench),
        and whenever the stream runs dry, so an idle worker's figures are exact."""
        session = self.session
        if session is None:
            return
        self._metrics_due = time.monotonic() + METRICS_EVERY_S
        m, slot = self.metrics, self.settings.source.slot
        stream = self.stream
        if stream is not None and stream.received_lsn is not None:
            m.received_lsn.labels(slot).set(stream.received_lsn)
        m.decoded_lsn.labels(slot).set(session.decoding.last_end_lsn)
        m.rb_memory.labels(slot).set(session.rb.memory_bytes)
        m.rb_txns.labels(slot).set(session.rb.txn_count)
        m.sync_slot_stats(session.rb.stats)
        self._sync_counters()
        if self.toast is not None:
            self.toast.sync_metrics()

    def _on_idle(self) -> None:
        """The stream has handed over every byte received: commit what is complete
        (adaptive batching; held while snapshot chunks are in flight behind a published
        one, for max_batch_age_s at most), bring the metrics up to date, serve the
        producer's events, and send the heartbeat when one is due."""
        snap = self.snapshotter
        held = snap is not None and snap.in_flight()
        committed = False if held else self.sink.idle()
        self._sync_metrics()
        if self._caught_up():
            self.metrics.lag_seconds.labels(self.settings.source.slot).set(0)
        if not committed:
            self.sink.poll()
        if time.monotonic() - self._last_heartbeat >= self.settings.kafka.heartbeat_interval_s:
            self._heartbeat()

    def _caught_up(self) -> bool:
        """Nothing the server has is waiting for this worker: every byte it reported is
        received (`PhysicalStream.caught_up`), every source transaction decoded from them
        is confirmed in Kafka, and no snapshot batch waits for its horizon."""
        return (
            self._unconfirmed_commit_time is None
            and self._snapshot_until is None
            and self.stream is not None
            and self.stream.caught_up()
        )

    def _state_volume(self) -> None:
        """Free space of decoding.state_dir's file system (the spill files' volume)."""
        try:
            self.metrics.state_volume(self.settings.decoding.state_dir)
        except OSError as exc:  # a metric: reported stale (once), the spill store fails loudly
            if not self._state_volume_failed:
                log.warning("state_volume_unavailable", error=str(exc))
            self._state_volume_failed = True
            return
        self._state_volume_failed = False

    def _heartbeat(self) -> None:
        """An idle database still moves the slot: heartbeat record plus an offset."""
        assert self.session is not None
        self._last_heartbeat = time.monotonic()
        self._sync_counters()
        self._server_position()
        self._state_volume()
        session = self.session
        lsn = session.decoding.last_end_lsn
        if not lsn or not session.aligned or session.history is None:
            return
        if self._snapshot_until is not None:
            self._settle_snapshot()  # no offset may be written before the snapshot's
            return
        session.wrapper.call("heartbeat", lsn, 0, lsn, optional=True)
        # Everything decoded so far has been published or deliberately skipped, so the
        # decoded position may be confirmed (as an idle logical slot's confirmed_flush
        # moves with keepalives); never less than a transaction that ended since and
        # sits in the open batch, whose offset this one replaces there.
        committed = self.sink.last_committed.confirmed_lsn if self.sink.last_committed else 0
        confirmed = max(committed, self._ended_lsn, lsn)
        self.sink.end_source_txn(confirmed, session.restart_lsn(), session.history.version)
        self.sink.flush()
        self.metrics.health.beat()


def snapshot_horizon(snapshot_lsn: int) -> int:
    """The decoded position from which the snapshot's offset may be committed.

    `pg_current_wal_lsn()` is the insert position; at the start of a page it points
    past the page header, where no record can end. Decoding then reaches the page start
    (the end of the page's last record), which is as good: nothing lies in between.
    """
    in_page = snapshot_lsn % XLOG_BLCKSZ
    return snapshot_lsn - in_page if in_page <= 40 else snapshot_lsn  # SizeOfXLogLongPHD


def run_worker(settings: Settings) -> int:
    if settings.kafka.transactional_id is None:
        # Unique per source, stable across restarts: the slot name alone made pipelines
        # on different servers or databases fence each other (issue 11, defect 7).
        settings.kafka.transactional_id = (
            f"pgcdc-{source_identity(settings.source.dsn())}-{settings.source.slot}"
        )
    log.info("worker_transactional_id", transactional_id=settings.transactional_id)
    set_statement_timeout(settings.source.statement_timeout_s)
    metrics = Metrics(settings.source.slot)
    metrics.health.watchdog_s = settings.metrics.watchdog_s
    malloctune.tune()  # before the worker's threads (the metrics server's the first)
    gctune.tune()
    switchtune.tune()
    port = metrics.serve(settings.metrics.host, settings.metrics.port)
    log.info("metrics_serving", port=port)
    worker = Worker(settings, metrics=metrics)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("worker_signal", signal=signal.Signals(signum).name)
        worker.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return worker.run()
    finally:
        worker.release_claim()
        metrics.close()
