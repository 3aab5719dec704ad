"""The text plugin prints what test_decoding prints (pure formatting checks).

The line-for-line comparison with a real test_decoding slot lives in
tests/integration/test_text_plugin_vs_test_decoding.py; these pin the formatting rules.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.errors import PluginError
from service.output.api import (
    UNCHANGED_TOAST,
    ChangeOp,
    ColumnValue,
    Message,
    PluginContext,
    PluginWrapper,
    RelationInfo,
    RowChange,
    TruncateChange,
    TxnInfo,
    load_plugin,
)
from service.output.text import TestDecodingPlugin, print_literal, quote_identifier

REL = RelationInfo(oid=1, schema="public", name="t", replica_identity="d", key_columns=("id",))


def col(name: str, oid: int, type_name: str, value: object, text: str | None) -> ColumnValue:
    return ColumnValue(name, oid, type_name, lambda: value, lambda: text)


def run(options: dict[str, str], calls: list[tuple[str, tuple[Any, ...]]]) -> list[str]:
    out: list[str] = []
    ctx = PluginContext("s", "text", options, lambda lsn, xid, data: out.append(data))
    wrapper = PluginWrapper(TestDecodingPlugin(), ctx)
    wrapper.startup(True)
    for name, args in calls:
        wrapper.call(name, 1, 1, *args)
    return out


TXN = TxnInfo(xid=742, first_lsn=1, final_lsn=2, end_lsn=3, commit_time=0, origin=None, gid="g'1")


def test_quote_identifier_follows_keywords_and_case() -> None:
    """Simple lower-case names stay bare; keywords, capitals and odd chars are quoted."""
    assert quote_identifier("data", 15) == "data"
    assert quote_identifier("user", 15) == '"user"'
    assert quote_identifier("Mixed", 18) == '"Mixed"'
    assert quote_identifier('a"b', 18) == '"a""b"'
    assert quote_identifier("json_table", 15) == "json_table"
    assert quote_identifier("json_table", 18) == '"json_table"'


def test_print_literal_quotes_like_test_decoding() -> None:
    """Numbers are bare, bits are B'..', bools are words, the rest quoted with '' doubling."""
    assert print_literal(23, "-5") == "-5"
    assert print_literal(1700, "NaN") == "NaN"
    assert print_literal(1560, "101") == "B'101'"
    assert print_literal(16, "t") == "true"
    assert print_literal(16, "f") == "false"
    assert print_literal(25, "it's") == "'it''s'"


def test_insert_update_delete_lines() -> None:
    """INSERT prints every column; UPDATE with an old key; DELETE skips NULL key parts."""
    new = [
        col("id", 23, "integer", 1, "1"),
        col("data", 25, "text", None, None),
        col("big", 25, "text", UNCHANGED_TOAST, None),
    ]
    old = [col("id", 23, "integer", 7, "7"), col("data", 25, "text", None, None)]
    lines = run(
        {"include-xids": "0"},
        [
            ("begin", (TXN,)),
            ("change", (TXN, RowChange(ChangeOp.INSERT, 1, REL, new, None, False))),
            ("change", (TXN, RowChange(ChangeOp.UPDATE, 1, REL, new, old, True))),
            ("change", (TXN, RowChange(ChangeOp.DELETE, 1, REL, None, old, True))),
            ("change", (TXN, RowChange(ChangeOp.DELETE, 1, REL, None, None, True))),
            ("commit", (TXN, 2)),
        ],
    )
    assert lines == [
        "BEGIN",
        "table public.t: INSERT: id[integer]:1 data[text]:null big[text]:unchanged-toast-datum",
        "table public.t: UPDATE: old-key: id[integer]:7 new-tuple: id[integer]:1 data[text]:null"
        " big[text]:unchanged-toast-datum",
        "table public.t: DELETE: id[integer]:7",
        "table public.t: DELETE: (no-tuple-data)",
        "COMMIT",
    ]


def test_skip_empty_xacts_defers_begin_and_drops_empty() -> None:
    """With skip-empty-xacts, BEGIN appears only before the first change."""
    trunc = TruncateChange(1, [REL, RelationInfo(2, "s", "u", "d", ())], True, False)
    lines = run(
        {"skip-empty-xacts": "1"},
        [
            ("begin", (TXN,)),
            ("commit", (TXN, 2)),
            ("begin", (TXN,)),
            ("truncate", (TXN, trunc)),
            ("commit", (TXN, 2)),
        ],
    )
    assert lines == ["BEGIN 742", "table public.t, s.u: TRUNCATE: cascade", "COMMIT 742"]


@pytest.mark.parametrize("version", [15, 16, 17, 18])
def test_transactional_message_opens_skipped_begin_from_17(version: int) -> None:
    """With skip-empty-xacts, test_decoding of 17 and 18 prints BEGIN before a
    transaction's first transactional message; that of 15 and 16 prints none."""
    msg = Message(5, True, "pfx", b"hi")
    lines = run(
        {"skip-empty-xacts": "1", "include-xids": "0", "server-version": str(version)},
        [("begin", (TXN,)), ("message", (TXN, msg)), ("commit", (TXN, 2))],
    )
    line = "message: transactional: 1 prefix: pfx, sz: 2 content:hi"
    assert lines == (["BEGIN", line, "COMMIT"] if version >= 17 else [line])


def test_quote_identifier_differs_per_version() -> None:
    """Keywords that 16 and 17 made reserved (pg_get_keywords) are quoted from then on."""
    assert quote_identifier("system_user", 15) == "system_user"
    assert quote_identifier("system_user", 16) == '"system_user"'
    assert quote_identifier("json_table", 16) == "json_table"
    assert quote_identifier("json_table", 17) == '"json_table"'
    assert quote_identifier("merge_action", 17) == '"merge_action"'


def test_messages_and_two_phase_lines() -> None:
    """Messages carry size and content; 2PC lines quote the gid and add the txid."""
    msg = Message(5, False, "pfx", b"hello")
    lines = run(
        {},
        [
            ("message", (None, msg)),
            ("begin_prepare", (TXN,)),
            ("prepare", (TXN, 9)),
            ("commit_prepared", (TXN, 10)),
            ("rollback_prepared", (TXN, 10, 0)),
        ],
    )
    assert lines == [
        "message: transactional: 0 prefix: pfx, sz: 5 content:hello",
        "BEGIN 742",
        "PREPARE TRANSACTION 'g''1', txid 742",
        "COMMIT PREPARED 'g''1', txid 742",
        "ROLLBACK PREPARED 'g''1', txid 742",
    ]


def test_unknown_option_is_refused() -> None:
    """An option test_decoding does not know is an error naming it."""
    with pytest.raises(PluginError, match="nonsense"):
        run({"nonsense": "1"}, [])
    with pytest.raises(PluginError, match="could not parse"):
        run({"include-xids": "maybe"}, [])


def test_plugin_is_found_by_entry_point() -> None:
    """`text` and `test_decoding` resolve through the pgcdc.output_plugins entry points."""
    assert isinstance(load_plugin("text"), TestDecodingPlugin)
    assert isinstance(load_plugin("test_decoding"), TestDecodingPlugin)
    with pytest.raises(PluginError, match="no output plugin named"):
        load_plugin("nope")


def test_writes_outside_callbacks_are_refused() -> None:
    """accept_writes: a write outside a callback is a PluginError."""
    ctx = PluginContext("s", "text", {}, lambda lsn, xid, data: None)
    with pytest.raises(PluginError, match="outside a callback"):
        ctx.write("x")


def test_plugin_without_required_callbacks_is_refused() -> None:
    """A plugin lacking begin/change/commit cannot be wrapped."""
    ctx = PluginContext("s", "bad", {}, lambda lsn, xid, data: None)
    with pytest.raises(PluginError, match="begin, change, commit"):
        PluginWrapper(object(), ctx)


def test_callback_failure_carries_context() -> None:
    """An exception in a callback is re-raised as PluginError naming slot, plugin, LSN."""

    class Broken(TestDecodingPlugin):
        def begin(self, ctx: PluginContext, txn: TxnInfo) -> None:
            raise ValueError("boom")

    ctx = PluginContext("myslot", "broken", {}, lambda lsn, xid, data: None)
    wrapper = PluginWrapper(Broken(), ctx)
    with pytest.raises(
        PluginError,
        match=r"slot myslot, output plugin broken, callback begin "
        r"at 0/10 failed",
    ) as info:
        wrapper.call("begin", 0x10, 5, TXN)
    assert isinstance(info.value.__cause__, ValueError)
