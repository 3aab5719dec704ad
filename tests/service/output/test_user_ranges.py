"""User-defined ranges and multiranges: `type_meta` gives their columns the range's
subtype (`ColumnMeta.range_subtype`), and a domain's column its base range's;
`user_range_kind` names the native kind of those over a built-in range's subtype or
another subtype the native writers print (the built-in one's name, or the subtype's
prefix, with the range's own OID, also for a domain over it), which the native core
accepts; any other subtype, a built-in range and a domain over one stay as they were."""

from __future__ import annotations

import pytest

from service.errors import DecodeError, SchemaMismatchError
from service.impl import native_text_core
from service.output import native_text
from service.output.native_text import user_range_kind
from service.types.registry import TypeInfo, TypeRegistry
from service.types.rowdecode import type_meta

I8RANGE, I8MULTI, FLOATRANGE, FLOATMULTI, DOM, TEXTRANGE, UUIDRANGE, XID8RANGE = range(16401, 16409)
MOOD, MOODRANGE = 16409, 16410  # an enum, and a range over it
DOM_MULTI, DOM_BUILTIN, DOM_MOOD = 16411, 16412, 16413  # domains over ranges


def _registry() -> TypeRegistry:
    reg = TypeRegistry()
    for info in (
        TypeInfo(I8RANGE, "i8r", -1, False, "d", "r", "range_out", range_subtype=20),
        TypeInfo(I8MULTI, "i8m", -1, False, "d", "m", "multirange_out", multirange_range=I8RANGE),
        TypeInfo(FLOATRANGE, "fr", -1, False, "d", "r", "range_out", range_subtype=701),
        TypeInfo(
            FLOATMULTI, "fm", -1, False, "d", "m", "multirange_out", multirange_range=FLOATRANGE
        ),
        TypeInfo(DOM, "dom", -1, False, "d", "d", "range_out", typbasetype=I8RANGE),
        TypeInfo(TEXTRANGE, "tr", -1, False, "i", "r", "range_out", range_subtype=25),
        TypeInfo(UUIDRANGE, "ur", -1, False, "i", "r", "range_out", range_subtype=2950),
        TypeInfo(XID8RANGE, "xr", -1, False, "d", "r", "range_out", range_subtype=5069),
        TypeInfo(MOOD, "mood", 4, True, "i", "e", "enum_out"),
        TypeInfo(MOODRANGE, "moodr", -1, False, "i", "r", "range_out", range_subtype=MOOD),
        TypeInfo(DOM_MULTI, "dm", -1, False, "d", "d", "multirange_out", typbasetype=I8MULTI),
        TypeInfo(DOM_BUILTIN, "db", -1, False, "i", "d", "range_out", typbasetype=3904),
        TypeInfo(DOM_MOOD, "dmo", -1, False, "i", "d", "range_out", typbasetype=MOODRANGE),
    ):
        reg.add(info)
    return reg


def _kind(oid: int) -> tuple[int, str | None]:
    reg = _registry()
    meta = type_meta(reg.get(oid), reg, "c", 1, -1, reg.get(oid).name)
    return meta.range_subtype, user_range_kind(meta)


def test_user_ranges_over_builtin_subtypes_get_the_builtin_kind_with_their_oid() -> None:
    assert _kind(I8RANGE) == (20, f"int8range@{I8RANGE}")
    assert _kind(I8MULTI) == (20, f"int8multirange@{I8MULTI}")


def test_user_only_subtypes_have_a_user_kind_and_other_subtypes_none() -> None:
    """float8, text, uuid and xid8 ranges (no built-in range over them) are named by
    their subtype's prefix; a range over an enum, which the native range writer does not
    print (its bounds are pg_enum OIDs), has no kind."""
    assert _kind(FLOATRANGE) == (701, f"float8range@{FLOATRANGE}")
    assert _kind(FLOATMULTI) == (701, f"float8multirange@{FLOATMULTI}")
    assert _kind(TEXTRANGE) == (25, f"textrange@{TEXTRANGE}")
    assert _kind(UUIDRANGE) == (2950, f"uuidrange@{UUIDRANGE}")
    assert _kind(XID8RANGE) == (5069, f"xid8range@{XID8RANGE}")
    assert _kind(MOODRANGE) == (MOOD, None)


@pytest.mark.skipif(native_text_core() is None, reason="PGCDC_IMPL selects python")
@pytest.mark.parametrize("subtype", sorted(native_text._RANGE_SUBTYPES))
def test_the_native_core_accepts_every_user_range_kind(subtype: int) -> None:
    """Each subtype's range and multirange kind is one the native text plan parses (the
    prefixes of native_text and types::outtext agree); a made-up subtype's is not."""
    native = native_text_core()
    assert native is not None
    prefix = native_text._RANGE_SUBTYPES[subtype]
    for kind in (f"{prefix}range@16401", f"{prefix}multirange@16402"):
        column = ("r", -1, 4, False, False, " r[r]:", kind)
        native.TextPlan([column], "public.t", SchemaMismatchError, DecodeError)
    with pytest.raises(ValueError, match="unknown kind"):
        column = ("r", -1, 4, False, False, " r[r]:", "xidrange@16401")  # xid: no btree
        native.TextPlan([column], "public.t", SchemaMismatchError, DecodeError)


def test_builtins_have_no_user_kind() -> None:
    assert _kind(3926) == (20, None)  # int8range: the built-in kind, by OID
    assert _kind(4536) == (20, None)  # int8multirange
    assert _kind(23)[1] is None
    assert _kind(DOM_BUILTIN) == (23, None)  # a domain over int4range: _domain_kind's


def test_a_domain_over_a_user_range_has_the_ranges_kind_and_oid() -> None:
    """Its datums are the range's (they store the range's OID, not the domain's)."""
    assert _kind(DOM) == (20, f"int8range@{I8RANGE}")
    assert _kind(DOM_MULTI) == (20, f"int8multirange@{I8MULTI}")
    assert _kind(DOM_MOOD) == (MOOD, None)  # over a range over an enum: none
