"""The avro plugin as it was before connectors.avro.codec: the byte-for-byte reference.

A frozen copy of connectors/avro_plugin.py at commit 6f25971 (module docstring cut):
every record is serialized by confluent_kafka's AvroSerializer, and envelopes are built
the generic way (avro_schema.row_datum per row, a fresh `source` dict per change).
tests/connectors/avro/test_codec.py drives it and the current plugin over the same
changes and requires identical records. Do not optimise this file: its only job is to
stay what the plugin's output was.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import structlog
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from connectors.avro.schema import (
    CONNECTOR,
    DEBEZIUM_VERSION,
    DECIMAL_MODES,
    TablePlan,
    build_table_plan,
    key_values,
    row_datum,
    static_with_refs,
)
from service.config import Settings, load_settings
from service.errors import (
    ConfigError,
    PluginError,
    RegistryRejectedError,
    RegistryUnavailableError,
)
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

log = structlog.get_logger(__name__)

DDL_PREFIXES = ("__pgcdc.ddl", "pgcdc.ddl")
MESSAGE_COLLECTION = (
    "io.debezium.connector.postgresql.LogicalDecodingMessageMonitor$LogicalDecodingMessageId"
)
RETRY_BUDGET_S = 30.0
_BACKOFF_START_S, _BACKOFF_MAX_S = 0.2, 5.0
_PG_EPOCH_US = 946_684_800_000_000

Serialize = Callable[[Any], bytes]

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

# Written out here, not imported: the reference stays independent of the plugin code.
_INITIAL_MARKERS = frozenset(
    {"first", "first_in_data_collection", "true", "last_in_data_collection", "last"}
)


class Registrar:
    """Registers schemas and hands out serializers, with BACKWARD compatibility."""

    def __init__(self, settings: Settings, retry_budget_s: float = RETRY_BUDGET_S) -> None:
        conf: dict[str, Any] = {"url": settings.registry.url, "max.retries": 0, "timeout": 10}
        if settings.registry.basic_auth is not None:
            conf["basic.auth.user.info"] = settings.registry.basic_auth.get_secret_value()
        self.url = settings.registry.url
        self.client = SchemaRegistryClient(conf)
        self.retry_budget_s = retry_budget_s

    def close(self) -> None:
        self.client.close()

    def _call(self, what: str, subject: str, fn: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + self.retry_budget_s
        backoff = _BACKOFF_START_S
        while True:
            try:
                return fn()
            except SchemaRegistryError as exc:
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
                failure = exc
            if time.monotonic() + backoff > deadline:
                raise RegistryUnavailableError(
                    f"schema registry at {self.url} unreachable for the {what} of {subject} "
                    f"after {self.retry_budget_s:.0f}s: {failure}",
                    field=subject,
                ) from failure
            log.warning("registry_retry", subject=subject, error=str(failure))
            time.sleep(backoff)
            backoff = min(backoff * 2, _BACKOFF_MAX_S)

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
        """Register `schema` for `topic`'s key or value and return its serializer."""
        subject = f"{topic}-{'key' if is_key else 'value'}"
        text = json.dumps(schema, separators=(",", ":"))
        if self._is_new(subject):
            self._call(
                "compatibility setting",
                subject,
                lambda: self.client.set_compatibility(subject, "BACKWARD"),
            )
        self._call(
            "registration",
            subject,
            lambda: self.client.register_schema(subject, Schema(text, "AVRO")),
        )
        ser = AvroSerializer(self.client, text, conf={"auto.register.schemas": True})
        ctx = SerializationContext(topic, MessageField.KEY if is_key else MessageField.VALUE)

        def serialize(obj: Any) -> bytes:
            out = ser(obj, ctx)
            assert isinstance(out, bytes)
            return out

        return serialize


@dataclass(slots=True)
class _Table:
    """A table plan with its registered serializers."""

    plan: TablePlan
    key: Serialize | None
    value: Serialize
    schema: str
    table: str
    collection: str  # "schema.table", as Debezium names a data collection
    value_name: str  # full Avro name of the Value record


@dataclass(slots=True)
class _TxnState:
    """Per-transaction counters; `began` says whether BEGIN was written. `collections`:
    [data collection, events] in first-event order, one entry per message."""

    xid: int
    ts_ms: int
    began: bool = False
    total: int = 0
    per_table: dict[str, int] = field(default_factory=dict)
    collections: list[list[Any]] = field(default_factory=list)


def _key_json(datum: Mapping[str, Any]) -> bytes:
    def plain(v: Any) -> Any:
        if isinstance(v, bytes):
            return base64.b64encode(v).decode()
        if isinstance(v, Decimal):
            return float(v) if v.is_finite() else str(v)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    return json.dumps(plain(dict(datum)), separators=(",", ":")).encode()


def _patterns(items: Sequence[str]) -> list[re.Pattern[str]]:
    try:
        return [re.compile(p) for p in items]
    except re.error as exc:
        raise ConfigError(f"bad filter pattern: {exc}", field="filters") from exc


def _matches(pats: Sequence[re.Pattern[str]], name: str) -> bool:
    return any(p.fullmatch(name) for p in pats)


class ReferencePlugin:
    """The `avro` output plugin as of 6f25971, with the Debezium 3.6 envelope of issue 14
    (connect.version 2, ts_us/ts_ns, the 3.6 source block, per-event transaction ids,
    message blocks, JSON key headers, context headers, Debezium's heartbeat topic)
    ported in deliberately."""

    can_stream = False
    two_phase = False
    registry_retry_budget_s = RETRY_BUDGET_S

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings
        self._tables: dict[tuple[int, int], _Table | None] = {}
        self._statics: dict[str, tuple[Serialize, Serialize]] = {}
        self._txn: _TxnState | None = None
        self._last_commit_lsn: int | None = None
        self.run_id = "00000000-0000-7000-8000-000000000000"
        self._warned: set[tuple[str, str]] = set()
        self.registrar: Registrar | None = None

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
        f = s.filters
        self._inc_schemas, self._exc_schemas = (
            _patterns(f.include_schemas),
            _patterns(f.exclude_schemas),
        )
        self._inc_tables, self._exc_tables = (
            _patterns(f.include_tables),
            _patterns(f.exclude_tables),
        )
        self._exc_columns = _patterns(f.exclude_columns)
        self._msg_prefixes = _patterns(s.kafka.message_prefixes)
        self._context = (
            ("__debezium.context.connectorLogicalName", self.prefix.encode()),
            ("__debezium.context.taskId", b"0"),
            ("__debezium.context.connectorName", b"postgresql"),
            ("__debezium.context.runId", self.run_id.encode()),
        )
        self.registrar = Registrar(s, self.registry_retry_budget_s)

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
        if self._inc_schemas and not _matches(self._inc_schemas, rel.schema):
            return False
        if _matches(self._exc_schemas, rel.schema):
            return False
        qualified = f"{rel.schema}.{rel.name}"
        if self._inc_tables and not _matches(self._inc_tables, qualified):
            return False
        return not _matches(self._exc_tables, qualified)

    def _table(self, rel: RelationInfo) -> _Table | None:
        """The registered plan of this definition, or None when the table is filtered."""
        cache_key = (rel.oid, rel.defined_at)
        if cache_key in self._tables:
            return self._tables[cache_key]
        table: _Table | None = None
        if self.included(rel):
            qualified = f"{rel.schema}.{rel.name}"
            excluded = frozenset(
                c.name for c in rel.columns if _matches(self._exc_columns, f"{qualified}.{c.name}")
            )
            plan = build_table_plan(self.prefix, rel, excluded, self.decimal_mode, self._warn)
            reg = self._registrar()
            key = reg.serializer(plan.topic, True, plan.key_schema) if plan.key_schema else None
            value = reg.serializer(plan.topic, False, plan.envelope_schema)
            table = _Table(
                plan, key, value, rel.schema, rel.name, qualified, f"{plan.namespace}.Value"
            )
            log.info("avro_schema_registered", topic=plan.topic, defined_at=rel.defined_at)
        self._tables[cache_key] = table
        return table

    def _source(
        self, txn: TxnInfo | None, schema: str, table: str, lsn: int, snapshot: str = "false"
    ) -> dict[str, Any]:
        assert self.settings is not None
        commit_us = (
            (txn.commit_time + _PG_EPOCH_US) if txn and txn.commit_time else time.time_ns() // 1000
        )
        # Debezium's sequence: ["<last commit end lsn>","<this lsn>"]; [null, ...] on an
        # initial snapshot's rows (service.tablesnap.markers, captured from Debezium).
        last_lsn = None if snapshot in _INITIAL_MARKERS else self._last_commit_lsn
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

    def _begin_once(self, ctx: PluginContext, st: _TxnState, lsn: int) -> None:
        if st.began:
            return
        ser_key, ser_value = self._static(self._meta_topic(), "transaction")
        txn_id = f"{st.xid}:{lsn}"
        begin = {
            "status": "BEGIN",
            "id": txn_id,
            "event_count": None,
            "data_collections": None,
            "ts_ms": st.ts_ms,
        }
        ctx.write(OutputRecord(self._meta_topic(), ser_key({"id": txn_id}), ser_value(begin)))
        st.began = True

    def _block(self, st: _TxnState, collection: str, lsn: int) -> dict[str, Any]:
        st.total += 1
        if collection == MESSAGE_COLLECTION:
            st.collections.append([collection, 1])
            order = 1
        else:
            order = st.per_table.get(collection, 0) + 1
            st.per_table[collection] = order
            if order == 1:
                st.collections.append([collection, 0])
            next(c for c in st.collections if c[0] == collection)[1] = order
        return {"id": f"{st.xid}:{lsn}", "total_order": st.total, "data_collection_order": order}

    def _meta_topic(self) -> str:
        return f"{self.prefix}.transaction"

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
        """Write one envelope, BEGIN first if it is the transaction's first event (not
        for snapshot reads: they have no transaction block)."""
        st = self._txn
        if st is None:
            raise PluginError("avro plugin got a change outside a transaction", lsn=lsn)
        snapshot = ctx.state.get("snapshot")
        block = None
        if not isinstance(snapshot, str):
            self._begin_once(ctx, st, lsn)
            block = ("event.block", self._block(st, t.collection, lsn))
        now_ns = time.time_ns()
        value = {
            "before": None if before is None else (t.value_name, before),
            "after": None if after is None else (t.value_name, after),
            "source": self._source(
                txn, t.schema, t.table, lsn, snapshot if isinstance(snapshot, str) else "false"
            ),
            "transaction": block,
            "op": op,
            "ts_ms": now_ns // 1_000_000,
            "ts_us": now_ns // 1000,
            "ts_ns": now_ns,
        }
        ctx.write(OutputRecord(t.plan.topic, key, t.value(value), (*headers, *self._context)))

    # --- callbacks -------------------------------------------------------------------

    def begin(self, ctx: PluginContext, txn: TxnInfo) -> None:
        ts_us = txn.commit_time + _PG_EPOCH_US if txn.commit_time else time.time_ns() // 1000
        self._txn = _TxnState(txn.xid, ts_us // 1000)

    def change(self, ctx: PluginContext, txn: TxnInfo, change: RowChange) -> None:
        t = self._table(change.relation)
        if t is None:
            return
        plans, key_plans, warn = t.plan.fields, t.plan.key_fields, self._warn
        match change.op:
            case ChangeOp.INSERT:
                assert change.new is not None
                after = row_datum(plans, change.new, warn)
                key = t.key(row_datum(key_plans, change.new, warn)) if t.key else None
                op = "r" if isinstance(ctx.state.get("snapshot"), str) else "c"
                self._event(ctx, txn, t, op, before=None, after=after, key=key, lsn=change.lsn)
            case ChangeOp.UPDATE:
                assert change.new is not None
                after = row_datum(plans, change.new, warn)
                new_key = t.key(row_datum(key_plans, change.new, warn)) if t.key else None
                old = change.old
                if (
                    old is not None
                    and t.key is not None
                    and key_plans
                    and key_values(key_plans, old) != key_values(key_plans, change.new)
                ):
                    old_key = t.key(row_datum(key_plans, old, warn))
                    assert new_key is not None
                    newkey = (
                        ("__debezium.newkey", _key_json(row_datum(key_plans, change.new, warn))),
                    )
                    self._event(
                        ctx,
                        txn,
                        t,
                        "d",
                        before=row_datum(plans, old, warn),
                        after=None,
                        key=old_key,
                        lsn=change.lsn,
                        headers=newkey,
                    )
                    if self._tombstones():
                        ctx.write(
                            OutputRecord(t.plan.topic, old_key, None, (*newkey, *self._context))
                        )
                    self._event(
                        ctx,
                        txn,
                        t,
                        "c",
                        before=None,
                        after=after,
                        key=new_key,
                        lsn=change.lsn,
                        headers=(
                            ("__debezium.oldkey", _key_json(row_datum(key_plans, old, warn))),
                        ),
                    )
                    return
                before = (
                    row_datum(plans, old, warn)
                    if old is not None and not change.old_is_key
                    else None
                )
                self._event(
                    ctx, txn, t, "u", before=before, after=after, key=new_key, lsn=change.lsn
                )
            case ChangeOp.DELETE:
                old = change.old
                if old is None:
                    # REPLICA IDENTITY NOTHING: PostgreSQL logs no old row at all.
                    self._event(ctx, txn, t, "d", before=None, after=None, key=None, lsn=change.lsn)
                    return
                before = row_datum(plans, old, warn)
                key = t.key(row_datum(key_plans, old, warn)) if t.key else None
                self._event(ctx, txn, t, "d", before=before, after=None, key=key, lsn=change.lsn)
                if self._tombstones():
                    ctx.write(OutputRecord(t.plan.topic, key, None, self._context))
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
        if self._msg_prefixes and not _matches(self._msg_prefixes, msg.prefix):
            return
        lsn = msg.end_lsn or msg.lsn
        topic = f"{self.prefix}.message"
        ser_key, ser_value = self._static(topic, "message")
        block = None
        if msg.transactional and txn is not None:
            assert self._txn is not None
            self._begin_once(ctx, self._txn, lsn)
            block = self._block(self._txn, MESSAGE_COLLECTION, lsn)
        value = {
            "op": "m",
            "ts_ms": time.time_ns() // 1_000_000,
            "source": self._source(txn if msg.transactional else None, "", "", lsn),
            "transaction": block,
            "message": {"prefix": msg.prefix, "content": bytes(msg.payload)},
        }
        ctx.write(OutputRecord(topic, ser_key({"prefix": msg.prefix}), ser_value(value)))
        if block is None:
            self._last_commit_lsn = lsn

    def _schema_change(self, ctx: PluginContext, txn: TxnInfo | None, msg: Message) -> None:
        """A `pgcdc.ddl` message (connectors/postgres/sql/ddl_capture.sql): {"op": "table", "tag",
        "def": table_def} or {"op": "drop", "oid", "schema", "name"}."""
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
        if txn is not None and self._txn is not None and "snapshot" not in ctx.state:
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
            ser_key, ser_value = self._static(self._meta_topic(), "transaction")
            txn_id = f"{st.xid}:{txn.end_lsn}"
            end = {
                "status": "END",
                "id": txn_id,
                "event_count": st.total,
                "data_collections": [
                    {"data_collection": c, "event_count": n} for c, n in st.collections
                ],
                "ts_ms": st.ts_ms,
            }
            ctx.write(OutputRecord(self._meta_topic(), ser_key({"id": txn_id}), ser_value(end)))
        self._txn = None
        if "snapshot" not in ctx.state:
            self._last_commit_lsn = txn.end_lsn

    def heartbeat(self, ctx: PluginContext, lsn: int) -> None:
        """One heartbeat record; the driver then ends a (source-less) batch at `lsn`."""
        assert self.settings is not None
        topic = f"{self.settings.kafka.heartbeat_topic_prefix}.{self.prefix}"
        ser_key, ser_value = self._static(topic, "heartbeat")
        value = {"ts_ms": time.time_ns() // 1_000_000}
        ctx.write(OutputRecord(topic, ser_key({"serverName": self.prefix}), ser_value(value)))
