"""Prometheus metrics and the /metrics, /healthz and /readyz endpoints.

The slot-stats mirror carries exactly the meanings of PostgreSQL's
`pg_stat_replication_slots` (spill_txns, spill_count, spill_bytes, stream_txns,
stream_count, stream_bytes, total_txns, total_bytes), labelled by slot. The reorder
buffer keeps the authoritative counts; `Metrics.sync_slot_stats` moves the Prometheus
counters up to them (counters never go down, so a restart of the worker restarts them
from zero, as a server restart does for the view).

Every metric name used by deploy/grafana/pgcdc.json and deploy/prometheus/rules.yml is
defined here; a test checks that.

Lag, as the alerts read it:
- `pgcdc_lag_bytes`: the server's WAL position minus the LSN confirmed in Kafka (set at
  each heartbeat).
- `pgcdc_lag_seconds`: how far behind the source's last change the worker is, in the
  sense of Debezium's MilliSecondsBehindSource: at each Kafka commit that carries source
  transactions, the time since the source commit of the last of them; 0 as soon as the
  worker is caught up (the stream idle with every byte the server had sent received,
  and everything decoded confirmed in Kafka). A heartbeat alone never moves it: on an
  idle database it stays 0 instead of growing with the time since the last change.

Unchanged TOAST (`toast.unchanged`, issue 32): `pgcdc_toast_placeholders_total{slot,
table}` counts every unchanged out-of-line value still published as Debezium's
placeholder (fill off, or the value was gone when pgcdc read it: each is also logged as
`toast_placeholder` with the table and LSN); `pgcdc_toast_filled_total` the values filled.

Presence and resources, for the alerts that need no scrape-job label:
- `pgcdc_start_time_seconds{slot}` is set when the worker's metrics are created and is
  exported for as long as the process runs: its disappearance is a worker gone, a new
  value a restart (in-process replays after an aborted Kafka transaction are not).
- `pgcdc_state_volume_free_bytes` / `pgcdc_state_volume_size_bytes`: the file system
  holding decoding.state_dir (the reorder buffer's spill files), from statvfs at each
  heartbeat; free is what an unprivileged process may still write (f_bavail).

/healthz is the liveness probe: 200 while the worker says it is live and, with a
watchdog (`metrics.watchdog_s` > 0), while its main loop has made progress
(`Health.beat`: WAL received, a heartbeat written, a replay going on, snapshot rows
read) within that many seconds. A loop wedged on a stalled socket thus turns the
probe to 503 and a supervisor restarts the worker. /readyz is readiness: streaming.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

SLOT_STATS = (
    "spill_txns",
    "spill_count",
    "spill_bytes",
    "stream_txns",
    "stream_count",
    "stream_bytes",
    "total_txns",
    "total_bytes",
)


class SlotStats(Protocol):
    """What the reorder buffer's statistics object offers (one int per SLOT_STATS name)."""

    spill_txns: int
    spill_count: int
    spill_bytes: int
    stream_txns: int
    stream_count: int
    stream_bytes: int
    total_txns: int
    total_bytes: int


@dataclass(slots=True)
class Health:
    """Liveness and readiness as the worker reports them."""

    live: bool = True
    ready: bool = False
    reason: str = "starting"
    # Seconds without a `beat()` after which the worker is no longer live (0: never).
    watchdog_s: float = 0.0
    last_beat: float = field(default_factory=time.monotonic)  # time.monotonic()

    def beat(self) -> None:
        """The main loop made progress."""
        self.last_beat = time.monotonic()

    def stalled_s(self) -> float | None:
        """How long the loop has gone without progress, once past the watchdog; else None."""
        silent = time.monotonic() - self.last_beat
        return silent if self.watchdog_s > 0 and silent > self.watchdog_s else None


class Metrics:
    """All of pgcdc's metrics, in one registry (one per worker; tests make their own)."""

    def __init__(self, slot: str, registry: CollectorRegistry | None = None) -> None:
        self.slot = slot
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.slot_stats = {
            name: Counter(
                f"pgcdc_slot_{name}",
                f"pg_stat_replication_slots.{name} mirror",
                ["slot"],
                registry=r,
            )
            for name in SLOT_STATS
        }
        lsn = ["slot"]
        self.received_lsn = Gauge("pgcdc_received_lsn", "End of WAL received", lsn, registry=r)
        self.decoded_lsn = Gauge(
            "pgcdc_decoded_lsn", "End of the last decoded record", lsn, registry=r
        )
        self.confirmed_lsn = Gauge(
            "pgcdc_confirmed_lsn", "Commit end LSN confirmed in Kafka", lsn, registry=r
        )
        self.restart_lsn = Gauge("pgcdc_restart_lsn", "Oldest LSN still needed", lsn, registry=r)
        self.server_lsn = Gauge("pgcdc_server_wal_lsn", "Server's current WAL LSN", lsn, registry=r)
        self.lag_bytes = Gauge(
            "pgcdc_lag_bytes", "Server WAL LSN minus confirmed LSN", lsn, registry=r
        )
        self.lag_seconds = Gauge(
            "pgcdc_lag_seconds",
            "Seconds behind the source's last change: at a Kafka commit, the time since the "
            "source commit of its last transaction; 0 once caught up",
            lsn,
            registry=r,
        )
        self.start_time = Gauge(
            "pgcdc_start_time_seconds",
            "Unix time the worker started (exported while it runs)",
            lsn,
            registry=r,
        )
        self.start_time.labels(slot).set(time.time())
        self.state_free = Gauge(
            "pgcdc_state_volume_free_bytes",
            "Bytes free for pgcdc on the file system of decoding.state_dir (spill files)",
            lsn,
            registry=r,
        )
        self.state_size = Gauge(
            "pgcdc_state_volume_size_bytes",
            "Size of the file system of decoding.state_dir",
            lsn,
            registry=r,
        )
        self.rb_memory = Gauge(
            "pgcdc_reorder_buffer_memory_bytes",
            "Bytes of changes buffered in memory",
            lsn,
            registry=r,
        )
        self.rb_txns = Gauge(
            "pgcdc_reorder_buffer_transactions",
            "Transactions in progress in the reorder buffer",
            lsn,
            registry=r,
        )
        self.records = Counter("pgcdc_wal_records", "WAL records decoded", lsn, registry=r)
        self.events = Counter(
            "pgcdc_events", "Change events published", ["slot", "topic", "op"], registry=r
        )
        self.kafka_commits = Counter(
            "pgcdc_kafka_transactions_committed", "Kafka transactions committed", lsn, registry=r
        )
        self.kafka_aborts = Counter(
            "pgcdc_kafka_transactions_aborted", "Kafka transactions aborted", lsn, registry=r
        )
        self.kafka_errors = Counter(
            "pgcdc_kafka_errors", "Kafka errors", ["slot", "kind"], registry=r
        )
        self.registry_calls = Counter(
            "pgcdc_registry_calls", "Schema registry calls", lsn, registry=r
        )
        self.registry_errors = Counter(
            "pgcdc_registry_errors", "Schema registry errors", lsn, registry=r
        )
        self.snapshot_rows = Counter(
            "pgcdc_snapshot_rows",
            "Rows read by the initial snapshot",
            ["slot", "table"],
            registry=r,
        )
        self.snapshot_tables_done = Gauge(
            "pgcdc_snapshot_tables_done", "Tables finished by the initial snapshot", lsn, registry=r
        )
        self.snapshot_tables_total = Gauge(
            "pgcdc_snapshot_tables_total", "Tables the initial snapshot reads", lsn, registry=r
        )
        self.snapshot_chunks = Counter(
            "pgcdc_snapshot_chunks", "Snapshot chunks published", lsn, registry=r
        )
        self.snapshot_chunk_retries = Counter(
            "pgcdc_snapshot_chunk_retries",
            "Snapshot chunks read again (window conflict or changed definition)",
            lsn,
            registry=r,
        )
        self.snapshot_current_table = Gauge(
            "pgcdc_snapshot_current_table",
            "1 for the table a snapshot is publishing chunks of",
            ["slot", "table"],
            registry=r,
        )
        self.snapshot_rows_estimate = Gauge(
            "pgcdc_snapshot_rows_estimate",
            "pg_class.reltuples of a table being snapshotted",
            ["slot", "table"],
            registry=r,
        )
        self.commit_latency = Histogram(
            "pgcdc_commit_to_kafka_seconds",
            "Source commit time to Kafka commit",
            lsn,
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        unknown = ("slot", "table", "column", "type")
        self.omitted_columns = Gauge(
            "pgcdc_omitted_columns",
            "1 for each captured column left out of every event (decoding.unknown_types=omit)",
            unknown,
            registry=r,
        )
        self.bytes_columns = Gauge(
            "pgcdc_bytes_columns",
            "1 for each captured column published as stored bytes (decoding.unknown_types=bytes)",
            unknown,
            registry=r,
        )
        # toast.unchanged (issue 32): placeholders still published, by table; values filled
        self.toast_placeholders = Counter(
            "pgcdc_toast_placeholders",
            "Unchanged TOAST values published as __debezium_unavailable_value",
            ["slot", "table"],
            registry=r,
        )
        self.toast_filled = Counter(
            "pgcdc_toast_filled",
            "Unchanged TOAST values filled (WAL cache or TOAST table)",
            lsn,
            registry=r,
        )
        self.standby = Gauge(
            "pgcdc_standby",
            "1 while waiting as a standby for the slot another worker holds",
            lsn,
            registry=r,
        )
        # This slot's counters are exported from the start, at 0: a rate over one that
        # has not moved yet (chunks read again, registry errors) is then 0, not no data.
        for counter in (
            *self.slot_stats.values(),
            self.records,
            self.kafka_commits,
            self.kafka_aborts,
            self.registry_calls,
            self.registry_errors,
            self.snapshot_chunks,
            self.snapshot_chunk_retries,
            self.toast_filled,
        ):
            counter.labels(slot)
        self.kafka_errors.labels(slot, "retry")
        self.commit_latency.labels(slot)
        self.health = Health()
        self._snapshot_rows_seen = 0.0
        self._server: ThreadingHTTPServer | None = None

    def alive(self) -> tuple[bool, str]:
        """What /healthz answers: live, and not stalled past the watchdog."""
        # Rows read by the initial snapshot are progress too (it runs inside one call).
        rows = sum(
            sample.value
            for metric in self.snapshot_rows.collect()
            for sample in metric.samples
            if sample.name.endswith("_total")
        )
        if rows != self._snapshot_rows_seen:
            self._snapshot_rows_seen = rows
            self.health.beat()
        if not self.health.live:
            return False, "dead"
        stalled = self.health.stalled_s()
        if stalled is not None:
            return False, f"stalled: no progress for {stalled:.0f}s"
        return True, "ok"

    def state_volume(self, directory: Path) -> None:
        """Free and total bytes of the file system holding `directory` (statvfs)."""
        vfs = os.statvfs(directory)
        self.state_free.labels(self.slot).set(vfs.f_bavail * vfs.f_frsize)
        self.state_size.labels(self.slot).set(vfs.f_blocks * vfs.f_frsize)

    def sync_slot_stats(self, stats: SlotStats) -> None:
        """Raise each slot-stats counter to the reorder buffer's current value."""
        for name, counter in self.slot_stats.items():
            current = counter.labels(self.slot)._value.get()
            target = getattr(stats, name)
            if target > current:
                counter.labels(self.slot).inc(target - current)

    # --- HTTP endpoints ---------------------------------------------------------------

    def serve(self, host: str, port: int) -> int:
        """Serve /metrics, /healthz, /readyz in a daemon thread; return the bound port."""
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    body, status, ctype = (
                        generate_latest(metrics.registry),
                        200,
                        CONTENT_TYPE_LATEST,
                    )
                elif self.path == "/healthz":
                    ok, why = metrics.alive()
                    body, status, ctype = (why + "\n").encode(), (200 if ok else 503), "text/plain"
                elif self.path == "/readyz":
                    ok = metrics.health.ready
                    body = (metrics.health.reason + "\n").encode()
                    status, ctype = (200 if ok else 503), "text/plain"
                else:
                    body, status, ctype = b"not found\n", 404, "text/plain"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # scrapes are not worth a log line each

        self._server = ThreadingHTTPServer((host, port), Handler)
        thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)
        thread.start()
        return int(self._server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
