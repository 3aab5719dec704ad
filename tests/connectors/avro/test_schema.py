"""Pure tests of the Debezium type mapping and schema building (connectors.avro.schema)."""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from decimal import Decimal
from typing import Any

import fastavro
import pytest

from connectors.avro.schema import (
    UNAVAILABLE,
    avro_name,
    build_table_plan,
    define_named_once,
    field_schema,
    row_datum,
    static_with_refs,
    topic_name,
    type_mapping,
    unscaled_bytes,
    variable_scale_decimal,
)
from service.errors import PluginError
from service.output.api import UNCHANGED_TOAST, ColumnMeta, ColumnValue, RelationInfo
from service.types.datetime import Interval, PgDate, PgTime, PgTimestamp

INT32_MAX, INT64_MAX, INT64_MIN = 2**31 - 1, 2**63 - 1, -(2**63)
WARNINGS: list[tuple[str, str]] = []


def warn(event: str, column: str) -> None:
    WARNINGS.append((event, column))


def meta(
    name: str,
    oid: int,
    *,
    typmod: int = -1,
    notnull: bool = False,
    kind: str = "b",
    elem: int = 0,
    labels: tuple[str, ...] = (),
) -> ColumnMeta:
    return ColumnMeta(name, 1, oid, str(oid), typmod, notnull, kind, elem, labels)


def cv(name: str, value: object, text: str | None = None) -> ColumnValue:
    return ColumnValue(name, 0, "", lambda: value, lambda: text)


def convert(
    col: ColumnMeta,
    value: object,
    text: str | None = None,
    mode: str = "precise",
) -> Any:
    plan = build_table_plan(
        "p", RelationInfo(1, "s", "t", "d", (), (col,)), frozenset(), mode, warn
    )
    return row_datum(plan.fields, [cv(col.name, value, text)], warn)[col.name]


def numeric_typmod(p: int, s: int) -> int:
    return ((p << 16) | s) + 4


def roundtrip(schema: dict[str, Any], datum: Any) -> Any:
    parsed = fastavro.parse_schema(schema)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, datum)
    buf.seek(0)
    return fastavro.schemaless_reader(buf, parsed)


def test_semantic_types_carry_connect_names() -> None:
    """Each mapped type carries the connect.name Debezium's Avro converter writes."""
    expect = {
        1082: ("int", "io.debezium.time.Date"),
        1083: ("long", "io.debezium.time.MicroTime"),
        1114: ("long", "io.debezium.time.MicroTimestamp"),
        1184: ("string", "io.debezium.time.ZonedTimestamp"),
        1266: ("string", "io.debezium.time.ZonedTime"),
        1186: ("long", "io.debezium.time.MicroDuration"),
        2950: ("string", "io.debezium.data.Uuid"),
        114: ("string", "io.debezium.data.Json"),
        3802: ("string", "io.debezium.data.Json"),
        142: ("string", "io.debezium.data.Xml"),
    }
    for oid, (base, name) in expect.items():
        schema = type_mapping(meta("c", oid), "precise", warn).schema
        assert schema["type"] == base, oid
        assert schema["connect.name"] == name, oid
    assert type_mapping(meta("c", 21), "precise", warn).schema == {
        "type": "int",
        "connect.type": "int16",
    }
    assert type_mapping(meta("c", 20), "precise", warn).schema == "long"
    assert type_mapping(meta("c", 700), "precise", warn).schema == "float"
    assert type_mapping(meta("c", 17), "precise", warn).schema == "bytes"


def test_numeric_with_typmod_is_connect_decimal() -> None:
    """numeric(10,2) is bytes/decimal with Connect's scale and precision parameters."""
    schema = type_mapping(meta("n", 1700, typmod=numeric_typmod(10, 2)), "precise", warn).schema
    assert schema["logicalType"] == "decimal"
    assert (schema["precision"], schema["scale"]) == (10, 2)
    assert schema["connect.parameters"] == {"scale": "2", "connect.decimal.precision": "10"}
    assert schema["connect.name"] == "org.apache.kafka.connect.data.Decimal"
    col = meta("n", 1700, typmod=numeric_typmod(10, 2))
    assert convert(col, Decimal("-12345.67")) == Decimal("-12345.67")


def test_numeric_without_typmod_is_variable_scale_decimal() -> None:
    """Unconstrained numeric is {scale, value} with BigInteger.toByteArray bytes."""
    assert variable_scale_decimal(Decimal("-1.50")) == {"scale": 2, "value": unscaled_bytes(-150)}
    assert unscaled_bytes(-150) == (-150).to_bytes(2, "big", signed=True)
    assert unscaled_bytes(127) == b"\x7f"
    assert unscaled_bytes(128) == b"\x00\x80"
    assert unscaled_bytes(-128) == b"\x80"
    assert variable_scale_decimal(Decimal("1E+3")) == {"scale": 0, "value": unscaled_bytes(1000)}
    schema = type_mapping(meta("n", 1700), "precise", warn).schema
    assert schema["connect.name"] == "io.debezium.data.VariableScaleDecimal"


def test_numeric_special_values() -> None:
    """NaN: null + warning when nullable, an error naming the option when NOT NULL."""
    WARNINGS.clear()
    assert convert(meta("n", 1700), Decimal("NaN")) is None
    assert WARNINGS == [("numeric_special_value_dropped", "n")]
    with pytest.raises(PluginError, match=r"decimal.handling.mode"):
        convert(meta("n", 1700, notnull=True), Decimal("Infinity"))
    assert convert(meta("n", 1700), Decimal("NaN"), "NaN", mode="string") == "NaN"
    assert convert(meta("n", 1700), Decimal("-Infinity"), mode="double") == float("-inf")


def test_time_values() -> None:
    """Dates, times, timestamps and intervals convert as Debezium's time classes."""
    assert convert(meta("d", 1082), dt.date(1970, 1, 2)) == 1
    assert convert(meta("d", 1082), dt.date(2000, 1, 1)) == 10957
    assert convert(meta("d", 1082), PgDate(INT32_MAX)) == INT32_MAX
    assert convert(meta("d", 1082), PgDate(-800_000)) == -800_000 + 10957
    assert convert(meta("t", 1083), dt.time(1, 2, 3, 4)) == 3_723_000_004
    assert convert(meta("t", 1083), PgTime(86_400_000_000)) == 86_400_000_000
    ts = dt.datetime(2024, 2, 29, 12, 0, 0, 500)
    assert convert(meta("t", 1114), ts) == int(ts.replace(tzinfo=dt.UTC).timestamp()) * 10**6 + 500
    assert convert(meta("t", 1114), PgTimestamp(INT64_MAX, False)) == INT64_MAX
    assert convert(meta("t", 1114), PgTimestamp(INT64_MIN, False)) == INT64_MIN
    tz = dt.datetime(2024, 2, 29, 12, 0, 0, 120000, tzinfo=dt.UTC)
    assert convert(meta("t", 1184), tz) == "2024-02-29T12:00:00.120000Z"
    assert convert(meta("t", 1184), PgTimestamp(INT64_MAX, True)) == "infinity"
    assert convert(meta("t", 1184), PgTimestamp(INT64_MIN, True)) == "-infinity"
    # 2000-01-01 minus 2001 years and a bit: 2 BC is ISO year -1.
    bc_days = dt.date(2000, 1, 1).toordinal() - 1  # days from 0001-01-01 to 2000-01-01
    bc = PgTimestamp(-(bc_days + 366 + 365) * 86_400_000_000, True)
    assert convert(meta("t", 1184), bc) == "-0001-01-01T00:00:00.000000Z"
    zone = dt.timezone(dt.timedelta(hours=2))
    assert convert(meta("t", 1266), dt.time(1, 30, tzinfo=zone)) == "23:30:00Z"
    assert convert(meta("i", 1186), Interval(1, 2, 3)) == 2_629_800_000_000 + 2 * 86_400_000_000 + 3


def test_misc_types() -> None:
    """uuid, json, enum, bits, bool, bytea and text-output types."""
    u = uuid.uuid4()
    assert convert(meta("u", 2950), u) == str(u)
    assert convert(meta("j", 3802), '{"a": 1}') == '{"a": 1}'
    enum = meta("e", 99999, kind="e", labels=("a", "b"))
    assert type_mapping(enum, "precise", warn).schema["connect.parameters"] == {"allowed": "a,b"}
    assert convert(enum, "b") == "b"
    assert convert(meta("b", 1560, typmod=1), None, "1") is True
    bits = meta("b", 1562, typmod=10)
    assert type_mapping(bits, "precise", warn).schema["connect.parameters"] == {"length": "10"}
    assert convert(bits, None, "1000000001") == (0b1000000001).to_bytes(2, "little")
    assert convert(meta("x", 17), b"\x00\x01") == b"\x00\x01"
    assert convert(meta("i", 869), object(), "10.0.0.1") == "10.0.0.1"
    assert convert(meta("r", 3904, kind="r"), object(), "[1,5)") == "[1,5)"
    assert convert(meta("c", 77777, kind="c"), object(), "(1,x)") == "(1,x)"
    assert convert(meta("m", 790), Decimal("12.34")) == Decimal("12.34")


def test_arrays_flatten_and_allow_null_items() -> None:
    """Arrays map their elements; nested lists are flattened row-major."""
    col = meta("a", 1007, kind="a", elem=23)
    assert type_mapping(col, "precise", warn).schema == {"type": "array", "items": ["null", "int"]}
    assert convert(col, [[1, 2], [None, 4]]) == [1, 2, None, 4]
    dates = meta("a", 1182, kind="a", elem=1082)
    assert convert(dates, [dt.date(1970, 1, 11)]) == [10]


def test_unchanged_toast_placeholder() -> None:
    """Unchanged TOAST values become Debezium's unavailable-value placeholder."""
    WARNINGS.clear()
    assert convert(meta("t", 25), UNCHANGED_TOAST) == UNAVAILABLE
    assert convert(meta("b", 17), UNCHANGED_TOAST) == UNAVAILABLE.encode()
    assert convert(meta("j", 3802), UNCHANGED_TOAST) == UNAVAILABLE
    assert convert(meta("a", 1009, kind="a", elem=25), UNCHANGED_TOAST) == [UNAVAILABLE]
    assert convert(meta("a", 1007, kind="a", elem=23), UNCHANGED_TOAST) is None
    assert WARNINGS == [("unchanged_toast_unrepresentable", "a")]


def test_names_are_sanitized() -> None:
    """Avro names and topic names follow Debezium's adjuster."""
    assert avro_name("my-table") == "my_table"
    assert avro_name("1abc") == "_1abc"
    assert topic_name("p", "my schema", "t$1") == "p.my_schema.t_1"


def test_table_plan_round_trips_through_avro() -> None:
    """The Key and Envelope schemas parse and carry a full row through Avro unchanged."""
    rel = RelationInfo(
        16384,
        "public",
        "orders",
        "d",
        ("id",),
        (
            meta("id", 23, notnull=True),
            meta("amount", 1700, typmod=numeric_typmod(12, 2)),
            meta("note", 25),
            meta("secret", 25),
        ),
        defined_at=0x1000,
    )
    plan = build_table_plan("shop", rel, frozenset({"secret"}), "precise", warn)
    assert plan.topic == "shop.public.orders"
    assert [f.field for f in plan.fields] == ["id", "amount", "note"]
    assert plan.key_schema is not None
    assert plan.key_schema["name"] == "Key" and plan.key_schema["namespace"] == "shop.public.orders"
    env = plan.envelope_schema
    assert env["connect.name"] == "shop.public.orders.Envelope"
    # Debezium 3's envelope: connect.version 2, transaction before op, ts_us and ts_ns.
    assert env["connect.version"] == 2
    assert [f["name"] for f in env["fields"]] == [
        "before",
        "after",
        "source",
        "transaction",
        "op",
        "ts_ms",
        "ts_us",
        "ts_ns",
    ]
    row = [cv("id", 7), cv("amount", Decimal("9.99")), cv("note", None), cv("secret", "x")]
    after = row_datum(plan.fields, row, warn)
    assert after == {"id": 7, "amount": Decimal("9.99"), "note": None}
    source = {
        "version": "v",
        "connector": "postgresql",
        "name": "shop",
        "ts_ms": 1,
        "snapshot": "false",
        "db": "d",
        "sequence": '[null,"5"]',
        "ts_us": 1000,
        "ts_ns": 1000000,
        "schema": "public",
        "table": "orders",
        "txId": 5,
        "lsn": 5,
        "xmin": None,
        "origin": None,
        "origin_lsn": None,
    }
    datum = {
        "before": None,
        "after": after,
        "source": source,
        "op": "c",
        "ts_ms": 2,
        "ts_us": 2000,
        "ts_ns": 2000000,
        "transaction": {"id": "5:5", "total_order": 1, "data_collection_order": 1},
    }
    assert roundtrip(env, datum) == datum
    assert roundtrip(plan.key_schema, row_datum(plan.key_fields, row, warn)) == {"id": 7}
    # A key-only before image: the NOT NULL key is there, other columns null.
    before = row_datum(plan.fields, [cv("id", 7)], warn)
    assert before == {"id": 7, "amount": None, "note": None}


def test_static_schemas_are_self_contained() -> None:
    """Every static .avsc parses alone once Source and event.block are inlined."""
    for name in (
        "transaction_key",
        "transaction_value",
        "heartbeat_key",
        "heartbeat_value",
        "message_key",
        "message_value",
        "schema_change_key",
        "schema_change_value",
        "offsets",
        "source",
        "transaction_block",
        "variable_scale_decimal",
    ):
        schema = static_with_refs(name)
        fastavro.parse_schema(json.loads(json.dumps(schema)))
    assert "Source" in json.dumps(static_with_refs("message_value"))


def test_named_types_are_defined_once() -> None:
    """Two unconstrained numerics and a numeric[] share one VariableScaleDecimal
    definition (later uses refer to it by name); the schema parses and carries values."""
    rel = RelationInfo(
        16390,
        "public",
        "measures",
        "d",
        ("a",),
        (meta("a", 1700, notnull=True), meta("b", 1700), meta("c", 1231, kind="a", elem=1700)),
        defined_at=1,
    )
    plan = build_table_plan("shop", rel, frozenset(), "precise", warn)
    value = plan.envelope_schema["fields"][0]["type"][1]
    types = [f["type"] for f in value["fields"]]
    assert types[0]["name"] == "VariableScaleDecimal"
    assert types[1] == ["null", "io.debezium.data.VariableScaleDecimal"]
    assert types[2] == [
        "null",
        {"type": "array", "items": ["null", "io.debezium.data.VariableScaleDecimal"]},
    ]
    assert plan.key_schema is not None
    assert plan.key_schema["fields"][0]["type"]["name"] == "VariableScaleDecimal"
    row = [cv("a", Decimal("1.5")), cv("b", Decimal("-20")), cv("c", [Decimal("3"), None])]
    after = row_datum(plan.fields, row, warn)
    assert roundtrip(value, after) == after
    assert roundtrip(plan.key_schema, row_datum(plan.key_fields, row, warn)) == {
        "a": {"scale": 1, "value": b"\x0f"}
    }


def test_schemas_without_repeated_names_are_unchanged() -> None:
    """define_named_once leaves other fields as they were, down to the JSON text (so
    the registered schemas of existing tables keep their ids)."""
    cols = [
        meta(f"c{oid}", oid)
        for oid in (
            16,
            17,
            20,
            21,
            23,
            25,
            114,
            700,
            701,
            1082,
            1083,
            1114,
            1184,
            1186,
            1266,
            2950,
            3802,
        )
    ]
    cols += [
        meta("n", 1700),
        meta("nn", 1700, typmod=numeric_typmod(9, 3), notnull=True),
        meta("arr", 1007, kind="a", elem=23),
        meta("e", 4000, kind="e", labels=("x", "y")),
    ]
    plans = build_table_plan(
        "p", RelationInfo(1, "s", "t", "d", (), tuple(cols)), frozenset(), "precise", warn
    ).fields
    fields = [field_schema(p) for p in plans]
    again = define_named_once(fields, "p.s.t")
    assert json.dumps(again) == json.dumps(fields)


def test_zoned_timestamp_years_have_four_digits_as_java_time_prints_them() -> None:
    # Debezium formats ZonedTimestamp with ISO_OFFSET_DATE_TIME: year 5 is `0005`, not
    # strftime's platform-dependent `5`; the stored-datum fast path must agree.
    import datetime as dt  # noqa: PLC0415

    from connectors.avro.codec import zoned_timestamp_of_stored  # noqa: PLC0415
    from connectors.avro.schema import zoned_timestamp  # noqa: PLC0415

    for year, text in ((5, "0005"), (999, "0999"), (1000, "1000"), (2024, "2024")):
        moment = dt.datetime(year, 3, 4, 5, 6, 7, 89, tzinfo=dt.UTC)
        expected = f"{text}-03-04T05:06:07.000089Z"
        assert zoned_timestamp(moment) == expected
        micros = (moment - dt.datetime(2000, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
        assert zoned_timestamp_of_stored(micros.to_bytes(8, "little", signed=True)) == expected
