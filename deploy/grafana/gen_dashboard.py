"""Generate deploy/grafana/pgcdc.json, the Grafana dashboard for pgcdc.

Run `python deploy/grafana/gen_dashboard.py` after changing a panel here; the dashboard
file is generated, and tests/deploy/test_deploy_static.py fails when the two differ or
when a panel queries a metric service/app/metrics.py does not export.

Layout, top to bottom:
- Overview: worker up, lag (bytes, seconds), events/s, reorder buffer memory, open txns.
- Worker and state volume: restarts in the last hour, uptime, how full the file system
  of decoding.state_dir (the spill files) is.
- Lag: lag in bytes and seconds per slot; how far each position (received, decoded,
  confirmed, restart) is behind the server's WAL.
- Throughput: events/s by topic and op, WAL records/s, Kafka transactions/s.
- Slot statistics: the pg_stat_replication_slots mirror, read as users of that view read
  it: a table with one row per slot and the eight columns, a stat panel per total, and
  the rates of spilling, streaming and decoding.
- Memory: reorder buffer memory and transactions in progress.
- Kafka and schema registry: commits/aborts, errors by kind, registry calls/errors,
  commit-to-Kafka latency p50/p99 from the histogram.
- Initial snapshot: tables done of total, rows/s by table.
- Column types: undecodable columns; unchanged TOAST values filled or placeholders.
- High availability: workers waiting as standbys (pgcdc_standby).

No panel reads `up` or a job label: scraped through Kubernetes annotations, the job is
the discovery config's, not "pgcdc". A worker is up while it exports
pgcdc_start_time_seconds; a slot seen within a day without it is a worker gone (as the
PgcdcWorkerDown alert). tests/integration/test_dashboard_prometheus.py runs every
panel's query on a real Prometheus scraping a real worker.

Standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("pgcdc.json")
DS = {"type": "prometheus", "uid": "${datasource}"}
SLOT = 'slot=~"$slot"'
RATE = "[$__rate_interval]"
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

Panel = dict[str, Any]


class Layout:
    """Places panels left to right on Grafana's 24-column grid, rows top to bottom."""

    def __init__(self) -> None:
        self.panels: list[Panel] = []
        self.x = 0
        self.y = 0
        self.row_height = 0
        self.next_id = 1

    def row(self, title: str) -> None:
        self._newline()
        self._add({"type": "row", "title": title, "collapsed": False, "panels": []}, 24, 1)
        self._newline()

    def add(self, panel: Panel, w: int, h: int) -> None:
        if self.x + w > 24:
            self._newline()
        self._add(panel, w, h)

    def _add(self, panel: Panel, w: int, h: int) -> None:
        panel["id"] = self.next_id
        self.next_id += 1
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_height = max(self.row_height, h)

    def _newline(self) -> None:
        if self.x:
            self.y += self.row_height
        self.x = 0
        self.row_height = 0


def target(expr: str, legend: str = "", ref: str = "A", **extra: Any) -> dict[str, Any]:
    t: dict[str, Any] = {
        "datasource": DS,
        "expr": expr,
        "refId": ref,
        "legendFormat": legend or "__auto",
    }
    t.update(extra)
    return t


def stat(
    title: str,
    expr: str,
    unit: str,
    description: str,
    *,
    thresholds: list[tuple[float | None, str]] | None = None,
) -> Panel:
    steps = [{"color": color, "value": value} for value, color in (thresholds or [(None, "green")])]
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": [target(expr)],
        "fieldConfig": {
            "defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps}},
            "overrides": [],
        },
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "area",
            "textMode": "auto",
            "justifyMode": "auto",
            "orientation": "auto",
        },
    }


def timeseries(
    title: str, targets: list[dict[str, Any]], unit: str, description: str, *, stack: bool = False
) -> Panel:
    custom: dict[str, Any] = {
        "drawStyle": "line",
        "lineWidth": 1,
        "fillOpacity": 10,
        "showPoints": "never",
        "spanNulls": False,
    }
    if stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DS,
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit, "custom": custom}, "overrides": []},
        "options": {
            "legend": {
                "displayMode": "table",
                "placement": "bottom",
                "calcs": ["lastNotNull", "max"],
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    }


def slot_stats_table() -> Panel:
    """pg_stat_replication_slots, one row per slot, the same eight columns."""
    refs = [chr(ord("A") + i) for i in range(len(SLOT_STATS))]
    targets = [
        target(
            f"sum by (slot) (pgcdc_slot_{name}_total{{{SLOT}}})",
            ref=ref,
            format="table",
            instant=True,
            range=False,
        )
        for name, ref in zip(SLOT_STATS, refs, strict=True)
    ]
    rename = {f"Value #{ref}": name for name, ref in zip(SLOT_STATS, refs, strict=True)}
    order = {"slot": 0} | {name: i + 1 for i, name in enumerate(SLOT_STATS)}
    overrides = [
        {
            "matcher": {"id": "byName", "options": name},
            "properties": [{"id": "unit", "value": "bytes"}],
        }
        for name in SLOT_STATS
        if name.endswith("_bytes")
    ]
    return {
        "type": "table",
        "title": "pg_stat_replication_slots (mirror)",
        "description": "The counters of PostgreSQL's pg_stat_replication_slots view, kept by "
        "pgcdc's reorder buffer with the same meanings, one row per slot. "
        "Like the view, they start from zero when the worker restarts.",
        "datasource": DS,
        "targets": targets,
        "transformations": [
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": {"Time": True},
                    "renameByName": rename,
                    "indexByName": order,
                },
            },
        ],
        "fieldConfig": {"defaults": {"unit": "short"}, "overrides": overrides},
        "options": {"showHeader": True, "cellHeight": "sm"},
    }


STAT_HELP = {
    "spill_txns": "Transactions spilled to disk after exceeding decoding.work_mem.",
    "spill_count": "Times transactions were spilled to disk (one transaction may spill "
    "many times).",
    "spill_bytes": "Decoded transaction data spilled to disk.",
    "stream_txns": "In-progress transactions streamed to the output plugin.",
    "stream_count": "Times in-progress transactions were streamed.",
    "stream_bytes": "Decoded data of in-progress transactions streamed.",
    "total_txns": "Decoded transactions sent to the output plugin.",
    "total_bytes": "Decoded transaction data sent to the output plugin.",
}


def build() -> dict[str, Any]:
    g = Layout()
    sel = f"{{{SLOT}}}"

    g.row("Overview")
    g.add(
        stat(
            "Worker up",
            f"min(max by (slot) (pgcdc_start_time_seconds{sel} > bool 0) or on (slot) "
            f"0 * max by (slot) (max_over_time(pgcdc_start_time_seconds{sel}[1d])))",
            "none",
            "1 when a worker reports for every slot seen in the last day, 0 when one has "
            "none (its target fails its scrapes, or is gone).",
            thresholds=[(None, "red"), (1, "green")],
        ),
        4,
        4,
    )
    g.add(
        stat(
            "Lag (bytes)",
            f"max(pgcdc_lag_bytes{sel})",
            "bytes",
            "Server's current WAL LSN minus the LSN confirmed in Kafka.",
            thresholds=[(None, "green"), (268435456, "orange"), (1073741824, "red")],
        ),
        4,
        4,
    )
    g.add(
        stat(
            "Lag (seconds)",
            f"max(pgcdc_lag_seconds{sel})",
            "s",
            "Time behind the source's last change (Debezium's MilliSecondsBehindSource); "
            "0 while the worker is caught up, also on an idle database.",
            thresholds=[(None, "green"), (60, "orange"), (300, "red")],
        ),
        4,
        4,
    )
    g.add(
        stat(
            "Events/s",
            f"sum(rate(pgcdc_events_total{sel}{RATE}))",
            "ops",
            "Change events published to Kafka per second, all topics.",
        ),
        4,
        4,
    )
    g.add(
        stat(
            "Reorder buffer memory",
            f"sum(pgcdc_reorder_buffer_memory_bytes{sel})",
            "bytes",
            "Bytes of decoded changes held in memory by the reorder buffer.",
        ),
        4,
        4,
    )
    g.add(
        stat(
            "Transactions in progress",
            f"sum(pgcdc_reorder_buffer_transactions{sel})",
            "short",
            "Transactions the reorder buffer is assembling.",
        ),
        4,
        4,
    )

    g.row("Worker and state volume")
    g.add(
        stat(
            "Restarts (last hour)",
            f"sum(changes((max by (slot) (pgcdc_start_time_seconds{sel}))[1h:]))",
            "short",
            "Times a worker started again in the last hour (its start time changed); "
            "in-process replays after an aborted Kafka transaction are not restarts.",
            thresholds=[(None, "green"), (1, "orange"), (3, "red")],
        ),
        4,
        8,
    )
    g.add(
        timeseries(
            "Uptime",
            [target(f"time() - max by (slot) (pgcdc_start_time_seconds{sel})", "{{slot}}")],
            "s",
            "Time since the worker of each slot started.",
        ),
        8,
        8,
    )
    g.add(
        stat(
            "State volume used",
            f"max(1 - pgcdc_state_volume_free_bytes{sel} / pgcdc_state_volume_size_bytes{sel})",
            "percentunit",
            "Share of the file system of decoding.state_dir in use. The reorder buffer "
            "spills transactions larger than decoding.work_mem there; full, it cannot.",
            thresholds=[(None, "green"), (0.75, "orange"), (0.95, "red")],
        ),
        4,
        8,
    )
    g.add(
        timeseries(
            "State volume free",
            [
                target(f"min by (slot) (pgcdc_state_volume_free_bytes{sel})", "free {{slot}}"),
                target(f"max by (slot) (pgcdc_state_volume_size_bytes{sel})", "size {{slot}}", "B"),
            ],
            "bytes",
            "Bytes free for pgcdc, and the size, of the file system of decoding.state_dir.",
        ),
        8,
        8,
    )

    g.row("Lag")
    g.add(
        timeseries(
            "Lag (bytes)",
            [target(f"pgcdc_lag_bytes{sel}", "{{slot}}")],
            "bytes",
            "Server's current WAL LSN minus the confirmed LSN, per slot: the WAL the "
            "server retains for the slot beyond what Kafka has.",
        ),
        8,
        8,
    )
    g.add(
        timeseries(
            "Lag (seconds)",
            [target(f"pgcdc_lag_seconds{sel}", "{{slot}}")],
            "s",
            "Time behind the source's last change: at each Kafka commit, the time since "
            "the source commit of its last transaction; 0 once the worker has confirmed "
            "everything the server sent, so an idle database shows 0.",
        ),
        8,
        8,
    )
    behind = [
        target(f"pgcdc_server_wal_lsn{sel} - pgcdc_{name}_lsn{sel}", f"{name} {{{{slot}}}}", ref)
        for name, ref in (("received", "A"), ("decoded", "B"), ("confirmed", "C"), ("restart", "D"))
    ]
    g.add(
        timeseries(
            "Positions behind the server's WAL",
            behind,
            "bytes",
            "How far the received, decoded, confirmed and restart LSNs are behind "
            "the server's current WAL LSN.",
        ),
        8,
        8,
    )

    g.row("Throughput")
    g.add(
        timeseries(
            "Events/s by topic and op",
            [
                target(
                    f"sum by (topic, op) (rate(pgcdc_events_total{sel}{RATE}))", "{{topic}} {{op}}"
                )
            ],
            "ops",
            "Change events published per second, by topic and Debezium op (c, u, d, r, t, m).",
            stack=True,
        ),
        12,
        8,
    )
    g.add(
        timeseries(
            "WAL records/s",
            [target(f"sum by (slot) (rate(pgcdc_wal_records_total{sel}{RATE}))", "{{slot}}")],
            "ops",
            "WAL records decoded per second.",
        ),
        6,
        8,
    )
    g.add(
        timeseries(
            "Kafka transactions/s",
            [
                target(
                    f"sum(rate(pgcdc_kafka_transactions_committed_total{sel}{RATE}))",
                    "committed",
                    "A",
                ),
                target(
                    f"sum(rate(pgcdc_kafka_transactions_aborted_total{sel}{RATE}))", "aborted", "B"
                ),
            ],
            "ops",
            "Kafka transactions committed and aborted per second.",
        ),
        6,
        8,
    )

    g.row("Slot statistics (pg_stat_replication_slots)")
    g.add(slot_stats_table(), 24, 5)
    for name in SLOT_STATS:
        unit = "bytes" if name.endswith("_bytes") else "short"
        g.add(stat(name, f"sum(pgcdc_slot_{name}_total{sel})", unit, STAT_HELP[name]), 3, 4)
    # pg_stat_replication_slots has no total_count: a transaction is sent once.
    for kind, counters in (
        ("spill", ("txns", "count")),
        ("stream", ("txns", "count")),
        ("total", ("txns",)),
    ):
        names = [f"{kind}_{c}" for c in counters]
        g.add(
            timeseries(
                " and ".join(names) + " per second",
                [
                    target(
                        f"sum by (slot) (rate(pgcdc_slot_{name}_total{sel}{RATE}))",
                        f"{name} {{{{slot}}}}",
                        chr(ord("A") + i),
                    )
                    for i, name in enumerate(names)
                ],
                "ops",
                f"Rate of {', '.join(names)}.",
            ),
            4,
            8,
        )
        g.add(
            timeseries(
                f"{kind}_bytes per second",
                [
                    target(
                        f"sum by (slot) (rate(pgcdc_slot_{kind}_bytes_total{sel}{RATE}))",
                        f"{kind}_bytes {{{{slot}}}}",
                    )
                ],
                "Bps",
                f"Rate of {kind}_bytes.",
            ),
            4,
            8,
        )

    g.row("Memory")
    g.add(
        timeseries(
            "Reorder buffer memory",
            [target(f"pgcdc_reorder_buffer_memory_bytes{sel}", "{{slot}}")],
            "bytes",
            "Bytes of changes buffered in memory; the largest transaction is spilled when this "
            "exceeds decoding.work_mem.",
        ),
        12,
        8,
    )
    g.add(
        timeseries(
            "Transactions in progress",
            [target(f"pgcdc_reorder_buffer_transactions{sel}", "{{slot}}")],
            "short",
            "Transactions in progress in the reorder buffer.",
        ),
        12,
        8,
    )

    g.row("Kafka and schema registry")
    g.add(
        timeseries(
            "Kafka errors/s by kind",
            [target(f"sum by (kind) (rate(pgcdc_kafka_errors_total{sel}{RATE}))", "{{kind}}")],
            "ops",
            "Errors reported by the Kafka producer, by kind.",
        ),
        8,
        8,
    )
    g.add(
        timeseries(
            "Schema registry calls and errors/s",
            [
                target(f"sum(rate(pgcdc_registry_calls_total{sel}{RATE}))", "calls", "A"),
                target(f"sum(rate(pgcdc_registry_errors_total{sel}{RATE}))", "errors", "B"),
            ],
            "ops",
            "Calls to the schema registry and the failed ones.",
        ),
        8,
        8,
    )
    latency = f"sum by (le) (rate(pgcdc_commit_to_kafka_seconds_bucket{sel}{RATE}))"
    g.add(
        timeseries(
            "Commit-to-Kafka latency",
            [
                target(f"histogram_quantile(0.5, {latency})", "p50", "A"),
                target(f"histogram_quantile(0.99, {latency})", "p99", "B"),
            ],
            "s",
            "Time from the source commit to the Kafka commit of the transaction.",
        ),
        8,
        8,
    )

    g.row("Initial snapshot")
    g.add(
        stat(
            "Snapshot tables done",
            f"sum(pgcdc_snapshot_tables_done{sel}) / sum(pgcdc_snapshot_tables_total{sel})",
            "percentunit",
            "Share of the captured tables the initial snapshot has read.",
            thresholds=[(None, "blue"), (1, "green")],
        ),
        6,
        8,
    )
    g.add(
        timeseries(
            "Snapshot rows/s by table",
            [target(f"sum by (table) (rate(pgcdc_snapshot_rows_total{sel}{RATE}))", "{{table}}")],
            "ops",
            "Rows read by the initial snapshot per second, by table.",
        ),
        18,
        8,
    )
    g.add(
        timeseries(
            "Snapshot chunks",
            [
                target(f"sum(rate(pgcdc_snapshot_chunks_total{sel}{RATE}))", "published"),
                target(f"sum(rate(pgcdc_snapshot_chunk_retries_total{sel}{RATE}))", "read again"),
            ],
            "ops",
            "Chunks published per second, and chunks read again (a conflict inside the "
            "watermark window, or a changed table definition).",
        ),
        12,
        8,
    )
    g.add(
        timeseries(
            "Snapshot progress of the current table",
            [
                target(
                    f"sum by (table) (pgcdc_snapshot_rows_total{sel})"
                    f" / sum by (table) (pgcdc_snapshot_rows_estimate{sel} > 0)",
                    "{{table}}",
                ),
                target(f"max by (table) (pgcdc_snapshot_current_table{sel})", "current: {{table}}"),
            ],
            "percentunit",
            "Rows published by the snapshot over the pg_class.reltuples estimate, for the "
            "table whose chunks are being published.",
        ),
        12,
        8,
    )

    g.row("Column types")
    g.add(
        timeseries(
            "Columns of types pgcdc cannot decode",
            # One query: a worker runs with one decoding.unknown_types, so only one
            # of the two families has series at a time.
            [
                target(
                    f'label_replace(pgcdc_omitted_columns{sel}, "mode", "omit", "", "")'
                    f' or label_replace(pgcdc_bytes_columns{sel}, "mode", "bytes", "", "")',
                    "{{mode}}: {{table}}.{{column}} ({{type}})",
                ),
            ],
            "short",
            "Captured columns whose type pgcdc cannot decode, as decoding.unknown_types "
            "decided at start or when the table was first seen: left out of every event "
            "(omit), or published as their stored bytes (bytes).",
        ),
        24,
        8,
    )
    g.add(
        timeseries(
            "Unchanged TOAST values",
            [
                target(f"sum(rate(pgcdc_toast_filled_total{sel}{RATE}))", "filled"),
                target(
                    f"sum by (table) (rate(pgcdc_toast_placeholders_total{sel}{RATE}))",
                    "placeholder: {{table}}",
                ),
            ],
            "ops",
            "Values an UPDATE left unchanged and the WAL did not carry: filled from the "
            "WAL cache or the TOAST table (toast.unchanged = fill), or published as "
            "__debezium_unavailable_value (placeholder mode, or the value was gone).",
        ),
        24,
        8,
    )

    g.row("High availability")
    g.add(
        timeseries(
            "Standby workers",
            [target(f"sum by (slot) (pgcdc_standby{sel})", "{{slot}}")],
            "short",
            "Workers waiting as a standby for the slot another worker holds (source.standby).",
        ),
        24,
        8,
    )

    return {
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "description": "pgcdc: lag, throughput, pg_stat_replication_slots counters, memory, "
        "Kafka and registry errors.",
        "editable": True,
        "graphTooltip": 1,
        "links": [],
        "panels": g.panels,
        "refresh": "30s",
        "schemaVersion": 41,
        "tags": ["pgcdc", "postgresql", "kafka", "cdc"],
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {"text": "Prometheus", "value": "prometheus"},
                    "hide": 0,
                    "refresh": 1,
                },
                {
                    "name": "slot",
                    "label": "Slot",
                    "type": "query",
                    "datasource": DS,
                    "query": {
                        "query": "label_values(pgcdc_start_time_seconds, slot)",
                        "refId": "slot",
                    },
                    "definition": "label_values(pgcdc_start_time_seconds, slot)",
                    "current": {"text": "All", "value": "$__all"},
                    "includeAll": True,
                    "allValue": ".*",
                    "multi": True,
                    "refresh": 2,
                    "hide": 0,
                },
            ]
        },
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": "pgcdc",
        "uid": "pgcdc",
        "version": 1,
    }


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


def main() -> int:
    OUT.write_text(render())
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
