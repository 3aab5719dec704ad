"""The text output plugin: prints exactly what contrib/test_decoding prints.

It receives the plugin callbacks of `service.output.api` and writes one string per
line, as test_decoding's pg_decode_* callbacks do, so pgcdc's output can be compared
line for line with a real test_decoding slot over the same WAL, and so operators can
read a stream (`pgcdc peek`).

Options (as test_decoding's, same defaults): include-xids (on), include-timestamp (off),
skip-empty-xacts (off), only-local (off), include-rewrites (off: pgcdc never emits
rewrite output anyway), stream-changes (off). An unknown option or a value that is not
a boolean is a PluginError naming it. Two options are pgcdc's own: `server-version`
(15..18; default 18) picks the keyword list quote_identifier() uses, and `two-phase`
(off) stands for the slot's two_phase flag: off, a prepared transaction is printed at
COMMIT PREPARED as a plain BEGIN ... COMMIT (a default test_decoding slot); on, it is
printed at PREPARE with PREPARE TRANSACTION, then COMMIT/ROLLBACK PREPARED.

Values are printed as print_literal does: integers, oid, floats and numeric bare; bit
and varbit as B'...'; bool as true/false; everything else single-quoted with quotes
doubled. NULL prints `null`; an unchanged TOAST value `unchanged-toast-datum`.

`changes` (pgcdc's run callback) writes what `change` would for each change of the run.
When `PGCDC_IMPL` selects the native core, a run of one table definition and op goes to
the native line writer (service.output.native_text), which prints the same lines from
the raw tuples; otherwise, and for every row it leaves to Python, `change` prints it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from service import impl
from service.errors import PluginError
from service.output.api import (
    ChangeOp,
    ColumnCodec,
    ColumnValue,
    Message,
    PluginContext,
    RelationInfo,
    RowChange,
    StoredValue,
    TruncateChange,
    TxnInfo,
)
from service.output.native_text import NativeText
from service.output.pg_keywords import QUOTED_KEYWORDS
from service.pgconst import BOOL_OID, PG_EPOCH_UTC
from service.types.rowdecode import RowRun, RunList

BARE_TYPES = frozenset({21, 23, 20, 26, 700, 701, 1700})  # int2 int4 int8 oid float4 float8 numeric
BIT_TYPES = frozenset({1560, 1562})  # bit, varbit

_SIMPLE_IDENT = re.compile(r"^[a-z_][a-z0-9_$]*$")
_TRUE = {"on", "true", "yes", "1", "t", "y"}
_FALSE = {"off", "false", "no", "0", "f", "n"}
_DEFAULTS = {
    "include-xids": True,
    "include-timestamp": False,
    "skip-empty-xacts": False,
    "only-local": False,
    "include-rewrites": False,
    "stream-changes": False,
}


_QUOTED, _BARE, _BIT, _BOOL = 0, 1, 2, 3  # print_literal's cases


@dataclass(slots=True, frozen=True)
class _ColumnFormat:
    """One column's printed pieces: ` name[type]:` alone, with `null`, with
    `unchanged-toast-datum`, and with the literal's opening (`'` or `B'`)."""

    head: str
    null: str
    unchanged: str
    quoted: str
    kind: int


def quote_identifier(ident: str, version: int) -> str:
    """quote_identifier(): quote unless lower-case simple and not a reserved keyword."""
    if _SIMPLE_IDENT.match(ident) and ident not in QUOTED_KEYWORDS[version]:
        return ident
    return '"' + ident.replace('"', '""') + '"'


def print_literal(type_oid: int, text: str) -> str:
    """print_literal() of test_decoding."""
    if type_oid in BARE_TYPES:
        return text
    if type_oid in BIT_TYPES:
        return f"B'{text}'"
    if type_oid == BOOL_OID:
        return "true" if text == "t" else "false"
    return "'" + text.replace("'", "''") + "'"


def timestamptz_to_str(micros: int) -> str:
    """timestamptz_to_str() in UTC, as the server prints it with TimeZone=UTC."""
    moment = PG_EPOCH_UTC + timedelta(microseconds=micros)
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + "+00"


class TestDecodingPlugin:
    """The plugin object; one instance per decoding session."""

    __test__ = False  # not a pytest test class, despite its name
    can_stream = False  # settled by startup() from stream-changes
    two_phase = False  # settled by startup() from two-phase

    def __init__(self) -> None:
        self.opts: dict[str, bool] = dict(_DEFAULTS)
        self.version = 18
        self.wrote: dict[int, bool] = {}  # xid -> xact_wrote_changes
        self.stream_wrote: dict[int, bool] = {}
        # Printed pieces per shared codec / per (schema, table); both depend on
        # `version`, so startup() clears them.
        self._formats: dict[ColumnCodec, _ColumnFormat] = {}
        self._prefixes: dict[tuple[str, str], str] = {}
        # The native line writer, when PGCDC_IMPL selects the native core (startup).
        self.native_text: NativeText | None = None

    # --- options and lifecycle --------------------------------------------------------

    def startup(self, ctx: PluginContext, options: Mapping[str, str], is_init: bool) -> None:
        two_phase = False
        for name, raw in options.items():
            if name == "two-phase":
                if raw.lower() not in _TRUE | _FALSE:
                    raise PluginError(
                        f'could not parse value "{raw}" for parameter "{name}"', field=name
                    )
                two_phase = raw.lower() in _TRUE
                continue
            if name == "server-version":
                if not raw.isdigit() or int(raw) not in QUOTED_KEYWORDS:
                    raise PluginError(
                        f"option server-version = {raw!r} is not supported", field=name
                    )
                self.version = int(raw)
                continue
            if name not in _DEFAULTS:
                raise PluginError(f'option "{name}" = "{raw}" is unknown', field=name)
            value = raw.lower()
            if value not in _TRUE | _FALSE:
                raise PluginError(
                    f'could not parse value "{raw}" for parameter "{name}"', field=name
                )
            self.opts[name] = value in _TRUE
        self.two_phase = two_phase
        self.can_stream = self.opts["stream-changes"]
        self._formats.clear()
        self._prefixes.clear()
        core = impl.native_text_core()
        self.native_text = None if core is None else NativeText(self, core)

    def filter_by_origin(self, ctx: PluginContext, origin: int) -> bool:
        return self.opts["only-local"] and origin != 0

    def filter_prepare(self, ctx: PluginContext, xid: int, gid: str) -> bool:
        """pg_decode_filter_prepare: a GID containing `_nodecode` is decoded at COMMIT
        PREPARED, as a plain transaction."""
        return "_nodecode" in gid

    # --- the transaction callbacks -----------------------------------------------------

    def _begin_line(self, txn: TxnInfo) -> str:
        return f"BEGIN {txn.xid}" if self.opts["include-xids"] else "BEGIN"

    def maybe_begin(self, ctx: PluginContext, txn: TxnInfo) -> None:
        """Before a change's line: the BEGIN that skip-empty-xacts held back."""
        if self.opts["skip-empty-xacts"] and not self.wrote.get(txn.xid, False):
            ctx.write(self._begin_line(txn))
        self.wrote[txn.xid] = True

    def begin(self, ctx: PluginContext, txn: TxnInfo) -> None:
        self.wrote[txn.xid] = False
        if not self.opts["skip-empty-xacts"]:
            ctx.write(self._begin_line(txn))

    def commit(self, ctx: PluginContext, txn: TxnInfo, commit_lsn: int) -> None:
        wrote = self.wrote.pop(txn.xid, False)
        if self.opts["skip-empty-xacts"] and not wrote:
            return
        line = f"COMMIT {txn.xid}" if self.opts["include-xids"] else "COMMIT"
        if self.opts["include-timestamp"]:
            line += f" (at {timestamptz_to_str(txn.commit_time)})"
        ctx.write(line)

    def change(self, ctx: PluginContext, txn: TxnInfo, change: RowChange) -> None:
        self.maybe_begin(ctx, txn)
        ctx.write(self.format_change(change))

    def changes(self, ctx: PluginContext, txn: TxnInfo, changes: Sequence[RowChange]) -> None:
        """`change` for each of a run of changes, in order; a RowRun through the native
        line writer when there is one (see the module docstring)."""
        native = self.native_text
        if native is not None and type(changes) is RowRun:
            native.write(ctx, txn, changes)
            return
        if native is not None and type(changes) is RunList:
            for run in changes.runs:
                native.write(ctx, txn, run)
            return
        for change in changes:
            ctx.write_lsn = change.lsn
            self.change(ctx, txn, change)

    def truncate(self, ctx: PluginContext, txn: TxnInfo, change: TruncateChange) -> None:
        self.maybe_begin(ctx, txn)
        ctx.write(self.format_truncate(change))

    def message(self, ctx: PluginContext, txn: TxnInfo | None, message: Message) -> None:
        # test_decoding of PG17+ opens a skipped-empty transaction for a transactional
        # message too (pg_decode_message calls pg_output_begin); PG15's and PG16's do
        # not. Measured on 15.18, 16.15, 17.10 and 18.6.
        if self.version >= 17 and message.transactional and txn is not None:
            self.maybe_begin(ctx, txn)
        ctx.write(self.format_message(message))

    # --- two-phase --------------------------------------------------------------------

    def begin_prepare(self, ctx: PluginContext, txn: TxnInfo) -> None:
        self.begin(ctx, txn)

    def _gid_line(self, what: str, txn: TxnInfo, at: int | None) -> str:
        line = f"{what} " + "'" + (txn.gid or "").replace("'", "''") + "'"
        if self.opts["include-xids"]:
            line += f", txid {txn.xid}"
        if self.opts["include-timestamp"] and at is not None:
            line += f" (at {timestamptz_to_str(at)})"
        return line

    def prepare(self, ctx: PluginContext, txn: TxnInfo, prepare_lsn: int) -> None:
        wrote = self.wrote.pop(txn.xid, False)
        if self.opts["skip-empty-xacts"] and not wrote:
            return
        ctx.write(self._gid_line("PREPARE TRANSACTION", txn, txn.commit_time))

    def commit_prepared(self, ctx: PluginContext, txn: TxnInfo, commit_lsn: int) -> None:
        ctx.write(self._gid_line("COMMIT PREPARED", txn, txn.commit_time))

    def rollback_prepared(
        self, ctx: PluginContext, txn: TxnInfo, prepare_end_lsn: int, prepare_time: int
    ) -> None:
        ctx.write(self._gid_line("ROLLBACK PREPARED", txn, txn.commit_time))

    # --- streaming --------------------------------------------------------------------

    def _txn_suffix(self, txn: TxnInfo) -> str:
        return f" TXN {txn.xid}" if self.opts["include-xids"] else ""

    def stream_start(self, ctx: PluginContext, txn: TxnInfo) -> None:
        self.wrote.setdefault(txn.xid, False)
        self.stream_wrote[txn.xid] = False
        if not self.opts["skip-empty-xacts"]:
            ctx.write("opening a streamed block for transaction" + self._txn_suffix(txn))

    def _stream_begin(self, ctx: PluginContext, txn: TxnInfo) -> None:
        if self.opts["skip-empty-xacts"] and not self.stream_wrote.get(txn.xid, False):
            ctx.write("opening a streamed block for transaction" + self._txn_suffix(txn))
        self.stream_wrote[txn.xid] = True
        self.wrote[txn.xid] = True

    def stream_stop(self, ctx: PluginContext, txn: TxnInfo) -> None:
        if self.opts["skip-empty-xacts"] and not self.stream_wrote.get(txn.xid, False):
            return
        ctx.write("closing a streamed block for transaction" + self._txn_suffix(txn))

    def stream_change(self, ctx: PluginContext, txn: TxnInfo, change: RowChange) -> None:
        self._stream_begin(ctx, txn)
        xids = self.opts["include-xids"]
        ctx.write(
            f"streaming change for TXN {txn.xid}" if xids else "streaming change for transaction"
        )

    def stream_truncate(self, ctx: PluginContext, txn: TxnInfo, change: TruncateChange) -> None:
        self._stream_begin(ctx, txn)
        xids = self.opts["include-xids"]
        ctx.write(
            f"streaming truncate for TXN {txn.xid}"
            if xids
            else "streaming truncate for transaction"
        )

    def stream_message(self, ctx: PluginContext, txn: TxnInfo, message: Message) -> None:
        # Transactional contents stay hidden until commit, as pg_decode_stream_message.
        head = (
            f"streaming message: transactional: {int(message.transactional)} "
            f"prefix: {message.prefix}, sz: {len(message.payload)}"
        )
        if message.transactional:
            ctx.write(head)
        else:
            ctx.write(head + " content:" + message.payload.decode("utf-8", errors="replace"))

    def stream_abort(
        self, ctx: PluginContext, txn: TxnInfo, abort_lsn: int, toplevel: TxnInfo | None = None
    ) -> None:
        top = toplevel or txn
        wrote = self.wrote.get(top.xid, False)
        if toplevel is None:
            self.wrote.pop(txn.xid, None)
        if self.opts["skip-empty-xacts"] and not wrote:
            return
        ctx.write("aborting streamed (sub)transaction" + self._txn_suffix(txn))

    def stream_commit(self, ctx: PluginContext, txn: TxnInfo, commit_lsn: int) -> None:
        wrote = self.wrote.pop(txn.xid, False)
        self.stream_wrote.pop(txn.xid, None)
        if self.opts["skip-empty-xacts"] and not wrote:
            return
        line = "committing streamed transaction" + self._txn_suffix(txn)
        if self.opts["include-timestamp"]:
            line += f" (at {timestamptz_to_str(txn.commit_time)})"
        ctx.write(line)

    # --- formatting -------------------------------------------------------------------

    def column_head(self, name: str, type_name: str) -> str:
        """` name[type]:`, a column's printed head (the name as quote_identifier quotes it
        for the server version)."""
        return f" {quote_identifier(name, self.version)}[{type_name}]:"

    def _column_format(self, codec: ColumnCodec) -> _ColumnFormat:
        """The printed pieces of one column (` name[type]:` and its literal kind), kept
        per shared codec: every row of a definition prints the same header."""
        fmt = self._formats.get(codec)
        if fmt is not None:
            return fmt
        head = self.column_head(codec.name, codec.type_name)
        oid = codec.type_oid
        kind = (
            _BARE
            if oid in BARE_TYPES
            else _BIT
            if oid in BIT_TYPES
            else _BOOL
            if oid == BOOL_OID
            else _QUOTED
        )
        fmt = _ColumnFormat(
            head,
            head + "null",
            head + "unchanged-toast-datum",
            head + ("B'" if kind == _BIT else "'"),
            kind,
        )
        if codec.shared:
            self._formats[codec] = fmt
        return fmt

    def _tuple(self, row: Sequence[ColumnValue], skip_nulls: bool) -> str:
        parts: list[str] = []
        append = parts.append
        formats = self._formats
        for col in row:
            codec = col.codec
            fmt = formats.get(codec)
            if fmt is None:
                fmt = self._column_format(codec)
            if type(col) is not StoredValue:  # a stored datum is never NULL or unchanged
                if col.is_null:
                    if not skip_nulls:
                        append(fmt.null)
                    continue
                if col.unchanged:
                    append(fmt.unchanged)
                    continue
            # print_literal(), with the header and the opening quote joined once
            text = col.text
            assert text is not None
            kind = fmt.kind
            if kind == _QUOTED:
                append(fmt.quoted + text.replace("'", "''") + "'")
            elif kind == _BARE:
                append(fmt.head + text)
            elif kind == _BIT:
                append(fmt.quoted + text + "'")
            else:
                append(fmt.head + ("true" if text == "t" else "false"))
        return "".join(parts)

    def table_prefix(self, rel: RelationInfo) -> str:
        """`table schema.name:`, the start of a change's line."""
        key = (rel.schema, rel.name)
        prefix = self._prefixes.get(key)
        if prefix is None:
            prefix = (
                f"table {quote_identifier(rel.schema, self.version)}."
                f"{quote_identifier(rel.name, self.version)}:"
            )
            self._prefixes[key] = prefix
        return prefix

    def format_change(self, change: RowChange) -> str:
        line = self.table_prefix(change.relation)
        match change.op:
            case ChangeOp.INSERT:
                line += " INSERT:"
                line += (
                    self._tuple(change.new, False) if change.new is not None else " (no-tuple-data)"
                )
            case ChangeOp.UPDATE:
                line += " UPDATE:"
                if change.old is not None:
                    line += " old-key:" + self._tuple(change.old, True) + " new-tuple:"
                line += (
                    self._tuple(change.new, False) if change.new is not None else " (no-tuple-data)"
                )
            case ChangeOp.DELETE:
                line += " DELETE:"
                line += (
                    self._tuple(change.old, True) if change.old is not None else " (no-tuple-data)"
                )
            case _:
                raise PluginError(f"unexpected change {change.op!r}", lsn=change.lsn)
        return line

    def format_truncate(self, change: TruncateChange) -> str:
        names = ", ".join(
            f"{quote_identifier(r.schema, self.version)}.{quote_identifier(r.name, self.version)}"
            for r in change.relations
        )
        flags = ""
        if change.restart_seqs:
            flags += " restart_seqs"
        if change.cascade:
            flags += " cascade"
        return f"table {names}: TRUNCATE:" + (flags or " (no-flags)")

    def format_message(self, message: Message) -> str:
        return (
            f"message: transactional: {int(message.transactional)} prefix: {message.prefix}, "
            f"sz: {len(message.payload)} content:"
            + message.payload.decode("utf-8", errors="replace")
        )


def make_plugin() -> Any:
    """Entry-point factory for `text` and `test_decoding`."""
    return TestDecodingPlugin()
