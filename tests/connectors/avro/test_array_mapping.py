"""Avro mappings of arrays and domains (issue 13, part 4): items keep the element's
mapping and text-mapped items carry each element's own PostgreSQL text."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from connectors.avro.array_text import array_elements
from connectors.avro.schema import INT64_MAX, timestamp_micros, type_mapping
from service.errors import PluginError
from service.output.api import ColumnMeta


def _warn(event: str, column: str) -> None:
    raise AssertionError((event, column))


def _map(meta: ColumnMeta) -> Any:
    return type_mapping(meta, "precise", _warn)


def test_array_elements_follow_array_out_quoting() -> None:
    """Quoted, escaped, NULL, "NULL", nested and dimension-decorated texts split exactly."""
    assert array_elements('{a,"b c",NULL,"NULL","x\\"y","back\\\\slash",""}') == [
        "a",
        "b c",
        None,
        "NULL",
        'x"y',
        "back\\slash",
        "",
    ]
    assert array_elements("[0:1][2:3]={{1,2},{3,NULL}}") == ["1", "2", "3", None]
    assert array_elements("{}") == []
    assert array_elements("{(1,1),(0,0);(3,3),(2,2)}", ";") == ["(1,1),(0,0)", "(3,3),(2,2)"]
    assert array_elements('{"1 2 3","4"}') == ["1 2 3", "4"]
    with pytest.raises(PluginError):
        array_elements('{"open')


def test_text_mapped_items_are_element_texts() -> None:
    """inet[], pg_lsn[], int4range[] and composite[] items are PostgreSQL's element text,
    not Python reprs; int2vector[] items stay whole."""
    for oid, text, want in [
        (869, "{10.0.0.1,::1/64}", ["10.0.0.1", "::1/64"]),
        (3220, "{16/B374D848,NULL}", ["16/B374D848", None]),
        (3904, '{"[1,2)",empty}', ["[1,2)", "empty"]),
        (22, '{"1 2 3","4"}', ["1 2 3", "4"]),
    ]:
        m = _map(ColumnMeta("a", 1, oid + 100000, "x[]", -1, False, kind="a", elem_type_oid=oid))
        assert m.use_text and m.convert(text) == want, oid


def test_items_keep_element_type() -> None:
    """numeric(10,3)[] items are Connect Decimals of scale 3, enum[] items Enums, bit(1)[]
    items booleans and varbit[] items Bits (which used to stop with ValueError)."""
    num = _map(
        ColumnMeta(
            "n", 1, 1231, "numeric[]", (10 << 16 | 3) + 4, False, kind="a", elem_type_oid=1700
        )
    )
    assert num.schema["items"][1]["connect.name"] == "org.apache.kafka.connect.data.Decimal"
    assert num.schema["items"][1]["scale"] == 3
    assert num.convert([Decimal("1.500")]) == [Decimal("1.500")]
    enum = _map(
        ColumnMeta(
            "e",
            1,
            99999,
            "mood[]",
            -1,
            False,
            kind="a",
            elem_type_oid=99998,
            elem_kind="e",
            enum_labels=("sad", "ok"),
        )
    )
    assert enum.schema["items"][1]["connect.name"] == "io.debezium.data.Enum"
    bit1 = _map(ColumnMeta("b", 1, 1561, "bit[]", 1, False, kind="a", elem_type_oid=1560))
    assert bit1.schema["items"][1] == "boolean" and bit1.convert("{1,0,NULL}") == [
        True,
        False,
        None,
    ]
    varbit = _map(ColumnMeta("v", 1, 1563, "varbit[]", -1, False, kind="a", elem_type_oid=1562))
    assert varbit.convert('{101,""}') == [b"\x05", b""]


def test_domain_maps_as_its_base() -> None:
    """A domain over numeric(8,2) is a Decimal of scale 2 (the domain's typmod), over int
    an int; a domain described with an array base (the row decoder describes a domain
    over an array as the array) is refused, not published as text."""
    dom = _map(
        ColumnMeta(
            "d",
            1,
            99990,
            "numdom",
            -1,
            False,
            kind="d",
            elem_type_oid=1700,
            elem_typmod=(8 << 16 | 2) + 4,
        )
    )
    assert dom.schema["scale"] == 2
    assert (
        _map(ColumnMeta("i", 1, 99991, "posint", -1, False, kind="d", elem_type_oid=23)).schema
        == "int"
    )
    with pytest.raises(PluginError, match="described as the array"):
        _map(
            ColumnMeta(
                "a", 1, 99992, "intarr", -1, False, kind="d", elem_type_oid=1007, elem_kind="a"
            )
        )


def test_array_items_take_a_domains_typmod() -> None:
    """An array whose column has no typmod takes its items' from `elem_typmod` (an array
    of numeric(5,2)'s domain, a domain over numeric(5,2)[]): Decimal(5,2) items as
    Debezium writes Decimal, not VariableScaleDecimal; the column's own typmod wins."""
    n52 = (5 << 16 | 2) + 4
    arr = _map(
        ColumnMeta(
            "a", 1, 99993, "dom52[]", -1, False, kind="a", elem_type_oid=1700, elem_typmod=n52
        )
    )
    assert arr.schema["items"] == [
        "null",
        {
            "type": "bytes",
            "scale": 2,
            "precision": 5,
            "connect.version": 1,
            "connect.parameters": {"scale": "2", "connect.decimal.precision": "5"},
            "connect.name": "org.apache.kafka.connect.data.Decimal",
            "logicalType": "decimal",
        },
    ]
    assert arr.convert([Decimal("1.50"), None]) == [Decimal("1.50"), None]
    own = _map(
        ColumnMeta(
            "a",
            1,
            1231,
            "numeric[]",
            (10 << 16 | 3) + 4,
            False,
            kind="a",
            elem_type_oid=1700,
            elem_typmod=n52,
        )
    )
    assert own.schema["items"][1]["scale"] == 3
    ints = _map(ColumnMeta("a", 1, 99994, "intarr", -1, False, kind="a", elem_type_oid=23))
    assert ints.schema == {"type": "array", "items": ["null", "int"]}


def test_timestamps_past_int64_micros_clamp() -> None:
    """A timestamp after 294247-01-10 clamps to INT64_MAX - 1 (+infinity keeps INT64_MAX)."""

    class Stored:
        infinite = 0
        micros = 294276 * 366 * 86_400_000_000

    assert timestamp_micros(Stored()) == INT64_MAX - 1


def test_tsvector_is_debezium_tsvector() -> None:
    """tsvector is the string io.debezium.data.Tsvector holding tsvectorout's text."""
    m = _map(ColumnMeta("v", 1, 3614, "tsvector", -1, False))
    assert m.schema["connect.name"] == "io.debezium.data.Tsvector" and m.use_text
    assert m.convert("'a':1 'b'") == "'a':1 'b'"


def test_vector_array_items_stay_whole() -> None:
    """vector[] and halfvec[] items are lists themselves: only the array's dimensions
    are flattened (a vector used to be spread into its floats and stop the worker)."""
    from service.types.array import PgArray  # noqa: PLC0415  (this test only)

    for ext in ("vector", "halfvec"):
        m = _map(
            ColumnMeta(
                "a", 1, 900001, "vector[]", -1, False, kind="a", elem_type_oid=900000, ext=ext
            )
        )
        assert m.convert(PgArray([[1.0, 2.5], None, [3.0]], (1,))) == [[1.0, 2.5], None, [3.0]]
        two_d = PgArray([[[1.0], [2.0]], [[3.0], None]], (1, 1))
        assert m.convert(two_d) == [[1.0], [2.0], [3.0], None]


def test_stored_bytes_column() -> None:
    """decoding.unknown_types = bytes: Avro bytes naming the type in connect.parameters."""
    m = _map(ColumnMeta("q", 2, 900002, "query_int", -1, False, stored_bytes_type="query_int"))
    assert m.schema == {"type": "bytes", "connect.parameters": {"__pgcdc.type": "query_int"}}
    assert m.convert(b"\x01\x02") == b"\x01\x02" and not m.use_text
