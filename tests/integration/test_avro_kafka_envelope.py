"""The avro plugin's records, read back from real Kafka with the registry's schemas.

Drives AvroPlugin + KafkaSink with plain-data transactions and reads every topic with
a plain confluent_kafka Consumer (read_committed) and the writer's schema from Apicurio.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from connectors.avro.plugin import MESSAGE_COLLECTION, Registrar
from connectors.avro.schema import UNAVAILABLE
from service.errors import RegistryUnavailableError
from service.output.api import UNCHANGED_TOAST, Message, RelationInfo, TruncateChange
from service.schema.history import DDL_PREFIX, LEGACY_DDL_PREFIX
from tests.integration.avro_kafka_support import (
    Harness,
    Read,
    col,
    delete,
    insert,
    make_settings,
    read_topics,
    unique,
    update,
)

pytestmark = pytest.mark.integration

NUM_10_2 = ((10 << 16) | 2) + 4


def items_rel(ident: str = "d") -> RelationInfo:
    return RelationInfo(
        16400 if ident == "d" else 16401,
        "public",
        "items" if ident == "d" else "items_full",
        ident,
        ("id",),
        (
            col("id", 23, 1, notnull=True),
            col("name", 25, 2),
            col("price", 1700, 3, typmod=NUM_10_2),
            col("secret", 25, 4),
        ),
        defined_at=0x100,
    )


def by_topic(reads: list[Read], topic: str) -> list[Read]:
    return [r for r in reads if r.topic == topic]


def test_envelopes_for_every_kind_of_event(
    kafka: dict[str, Any],
    registry: dict[str, Any],
) -> None:
    """insert, update (key-only and full old row, key change, unchanged TOAST), delete +
    tombstone, truncate, messages, DDL and heartbeat all arrive as Debezium envelopes."""
    prefix = unique("env")
    settings = make_settings(kafka, registry, prefix, unique("slot"), message_prefixes=["app.*"])
    settings.filters.exclude_columns.append(r"public\.items.*\.secret")
    settings.filters.exclude_tables.append(r"public\.ignored")
    with Harness(settings) as h:
        check_envelopes(h, settings, prefix, registry)


def check_envelopes(h: Harness, settings: Any, prefix: str, registry: dict[str, Any]) -> None:
    assert h.start() is None
    items, full = items_rel("d"), items_rel("f")
    ignored = RelationInfo(16402, "public", "ignored", "d", ("id",), (col("id", 23, 1),))
    h.txn(
        1001,
        0x2000,
        [
            insert(items, 0x1000, id=1, name="apple", price=Decimal("1.50"), secret="s"),
            insert(full, 0x1010, id=1, name="pear", price=None, secret="s"),
            insert(ignored, 0x1020, id=9),
        ],
    )
    h.txn(
        1002,
        0x3000,
        [
            update(
                items,
                0x2100,
                {"id": 1, "name": "apple2", "price": Decimal("2.00"), "secret": "s"},
                None,
                False,
            ),
            update(
                full,
                0x2110,
                {"id": 1, "name": "pear2", "price": Decimal("3.10"), "secret": "s"},
                {"id": 1, "name": "pear", "price": None, "secret": "s"},
                False,
            ),
            update(
                items,
                0x2120,
                {"id": 1, "name": UNCHANGED_TOAST, "price": Decimal("2.50"), "secret": "s"},
                None,
                False,
            ),
        ],
    )
    h.txn(
        1003,
        0x4000,
        [
            update(
                items,
                0x3100,
                {"id": 2, "name": "apple3", "price": Decimal("2.50"), "secret": "s"},
                {"id": 1},
                True,
            ),
        ],
    )
    h.txn(
        1004,
        0x5000,
        [
            delete(items, 0x4100, True, id=2),
            delete(full, 0x4110, False, id=1, name="pear2", price=Decimal("3.10"), secret="s"),
        ],
    )
    h.txn(1005, 0x6000, [TruncateChange(0x5100, [items, full, ignored], False, False)])
    ddl = {
        "v": 1,
        "op": "table",
        "tag": "ALTER TABLE",
        "def": {
            "schema": "public",
            "name": "items",
            "key": [1],
            "columns": [
                {
                    "attnum": 1,
                    "name": "id",
                    "type_oid": 23,
                    "typmod": -1,
                    "notnull": True,
                    "dropped": False,
                },
                {
                    "attnum": 2,
                    "name": "gone",
                    "type_oid": 25,
                    "typmod": -1,
                    "notnull": False,
                    "dropped": True,
                },
                {
                    "attnum": 3,
                    "name": "name",
                    "type_oid": 25,
                    "typmod": -1,
                    "notnull": False,
                    "dropped": False,
                },
            ],
        },
    }
    h.txn(
        1006,
        0x7000,
        [
            Message(0x6100, True, "app.audit", b"hello", 0x6150),
            Message(0x6110, True, "other", b"filtered out"),
            # The legacy prefix still decodes (WAL written before the rename).
            Message(0x6120, True, LEGACY_DDL_PREFIX, json.dumps(ddl).encode()),
            Message(
                0x6130,
                True,
                DDL_PREFIX,
                json.dumps(
                    {"v": 1, "op": "drop", "oid": 5, "schema": "public", "name": "old"}
                ).encode(),
            ),
        ],
    )
    h.wrapper.call(
        "message", 0x7100, 0, None, Message(0x7100, False, "app.ping", b"\x00\x01", 0x7140)
    )
    # A DDL-only transaction: BEGIN/END, no event counted, nothing on the message topic.
    drop = {"v": 1, "op": "drop", "oid": 6, "schema": "public", "name": "older"}
    h.txn(1007, 0x7400, [Message(0x7200, True, DDL_PREFIX, json.dumps(drop).encode(), 0x7260)])
    h.wrapper.call("heartbeat", 0x8000, 0, 0x8000)
    h.sink.end_source_txn(0x8000, 0x8000, 1)
    h.sink.flush()
    assert h.on_committed[-1] == (0x8000, 0x8000)

    topics = [
        f"{prefix}.public.items",
        f"{prefix}.public.items_full",
        f"{prefix}.transaction",
        f"{prefix}.message",
        f"{prefix}.schema-changes",
        f"__debezium-heartbeat.{prefix}",
    ]
    reads = read_topics(settings, topics)
    assert f"{prefix}.public.ignored" not in {r.topic for r in reads}

    ev = by_topic(reads, f"{prefix}.public.items")
    assert [(r.value or {}).get("op") if r.value else None for r in ev] == [
        "c",
        "u",
        "u",
        "d",
        None,
        "c",
        "d",
        None,
        "t",
    ]
    c = ev[0]
    assert c.key == {"id": 1}
    assert c.value["before"] is None
    assert c.value["after"] == {"id": 1, "name": "apple", "price": Decimal("1.50")}  # no secret
    src = c.value["source"]
    commit_us = 760_000_000_000_000 + 1001 + 946_684_800_000_000
    assert src == {
        "version": "3.6.1.Final-pgcdc",
        "connector": "postgresql",
        "name": prefix,
        "ts_ms": commit_us // 1000,
        "snapshot": "false",
        "db": "shop",
        "sequence": '[null,"4096"]',  # no commit seen since start
        "ts_us": commit_us,
        "ts_ns": commit_us * 1000,
        "schema": "public",
        "table": "items",
        "txId": 1001,
        "lsn": 0x1000,
        "xmin": None,
        "origin": None,
        "origin_lsn": None,
    }
    # Debezium's transaction id: "<xid>:<the event's lsn>".
    assert c.value["transaction"] == {
        "id": f"1001:{0x1000}",
        "total_order": 1,
        "data_collection_order": 1,
    }
    assert ev[0].value["ts_ms"] == ev[0].value["ts_us"] // 1000 == ev[0].value["ts_ns"] // 10**6
    # Update under REPLICA IDENTITY DEFAULT: no before image.
    assert ev[1].value["before"] is None
    assert ev[1].value["after"]["name"] == "apple2"
    # sequence[0]: the end of the previous commit.
    assert ev[1].value["source"]["sequence"] == f'["{0x2000}","{0x2100}"]'
    assert ev[1].value["transaction"]["id"] == f"1002:{0x2100}"
    # Debezium's context headers on every change record and tombstone.
    for r in [*ev, *by_topic(reads, f"{prefix}.public.items_full")]:
        assert r.headers["__debezium.context.connectorLogicalName"] == prefix.encode()
        assert r.headers["__debezium.context.taskId"] == b"0"
        assert r.headers["__debezium.context.connectorName"] == b"postgresql"
        assert len(r.headers["__debezium.context.runId"]) == 36
    # Unchanged TOAST: Debezium's placeholder.
    assert ev[2].value["after"]["name"] == UNAVAILABLE
    assert ev[2].value["transaction"]["total_order"] == 3
    assert ev[2].value["transaction"]["data_collection_order"] == 2
    # Key change: delete of the old key + tombstone + create of the new key.
    assert ev[3].key == {"id": 1} and ev[3].value["before"] == {
        "id": 1,
        "name": None,
        "price": None,
    }
    # The key headers are JSON text, and the tombstone carries newkey too (Debezium's).
    assert ev[3].headers["__debezium.newkey"] == b'{"id":2}'
    assert ev[4].key == {"id": 1} and ev[4].value is None and ev[4].raw_value is None
    assert ev[4].headers["__debezium.newkey"] == b'{"id":2}'
    assert ev[5].key == {"id": 2} and ev[5].value["after"]["name"] == "apple3"
    assert ev[5].headers["__debezium.oldkey"] == b'{"id":1}'
    assert "__debezium.newkey" not in ev[6].headers
    # Delete with only the key: before holds the key; then the tombstone.
    assert ev[6].key == {"id": 2}
    assert ev[6].value["before"] == {"id": 2, "name": None, "price": None}
    assert ev[6].value["after"] is None
    assert ev[7].key == {"id": 2} and ev[7].value is None
    # Truncate: no key, no images.
    assert ev[8].key is None and ev[8].value["before"] is None and ev[8].value["after"] is None
    assert ev[8].value["source"]["lsn"] == 0x5100

    fe = by_topic(reads, f"{prefix}.public.items_full")
    assert [r.value["op"] if r.value else None for r in fe] == ["c", "u", "d", None, "t"]
    assert fe[1].value["before"] == {"id": 1, "name": "pear", "price": None}
    assert fe[1].value["after"] == {"id": 1, "name": "pear2", "price": Decimal("3.10")}
    assert fe[2].value["before"] == {"id": 1, "name": "pear2", "price": Decimal("3.10")}

    meta = by_topic(reads, f"{prefix}.transaction")
    statuses = [(r.value["status"], r.value["id"]) for r in meta]
    # BEGIN: the first event's lsn; END: the commit's end; message-only and DDL-only
    # transactions too.
    assert statuses == [
        (s, f"{x}:{lsn}")
        for x, first, end in [
            (1001, 0x1000, 0x2000),
            (1002, 0x2100, 0x3000),
            (1003, 0x3100, 0x4000),
            (1004, 0x4100, 0x5000),
            (1005, 0x5100, 0x6000),
            (1006, 0x6150, 0x7000),
            (1007, 0x7260, 0x7400),
        ]
        for s, lsn in (("BEGIN", first), ("END", end))
    ]
    assert [r.key for r in meta] == [{"id": r.value["id"]} for r in meta]
    assert meta[11].value["event_count"] == 1  # 1006: the app.audit message
    assert meta[11].value["data_collections"] == [
        {"data_collection": MESSAGE_COLLECTION, "event_count": 1}
    ]
    assert meta[13].value["event_count"] == 0 and meta[13].value["data_collections"] == []
    assert all(not r.headers for r in meta)
    end1 = meta[1].value
    assert end1["event_count"] == 2
    assert end1["data_collections"] == [
        {"data_collection": "public.items", "event_count": 1},
        {"data_collection": "public.items_full", "event_count": 1},
    ]
    assert meta[1].key == {"id": f"1001:{0x2000}"}
    assert meta[7].value["event_count"] == 2  # 1004: two deletes, tombstones not counted

    msgs = by_topic(reads, f"{prefix}.message")
    assert [(m.key, m.value["op"], m.value["message"]) for m in msgs] == [
        ({"prefix": "app.audit"}, "m", {"prefix": "app.audit", "content": b"hello"}),
        ({"prefix": "app.ping"}, "m", {"prefix": "app.ping", "content": b"\x00\x01"}),
    ]
    assert msgs[0].value["source"]["txId"] == 1006
    # A message's lsn is the end of its record, as PostgreSQL hands it to pgoutput.
    assert msgs[0].value["source"]["lsn"] == 0x6150
    assert msgs[0].value["transaction"] == {
        "id": f"1006:{0x6150}",
        "total_order": 1,
        "data_collection_order": 1,
    }
    assert msgs[1].value["source"]["txId"] is None and msgs[1].value["transaction"] is None
    assert msgs[1].value["source"]["lsn"] == 0x7140
    assert all(not m.headers for m in msgs)

    changes = by_topic(reads, f"{prefix}.schema-changes")
    assert len(changes) == 3
    assert changes[1].value["tableChanges"] == [
        {"type": "DROP", "id": '"shop"."public"."old"', "table": None}
    ]
    sc = changes[0].value
    assert changes[0].key == {"databaseName": "shop"}
    assert sc["databaseName"] == "shop" and sc["schemaName"] == "public"
    assert sc["ddl"] == "ALTER TABLE"
    (tc,) = sc["tableChanges"]
    assert tc["type"] == "ALTER" and tc["id"] == '"shop"."public"."items"'
    assert tc["table"]["primaryKeyColumnNames"] == ["id"]
    assert [(c["name"], c["position"], c["optional"]) for c in tc["table"]["columns"]] == [
        ("id", 1, False),
        ("name", 2, True),
    ]

    (hb,) = by_topic(reads, f"__debezium-heartbeat.{prefix}")
    assert hb.key == {"serverName": prefix} and set(hb.value) == {"ts_ms"}

    # Subjects follow TopicNameStrategy; table subjects are BACKWARD.
    with SchemaRegistryClient({"url": registry["url"]}) as client:
        # Asked per subject: the registry pages its subject list, and the suite makes many.
        for t in (f"{prefix}.public.items", f"{prefix}.transaction", f"{prefix}.message"):
            for subject in (f"{t}-key", f"{t}-value"):
                assert client.get_versions(subject) == [1]
        assert client.get_compatibility(f"{prefix}.public.items-value") == "BACKWARD"


def test_tombstones_can_be_switched_off(kafka: dict[str, Any], registry: dict[str, Any]) -> None:
    """With tombstones_on_delete=false a delete is one record."""
    prefix = unique("tomb")
    settings = make_settings(kafka, registry, prefix, unique("slot"), tombstones_on_delete=False)
    with Harness(settings) as h:
        h.start()
        items = items_rel("d")
        h.txn(
            2001,
            0x2000,
            [
                insert(items, 0x1000, id=1, name="a", price=None, secret=None),
                delete(items, 0x1100, True, id=1),
            ],
        )
        h.sink.flush()
    ev = read_topics(settings, [f"{prefix}.public.items"])
    assert [r.value["op"] for r in ev] == ["c", "d"]


def test_unreachable_registry_is_retried_then_reported(kafka: dict[str, Any]) -> None:
    """A registry nobody listens on: RegistryUnavailableError after the retry budget."""
    settings = make_settings(kafka, {"url": "http://127.0.0.1:9"}, unique("noreg"), unique("slot"))
    reg = Registrar(settings, retry_budget_s=1.0)
    try:
        with pytest.raises(RegistryUnavailableError, match="unreachable"):
            reg.serializer("t", False, {"type": "record", "name": "X", "fields": []})
    finally:
        reg.close()
