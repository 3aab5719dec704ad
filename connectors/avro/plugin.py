"""The `avro` output plugin: committed transactions as Debezium-compatible Avro records.

Receives, through `PluginWrapper`, per source transaction in commit order:
begin → (change | truncate | message)* → commit; non-transactional messages with
`txn=None`; and `heartbeat(lsn)` from the driver on its interval (call it as
`wrapper.call("heartbeat", lsn, 0, lsn)`). Hands on, through `ctx.write`, serialized
`OutputRecord`s (connectors.kafka.sink) in this order per transaction:

- `<prefix>.transaction`: BEGIN (before the transaction's first published event) and
  END (at commit, with `event_count` and `data_collections`), as Debezium's
  TransactionMonitor. Transaction ids are Debezium's `"<xid>:<lsn>"` with the LSN of the
  moment: BEGIN's and each event's `transaction.id` carry that event's LSN, END's the
  commit's end LSN. Every transaction with a row change, a published logical message
  or a schema change gets BEGIN/END; a schema-change event is not counted in
  `event_count` (it lies on no data collection's topic). A logical message counts as an
  event of its own data collection `MESSAGE_COLLECTION` (Debezium names each message its
  own collection, with the Java object's identity hash appended; pgcdc leaves the hash
  off, so the name is stable);
- `<prefix>.<schema>.<table>`: one envelope per change, keyed by the primary key or
  replica-identity columns (record `<prefix>.<schema>.<table>.Key`; no key when the table
  has none). Value: record `<...>.Envelope` (connect.version 2) {before, after, source,
  transaction, op, ts_ms, ts_us, ts_ns}; ops c/u/d (r during a snapshot, when the driver
  sets `ctx.state["snapshot"]` to Debezium's snapshot marker "first"/"true"/"last"/...:
  snapshot events carry no transaction block and get no BEGIN/END), t for TRUNCATE (one
  per table, no key). A DELETE is followed by a tombstone (same key, null value; a null
  key for a table without one, as Debezium) when `kafka.tombstones_on_delete`. An UPDATE
  that changes the key becomes, as in Debezium, a DELETE (+ tombstone), both with header
  `__debezium.newkey`, and a CREATE of the new key with header `__debezium.oldkey`; the
  headers hold the key as JSON text. Every change event and tombstone carries Debezium's
  context headers (`CONTEXT_HEADERS`: connectorLogicalName = the topic prefix, taskId
  "0", connectorName "postgresql", runId a UUIDv7 per plugin start);
- `<prefix>.message`: logical messages (op m) whose prefix is in
  `kafka.message_prefixes` (empty: all), keyed by {prefix}: record
  `io.debezium.connector.postgresql.MessageValue` {op, ts_ms, source, transaction,
  message{prefix, content}}, the transaction block set for transactional messages. Their
  LSN is the end of the message record, as PostgreSQL hands messages to pgoutput;
- `<prefix>.schema-changes`: one schema-change event per DDL message of pgcdc's own
  capture (prefix `service.schema.history.DDL_PREFIX`, or the legacy `pgcdc.ddl`).
  Those messages reach the message topic only with `kafka.publish_ddl_messages`;
- `__debezium-heartbeat.<prefix>` (`kafka.heartbeat_topic_prefix`): Debezium's
  {ts_ms}, keyed by {serverName: prefix}.

`source` is Debezium 3.6's PostgreSQL SourceInfo: version (`DEBEZIUM_VERSION`), connector,
name, ts_ms/ts_us/ts_ns (the commit time), snapshot, db, sequence, schema, table, txId,
lsn, xmin, origin, origin_lsn. `sequence` is `["<end LSN of the previous commit>",
"<lsn>"]`, `[null, ...]` until a commit has been seen since the plugin started, and
always for the rows of an initial snapshot (as Debezium's; incremental snapshot rows
carry the stream's); a non-transactional message moves the previous-commit LSN to its own,
as Debezium's. pgcdc does not resolve replication-origin names, so origin and origin_lsn
stay null.

Schemas (connectors.avro.schema) are registered under TopicNameStrategy subjects
(`<topic>-key`, `<topic>-value`) and written in the Confluent wire format with fastavro
(connectors.avro.codec: the bytes confluent_kafka's AvroSerializer would write). They
are built once per table definition, cached by (relation oid, `defined_at`), with that
definition's row encoders (connectors.avro.codec.RowEncoder); a new definition registers a new
version. A subject's compatibility is set to BACKWARD when it is first registered. The
`source` record's per-transaction part is built once per table and transaction; only
lsn and sequence change per event. A rejected schema raises
`RegistryRejectedError`, before anything of the change is written (the sink commits
nothing of that source transaction, so no position is lost). An unreachable registry is
retried with exponential backoff, then raises `RegistryUnavailableError`; a failure no
retry cures (connectors.avro.registry_client: TLS, refused credentials) raises its
fatal error at once. The client's URL, CA and credentials come from
`registry_client.client_conf`.

Filters (settings.filters): include/exclude lists of schemas, tables ("schema.table")
and columns ("schema.table.column"), each entry an anchored regular expression as in
Debezium's *.include.list options. A key column is never excluded.

Plugin options (`ctx.options`): `decimal.handling.mode` = precise (default) | string |
double; `hstore.handling.mode` = json (default) | map. Settings: `AvroPlugin(settings)`,
else `ctx.state["settings"]`, else `load_settings()` at startup.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import structlog
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from connectors.avro.codec import AvroEncoder, KeyFromValue, RowEncoder, parse_writer_schema
from connectors.avro.extension_types import HSTORE_MODES
from connectors.avro.native_rows import NativeRows
from connectors.avro.registry_client import client_conf, final_error
from connectors.avro.schema import (
    CONNECTOR,
    DEBEZIUM_VERSION,
    DECIMAL_MODES,
    build_table_plan,
    key_values,
    static_with_refs,
)
from connectors.avro.table import Serialize
from connectors.avro.table import Table as _Table
from service.backoff import Backoff
from service.config import Settings, load_settings
from service.errors import (
    ConfigError,
    PluginError,
    RegistryRejectedError,
    RegistryUnavailableError,
)
from service.impl import native_row_core
from service.output.api import (
    ChangeOp,
    Message,
    OutputRecord,
    PluginContext,
    RelationInfo,
    RowChange,
    TruncateChange,
    TxnInfo,
)
from service.output.filters import TableFilter, matches, patterns
from service.pgconst import UNIX_EPOCH_USECS
from service.schema.history import DDL_PREFIXES, INTERNAL_PREFIX
from service.schema.tabledef import TableDef
from service.tablesnap.markers import is_initial

log = structlog.get_logger(__name__)

# What Debezium's PostgreSQL connector calls the data collection of a logical message
# (LogicalDecodingMessageMonitor's id class), without the per-object "@<hash>".
MESSAGE_COLLECTION = (
    "io.debezium.connector.postgresql.LogicalDecodingMessageMonitor$LogicalDecodingMessageId"
)
TASK_ID = "0"
RETRY_BUDGET_S = 30.0
_BACKOFF_START_S, _BACKOFF_MAX_S = 0.2, 5.0


# java.sql.Types codes for the schema-change event's columns (Debezium's jdbcType).
_JDBC = {
    16: -7,
    17: -2,
    20: -5,
    21: 5,
    23: 4,
    700: 7,
    701: 8,
    1700: 2,
    25: 12,
    1043: 12,
    1042: 1,
    1082: 91,
    1083: 92,
    1114: 93,
    1184: 2014,
    1266: 2013,
}


class Registrar:
    """Registers schemas and hands out serializers, with BACKWARD compatibility."""

    def __init__(self, settings: Settings, retry_budget_s: float = RETRY_BUDGET_S) -> None:
        conf = {**client_conf(settings), "max.retries": 0, "timeout": 10}
        self.settings = settings
        self.url = settings.registry.url
        self.client = SchemaRegistryClient(conf)
        self.retry_budget_s = retry_budget_s
        # Parsed writer schemas by (subject, schema id): one parse per registered version.
        self._parsed: dict[tuple[str, int], Any] = {}
        self.calls = 0  # registry requests made (for metrics)
        self.errors = 0  # of which failed

    def close(self) -> None:
        self.client.close()

    def _call(self, what: str, subject: str, fn: Callable[[], Any]) -> Any:
        backoff = Backoff(self.retry_budget_s, _BACKOFF_START_S, _BACKOFF_MAX_S)
        while True:
            self.calls += 1
            try:
                return fn()
            except SchemaRegistryError as exc:
                self.errors += 1
                final = final_error(exc, self.settings)
                if final is not None:
                    raise final from exc
                if exc.http_status_code in (409, 422):
                    raise RegistryRejectedError(
                        f"schema registry at {self.url} rejected the {what} of subject "
                        f"{subject}: {exc.error_message} (HTTP {exc.http_status_code}, "
                        f"error {exc.error_code}); the worker stops without moving its position",
                        field=subject,
                    ) from exc
                if exc.http_status_code < 500 and exc.http_status_code not in (408, 429):
                    raise
                failure: Exception = exc
            except Exception as exc:  # httpx/socket errors: the registry is down
                self.errors += 1
                final = final_error(exc, self.settings)
                if final is not None:  # TLS that no retry cures
                    raise final from exc
                failure = exc
            if backoff.spent():
                raise RegistryUnavailableError(
                    f"schema registry at {self.url} unreachable for the {what} of {subject} "
                    f"after {self.retry_budget_s:.0f}s (registry.retry_budget_s): {failure}",
                    field=subject,
                ) from failure
            log.warning("registry_retry", subject=subject, error=str(failure))
            backoff.sleep()

    def _is_new(self, subject: str) -> bool:
        def versions() -> bool:
            try:
                return not self.client.get_versions(subject)
            except SchemaRegistryError as exc:
                if exc.http_status_code == 404:
                    return True
                raise

        return bool(self._call("version lookup", subject, versions))

    def serializer(self, topic: str, is_key: bool, schema: Mapping[str, Any]) -> Serialize:
        """Register `schema` for `topic`'s key or value and return its serializer.

        The serializer writes what confluent_kafka's AvroSerializer would
        (connectors.avro.codec); the schema is parsed once per (subject, schema id).
        """
        subject = f"{topic}-{'key' if is_key else 'value'}"
        text = json.dumps(schema, separators=(",", ":"))
        if self._is_new(subject):
            self._call(
                "compatibility setting",
                subject,
                lambda: self.client.set_compatibility(subject, "BACKWARD"),
            )
        schema_id = int(
            self._call(
                "registration",
                subject,
                lambda: self.client.register_schema(subject, Schema(text, "AVRO")),
            )
        )
        parsed = self._parsed.get((subject, schema_id))
        if parsed is None:
            parsed = self._parsed[(subject, schema_id)] = parse_writer_schema(text)
        return AvroEncoder(parsed, schema_id).encode


def _now_ns() -> int:
    """The wall clock the envelopes' ts fields read (this module's `time`, for both the
    Python and the native path)."""
    return time.time_ns()


def uuid7() -> str:
    """A UUIDv7 (RFC 9562: 48-bit Unix ms, version 7, random rest), as Debezium's runId."""
    ms = time.time_ns() // 1_000_000
    raw = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    raw[6] = 0x70 | (raw[6] & 0x0F)
    raw[8] = 0x80 | (raw[8] & 0x3F)
    return str(uuid.UUID(bytes=bytes(raw)))


def _json_value(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return _json_value(value[1])  # a named union branch (fastavro's tuple notation)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else str(value)
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value


def key_json(datum: Mapping[str, Any]) -> bytes:
    """A Key record as the JSON text of Debezium's `__debezium.newkey`/`oldkey` headers
    (Connect's header converter: compact JSON, bytes as base64)."""
    return json.dumps(_json_value(dict(datum)), separators=(",", ":")).encode()


def transaction_datum(
    status: str,
    txn_id: str,
    event_count: int | None,
    collections: list[tuple[str, int]] | None,
    ts_ms: int,
) -> dict[str, Any]:
    """A TransactionMetadataValue datum (schemas/transaction_value.avsc), as
    Debezium's TransactionMonitor fills it: BEGIN without counts, END with them."""
    return {
        "status": status,
        "id": txn_id,
        "event_count": event_count,
        "data_collections": None
        if collections is None
        else [{"data_collection": c, "event_count": n} for c, n in collections],
        "ts_ms": ts_ms,
    }


@dataclass(slots=True)
class _TxnState:
    """Per-transaction counters; `began` says whether BEGIN was written.

    `ts_us` is the commit time (µs since 1970; the clock at BEGIN when unknown).
    `collections` lists (data collection, event count) in first-event order; a message
    is a collection of its own (MESSAGE_COLLECTION), so it appears once per message.
    `entries` finds a table's entry of `collections` (its count is the table's order).
    `sources` holds, per (data collection, snapshot marker), the parts of a change's
    `source` record that are the same for every change of the transaction (all but
    lsn and sequence), and the sequence text up to this change's LSN. Only filled when
    the commit time is known: otherwise ts_ms is the clock at each change.
    """

    xid: int
    ts_us: int
    began: bool = False
    total: int = 0
    collections: list[list[Any]] = field(default_factory=list)
    entries: dict[str, list[Any]] = field(default_factory=dict)  # a table's `collections` entry
    sources: dict[tuple[str, str], tuple[dict[str, Any], str]] = field(default_factory=dict)

    @property
    def ts_ms(self) -> int:
        return self.ts_us // 1000


class AvroPlugin:
    """The `avro` output plugin (see the module docstring)."""

    can_stream = False
    two_phase = False

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings
        self._tables: dict[tuple[int, int], _Table | None] = {}
        self._statics: dict[str, tuple[Serialize, Serialize]] = {}
        self._txn: _TxnState | None = None
        # End LSN of the last commit seen since startup (Debezium's lastCommitLsn).
        self._last_commit_lsn: int | None = None
        self.run_id = uuid7()
        self.context_headers: tuple[tuple[str, bytes], ...] = ()
        self._warned: set[tuple[str, str]] = set()
        self.registrar: Registrar | None = None
        # The native row encoder (connectors.avro.native_rows), when PGCDC_IMPL selects it.
        self.native_rows: NativeRows | None = None

    # --- life cycle ------------------------------------------------------------------

    def startup(self, ctx: PluginContext, options: Mapping[str, str], is_init: bool) -> None:
        if self.settings is None:
            given = ctx.state.get("settings")
            self.settings = given if isinstance(given, Settings) else load_settings()
        s = self.settings
        self.prefix = s.kafka.topic_prefix
        self.decimal_mode = options.get("decimal.handling.mode", "precise")
        if self.decimal_mode not in DECIMAL_MODES:
            raise ConfigError(
                f"decimal.handling.mode must be one of {DECIMAL_MODES}",
                field="decimal.handling.mode",
            )
        self.hstore_mode = options.get("hstore.handling.mode", "json")
        if self.hstore_mode not in HSTORE_MODES:
            raise ConfigError(
                f"hstore.handling.mode must be one of {HSTORE_MODES}",
                field="hstore.handling.mode",
            )
        self._filter = TableFilter(s.filters)
        self._msg_prefixes = patterns(s.kafka.message_prefixes, "kafka.message_prefixes")
        self.heartbeat_topic = f"{s.kafka.heartbeat_topic_prefix}.{self.prefix}"
        # Debezium's CommonConnectorConfig context headers, on every change record.
        self.context_headers = (
            ("__debezium.context.connectorLogicalName", self.prefix.encode()),
            ("__debezium.context.taskId", TASK_ID.encode()),
            ("__debezium.context.connectorName", CONNECTOR.encode()),
            ("__debezium.context.runId", self.run_id.encode()),
        )
        self.registrar = Registrar(s, s.registry.retry_budget_s)
        core = native_row_core()
        self.native_rows = None if core is None else NativeRows(self, core, _now_ns)

    def shutdown(self, ctx: PluginContext) -> None:
        self._tables.clear()
        self._statics.clear()
        if self.registrar is not None:
            self.registrar.close()
            self.registrar = None

    # --- helpers ---------------------------------------------------------------------

    def _warn(self, event: str, column: str) -> None:
        if (event, column) not in self._warned:
            self._warned.add((event, column))
            log.warning(event, column=column)

    def _registrar(self) -> Registrar:
        if self.registrar is None:
            raise PluginError("avro plugin used before startup")
        return self.registrar

    def _static(self, topic: str, name: str) -> tuple[Serialize, Serialize]:
        found = self._statics.get(topic)
        if found is None:
            reg = self._registrar()
            found = (
                reg.serializer(topic, True, static_with_refs(f"{name}_key")),
                reg.serializer(topic, False, static_with_refs(f"{name}_value")),
            )
            self._statics[topic] = found
        return found

    def included(self, rel: RelationInfo) -> bool:
        return self._filter(rel.schema, rel.name)

    def _table(self, rel: RelationInfo) -> _Table | None:
        """The registered plan of this definition, or None when the table is filtered."""
        cache_key = (rel.oid, rel.defined_at)
        if cache_key in self._tables:
            return self._tables[cache_key]
        table: _Table | None = None
        if self.included(rel):
            excluded = self._filter.excluded_columns(
                rel.schema, rel.name, [c.name for c in rel.columns]
            )
            plan = build_table_plan(
                self.prefix,
                rel,
                excluded,
                self.decimal_mode,
                self._warn,
                hstore_mode=self.hstore_mode,
            )
            reg = self._registrar()
            key = reg.serializer(plan.topic, True, plan.key_schema) if plan.key_schema else None
            value = reg.serializer(plan.topic, False, plan.envelope_schema)
            key_of = KeyFromValue(plan.key_fields, plan.fields) if key is not None else None
            table = _Table(
                plan,
                key,
                value,
                RowEncoder(plan.fields, self._warn),
                key_of,
                rel.schema,
                rel.name,
                f"{rel.schema}.{rel.name}",
                f"{plan.namespace}.Value",
            )
            log.info("avro_schema_registered", topic=plan.topic, defined_at=rel.defined_at)
        self._tables[cache_key] = table
        return table

    def _source(
        self, txn: TxnInfo | None, schema: str, table: str, lsn: int, snapshot: str = "false"
    ) -> dict[str, Any]:
        assert self.settings is not None
        commit_us = (
            txn.commit_time + UNIX_EPOCH_USECS
            if txn and txn.commit_time
            else time.time_ns() // 1000
        )
        # Debezium's sequence: the JSON array ["<last commit end lsn>","<this lsn>"];
        # an initial snapshot's rows have no last commit (service.tablesnap.markers).
        last_lsn = None if is_initial(snapshot) else self._last_commit_lsn
        last = "null" if last_lsn is None else f'"{last_lsn}"'
        return {
            "version": DEBEZIUM_VERSION,
            "connector": CONNECTOR,
            "name": self.prefix,
            "ts_ms": commit_us // 1000,
            "snapshot": snapshot,
            "db": self.settings.source.dbname,
            "sequence": f'[{last},"{lsn}"]',
            "ts_us": commit_us,
            "ts_ns": commit_us * 1000,
            "schema": schema,
            "table": table,
            "txId": txn.xid if txn else None,
            "lsn": lsn,
            "xmin": None,
            "origin": None,
            "origin_lsn": None,
        }

    def _row_source(
        self,
        st: _TxnState,
        txn: TxnInfo,
        t: _Table,
        lsn: int,
        snapshot: str,
    ) -> dict[str, Any]:
        """`_source(txn, t.schema, t.table, lsn, snapshot)`, from the transaction's
        constant part. Union branches are named (fastavro's tuple notation), which
        writes the same bytes without trying each branch."""
        if not txn.commit_time:
            return self._source(txn, t.schema, t.table, lsn, snapshot)
        found = st.sources.get((t.collection, snapshot))
        if found is None:
            const = self._source(txn, t.schema, t.table, lsn, snapshot)
            const["snapshot"] = ("string", snapshot)
            const["txId"] = ("long", txn.xid)
            const["ts_us"] = ("long", const["ts_us"])
            const["ts_ns"] = ("long", const["ts_ns"])
            prefix = const["sequence"][: -len(f'{lsn}"]')]
            found = st.sources[(t.collection, snapshot)] = (const, prefix)
        const, prefix = found
        src = const.copy()
        src["sequence"] = ("string", f'{prefix}{lsn}"]')
        src["lsn"] = ("long", lsn)
        return src

    def _meta_topic(self) -> str:
        return f"{self.prefix}.transaction"

    def _txn_state(self, lsn: int) -> _TxnState:
        st = self._txn
        if st is None:
            raise PluginError("avro plugin got a change outside a transaction", lsn=lsn)
        return st

    def _begin_once(self, ctx: PluginContext, st: _TxnState, lsn: int) -> None:
        """BEGIN, at the transaction's first published event, with that event's id (as
        Debezium's TransactionMonitor, which begins at the first data event)."""
        if st.began:
            return
        txn_id = f"{st.xid}:{lsn}"
        self._transaction_event(ctx, "BEGIN", txn_id, None, None, st.ts_ms)
        st.began = True

    def _transaction_event(
        self,
        ctx: PluginContext,
        status: str,
        txn_id: str,
        event_count: int | None,
        collections: list[tuple[str, int]] | None,
        ts_ms: int,
    ) -> None:
        """One transaction metadata event (TransactionMetadataKey/Value), written by the
        native core when it is built (byte for byte fastavro's), else by fastavro."""
        topic = self._meta_topic()
        serializers = self._static(topic, "transaction")
        native = self.native_rows
        pair = (
            None
            if native is None
            else native.transaction_record(
                serializers, status, txn_id, event_count, collections, ts_ms
            )
        )
        if pair is None:
            ser_key, ser_value = serializers
            datum = transaction_datum(status, txn_id, event_count, collections, ts_ms)
            pair = ser_key({"id": txn_id}), ser_value(datum)
        ctx.write(OutputRecord(topic, pair[0], pair[1]))

    def _count(self, st: _TxnState, collection: str) -> dict[str, Any]:
        """Count one event of `collection`; its transaction block's orders."""
        total, order = self._order(st, collection)
        return {"total_order": total, "data_collection_order": order}

    @staticmethod
    def _order(st: _TxnState, collection: str, n: int = 1) -> tuple[int, int]:
        """Count `n` events of `collection` (one of the message collection): the first's
        (total_order, data_collection_order)."""
        st.total += n
        if collection == MESSAGE_COLLECTION:
            assert n == 1
            st.collections.append([collection, 1])
            return st.total, 1
        entry = st.entries.get(collection)
        if entry is None:
            entry = st.entries[collection] = [collection, 0]
            st.collections.append(entry)
        order = entry[1] + 1
        entry[1] += n
        return st.total - n + 1, order

    @staticmethod
    def _next_order(st: _TxnState, collection: str) -> tuple[int, int]:
        """The orders `_order` would give the next event of `collection`, uncounted."""
        entry = st.entries.get(collection)
        return st.total + 1, (0 if entry is None else entry[1]) + 1

    def _event(
        self,
        ctx: PluginContext,
        txn: TxnInfo,
        t: _Table,
        op: str,
        *,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        key: bytes | None,
        lsn: int,
        headers: tuple[tuple[str, bytes], ...] = (),
    ) -> None:
        """Write one envelope, BEGIN first if it is the transaction's first event.

        Snapshot reads (`ctx.state["snapshot"]` set) are outside any transaction, as
        Debezium's: no BEGIN, no block, not counted."""
        st = self._txn_state(lsn)
        snapshot = ctx.state.get("snapshot")
        block: tuple[str, dict[str, Any]] | None = None
        if isinstance(snapshot, str):
            marker = snapshot
        else:
            marker = "false"
            self._begin_once(ctx, st, lsn)
            block = ("event.block", {"id": f"{st.xid}:{lsn}", **self._count(st, t.collection)})
        now_ns = time.time_ns()
        # Union branches are named explicitly (fastavro's tuple notation): it skips
        # trying each branch against the datum, a third of the serialization time.
        value = {
            "before": None if before is None else (t.value_name, before),
            "after": None if after is None else (t.value_name, after),
            "source": self._row_source(st, txn, t, lsn, marker),
            "transaction": block,
            "op": op,
            "ts_ms": now_ns // 1_000_000,
            "ts_us": now_ns // 1000,
            "ts_ns": now_ns,
        }
        ctx.write(
            OutputRecord(
                t.plan.topic, key, t.value(value), (*headers, *self.context_headers), op=op
            )
        )

    def _tombstone(
        self,
        ctx: PluginContext,
        t: _Table,
        key: bytes | None,
        headers: tuple[tuple[str, bytes], ...] = (),
    ) -> None:
        ctx.write(OutputRecord(t.plan.topic, key, None, (*headers, *self.context_headers)))

    # --- callbacks -------------------------------------------------------------------

    def begin(self, ctx: PluginContext, txn: TxnInfo) -> None:
        ts_us = txn.commit_time + UNIX_EPOCH_USECS if txn.commit_time else time.time_ns() // 1000
        self._txn = _TxnState(txn.xid, ts_us)

    def change(self, ctx: PluginContext, txn: TxnInfo, change: RowChange) -> None:
        rel = change.relation
        cached, tables = (rel.oid, rel.defined_at), self._tables
        t = tables[cached] if cached in tables else self._table(rel)  # _table's hit, inlined
        if t is None:
            return
        if self.native_rows is not None and self.native_rows.change(ctx, txn, t, change):
            return
        self.change_python(ctx, txn, t, change)

    def changes(self, ctx: PluginContext, txn: TxnInfo, changes: Sequence[RowChange]) -> None:
        """`change` for each of a run of changes (pgcdc's batched callback): through the
        native encoder's runs when it is on."""
        if self.native_rows is not None:
            self.native_rows.changes(ctx, txn, changes)
            return
        for change in changes:
            ctx.write_lsn = change.lsn
            self.change(ctx, txn, change)

    def snapshot_rows(
        self,
        ctx: PluginContext,
        txn: TxnInfo,
        rel: RelationInfo,
        table: TableDef,
        chunk: Any,
        fields: Mapping[str, int],
        rows: Sequence[int],
        start: int,
        marker: Callable[[int], str],
        prepared: Any = None,
    ) -> int:
        """Snapshot reads of a native COPY chunk's rows, natively (NativeRows.snapshot_rows);
        -1, having done nothing, without the native encoder."""
        if self.native_rows is None:
            return -1
        return self.native_rows.snapshot_rows(
            ctx, txn, rel, table, chunk, fields, rows, start, marker, prepared
        )

    def snapshot_prepare(self, table: TableDef, chunk: Any, fields: Mapping[str, int]) -> Any:
        """A chunk's records encoded ahead, on a snapshot reader's thread
        (NativeRows.snapshot_prepare); None without the native encoder or a plan yet."""
        if self.native_rows is None:
            return None
        return self.native_rows.snapshot_prepare(table, chunk, fields)

    def change_python(self, ctx: PluginContext, txn: TxnInfo, t: _Table, change: RowChange) -> None:
        """The Python path of `change`, for table `t` (fastavro through `_event`)."""
        rows, key, key_of = t.rows, t.key, t.key_of
        match change.op:
            case ChangeOp.INSERT:
                assert change.new is not None
                after = rows.datum(change.new)
                new_key = key(key_of.datum(after)) if key is not None and key_of else None
                op = "r" if isinstance(ctx.state.get("snapshot"), str) else "c"
                self._event(ctx, txn, t, op, before=None, after=after, key=new_key, lsn=change.lsn)
            case ChangeOp.UPDATE:
                assert change.new is not None
                after = rows.datum(change.new)
                new_key = key(key_of.datum(after)) if key is not None and key_of else None
                old = change.old
                key_plans = t.plan.key_fields
                if (
                    old is not None
                    and key is not None
                    and key_of is not None
                    and key_plans
                    and key_values(key_plans, old) != key_values(key_plans, change.new)
                ):
                    old_row = rows.datum(old)
                    old_datum = key_of.datum(old_row)
                    old_key = key(old_datum)
                    assert new_key is not None
                    newkey = (("__debezium.newkey", key_json(key_of.datum(after))),)
                    self._event(
                        ctx,
                        txn,
                        t,
                        "d",
                        before=old_row,
                        after=None,
                        key=old_key,
                        lsn=change.lsn,
                        headers=newkey,
                    )
                    if self._tombstones():
                        self._tombstone(ctx, t, old_key, newkey)
                    self._event(
                        ctx,
                        txn,
                        t,
                        "c",
                        before=None,
                        after=after,
                        key=new_key,
                        lsn=change.lsn,
                        headers=(("__debezium.oldkey", key_json(old_datum)),),
                    )
                    return
                before = rows.datum(old) if old is not None and not change.old_is_key else None
                self._event(
                    ctx, txn, t, "u", before=before, after=after, key=new_key, lsn=change.lsn
                )
            case ChangeOp.DELETE:
                old = change.old
                if old is None:
                    # REPLICA IDENTITY NOTHING: PostgreSQL logs no old row at all.
                    self._event(ctx, txn, t, "d", before=None, after=None, key=None, lsn=change.lsn)
                    return
                gone = rows.datum(old)
                gone_key = key(key_of.datum(gone)) if key is not None and key_of else None
                self._event(ctx, txn, t, "d", before=gone, after=None, key=gone_key, lsn=change.lsn)
                if self._tombstones():
                    # A null key too for a table without one, as Debezium writes it.
                    self._tombstone(ctx, t, gone_key)
            case _:
                raise PluginError(
                    f"avro plugin got unknown change op {change.op!r}", lsn=change.lsn, xid=txn.xid
                )

    def _tombstones(self) -> bool:
        assert self.settings is not None
        return self.settings.kafka.tombstones_on_delete

    def truncate(self, ctx: PluginContext, txn: TxnInfo, change: TruncateChange) -> None:
        for rel in change.relations:
            t = self._table(rel)
            if t is not None:
                self._event(ctx, txn, t, "t", before=None, after=None, key=None, lsn=change.lsn)

    def message(self, ctx: PluginContext, txn: TxnInfo | None, msg: Message) -> None:
        assert self.settings is not None
        if msg.prefix in DDL_PREFIXES:
            self._schema_change(ctx, txn, msg)
            if not self.settings.kafka.publish_ddl_messages:
                return
        elif msg.prefix.startswith(INTERNAL_PREFIX):
            return  # pgcdc's own snapshot watermarks and signals are not application data
        if self._msg_prefixes and not matches(self._msg_prefixes, msg.prefix):
            return
        lsn = msg.end_lsn or msg.lsn  # the LSN PostgreSQL hands plugins: the record's end
        topic = f"{self.prefix}.message"
        ser_key, ser_value = self._static(topic, "message")
        block = None
        transactional = txn if msg.transactional else None
        if transactional is not None:
            st = self._txn_state(lsn)
            self._begin_once(ctx, st, lsn)
            block = {"id": f"{st.xid}:{lsn}", **self._count(st, MESSAGE_COLLECTION)}
        value = {
            "op": "m",
            "ts_ms": time.time_ns() // 1_000_000,
            "source": self._source(transactional, "", "", lsn),
            "transaction": block,
            "message": {"prefix": msg.prefix, "content": bytes(msg.payload)},
        }
        ctx.write(OutputRecord(topic, ser_key({"prefix": msg.prefix}), ser_value(value), op="m"))
        if transactional is None:
            # Debezium takes a non-transactional message's LSN as its last commit.
            self._last_commit_lsn = lsn

    def _schema_change(self, ctx: PluginContext, txn: TxnInfo | None, msg: Message) -> None:
        """A DDL message of pgcdc's capture (connectors/postgres/sql/ddl_capture.sql):
        {"op": "table", "tag", "def": table_def} or {"op": "drop", "oid", "schema", "name"}.

        Its transaction gets BEGIN/END like any other with a published event; the
        schema-change event itself is not counted (it lies on no data collection)."""
        assert self.settings is not None
        try:
            doc = json.loads(bytes(msg.payload).rstrip(b"\0").decode("utf-8"))
            op = doc["op"]
        except (ValueError, KeyError, TypeError) as exc:
            raise PluginError(f"malformed {msg.prefix} message: {exc}", lsn=msg.lsn) from exc
        db = self.settings.source.dbname
        change: dict[str, Any]
        schema_name: str | None
        if op == "table":
            d = doc["def"]
            schema_name = str(d["schema"])
            live = [c for c in d["columns"] if not c.get("dropped")]
            by_attnum = {int(c["attnum"]): str(c["name"]) for c in live}
            change = {
                "type": "CREATE" if str(doc.get("tag", "")).startswith("CREATE") else "ALTER",
                "id": f'"{db}"."{d["schema"]}"."{d["name"]}"',
                "table": {
                    "defaultCharsetName": None,
                    "primaryKeyColumnNames": [
                        by_attnum[a] for a in d.get("key") or () if a in by_attnum
                    ],
                    "columns": [
                        {
                            "name": str(c["name"]),
                            "jdbcType": _JDBC.get(int(c["type_oid"]), 1111),
                            "nativeType": int(c["type_oid"]),
                            "typeName": str(c.get("type_name") or c["type_oid"]),
                            "typeExpression": c.get("type_name"),
                            "charsetName": None,
                            "length": None,
                            "scale": None,
                            "position": pos,
                            "optional": not c["notnull"],
                            "autoIncremented": None,
                            "generated": bool(c.get("generated")),
                        }
                        for pos, c in enumerate(live, 1)
                    ],
                },
            }
        elif op == "drop":
            schema_name = doc.get("schema")
            name = doc.get("name") or doc.get("oid")
            change = {"type": "DROP", "id": f'"{db}"."{schema_name}"."{name}"', "table": None}
        else:
            raise PluginError(f"{msg.prefix} message with unknown op {op!r}", lsn=msg.lsn)
        if (
            txn is not None
            and self._txn is not None
            and not isinstance(ctx.state.get("snapshot"), str)
        ):
            self._begin_once(ctx, self._txn, msg.end_lsn or msg.lsn)
        topic = f"{self.prefix}.schema-changes"
        ser_key, ser_value = self._static(topic, "schema_change")
        value = {
            "source": self._source(txn, schema_name or "", "", msg.lsn),
            "ts_ms": int(time.time() * 1000),
            "databaseName": db,
            "schemaName": schema_name,
            "ddl": doc.get("tag"),  # the command tag: the trigger does not see the statement
            "tableChanges": [change],
        }
        ctx.write(OutputRecord(topic, ser_key({"databaseName": db}), ser_value(value)))

    def commit(self, ctx: PluginContext, txn: TxnInfo, commit_lsn: int) -> None:
        st = self._txn
        if st is not None and st.began:
            # END carries the commit's end LSN, as Debezium's (pgoutput's COMMIT position).
            txn_id = f"{st.xid}:{txn.end_lsn}"
            self._transaction_event(
                ctx, "END", txn_id, st.total, [(c, n) for c, n in st.collections], st.ts_ms
            )
        self._txn = None
        if not isinstance(ctx.state.get("snapshot"), str):
            # A snapshot is no commit: the first streamed event still says [null, ...].
            self._last_commit_lsn = txn.end_lsn

    def heartbeat(self, ctx: PluginContext, lsn: int) -> None:
        """One heartbeat record (Debezium's: {ts_ms} on `__debezium-heartbeat.<prefix>`);
        the driver then ends a (source-less) batch at `lsn`."""
        topic = self.heartbeat_topic
        ser_key, ser_value = self._static(topic, "heartbeat")
        ctx.write(
            OutputRecord(
                topic,
                ser_key({"serverName": self.prefix}),
                ser_value({"ts_ms": time.time_ns() // 1_000_000}),
            )
        )


def make_plugin() -> AvroPlugin:
    """The entry-point factory (`avro = "connectors.avro.plugin:AvroPlugin"` also works)."""
    return AvroPlugin()
