"""TOAST values read from the source's TOAST tables: the edge of the unchanged-TOAST fill.

Implements `service.output.toastfill.ToastSource` over its own SQL connection (through
`server.connect`: autocommit, statement_timeout, classified errors). Receives, once per
batch of changes, the chunk ids wanted per TOAST relation OID (`va_toastrelid` of the
pointers); hands back, for each value still stored, its chunk_data concatenated in
chunk_seq order, exactly the bytes `toast_fetch_datum` (detoast.c) would assemble.

How, per TOAST relation (whose name is looked up by the pointer's OID, so a relation
dropped or rewritten away since yields nothing):
1. An MVCC read, `SELECT chunk_id, chunk_seq, chunk_data FROM pg_toast.pg_toast_<oid>
   WHERE chunk_id = ANY(...) ORDER BY chunk_id, chunk_seq`: the values still referenced
   by a live row (the common case: the row was not changed since).
2. For the ids step 1 did not see: the TOAST relation's pages, read raw, every tuple
   still stored whether or not a snapshot sees it. Through `pgcdc.toast_chunks` (the
   SECURITY DEFINER reader `pgcdc setup` installs, connectors/postgres/sql/
   toast_reader.sql) when the role may execute it: how the least-privilege worker role
   reads them; else, for a superuser with `pageinspect` installed, directly
   (`heap_page_items(get_raw_page(...))`). Neither: step 1 alone (the start-up check,
   connectors.postgres.privileges, keeps a worker with the fill on from getting here).
   This is what finds a value a later transaction deleted or replaced (its chunks
   then have an xmax, invisible to step 1) but that VACUUM has not removed, which the
   slot's xmin hold (connectors.postgres.stream) prevents. Chunk ids are
   unique among the stored tuples of a TOAST relation (GetNewOidWithIndex checks with
   SnapshotAny), so every stored chunk of that id belongs to the value.
A value whose chunk_seq run is not 0..n-1 is not handed back (a warning
`toast_chunks_incomplete` names it): without the xmin hold, pruning
(heap_page_prune_opt, on any read of the page, this reader's own included) and VACUUM
remove dead chunks page by page, so part of a value can be gone. A
missing privilege on the TOAST table (or pageinspect dropped under pgcdc.toast_chunks)
is a warning `toast_fill_denied`: the values of that batch stay placeholders (counted
by the caller), the worker goes on.

`start_xmin(slot)` is the xmin the hold starts from before its first RUNNING_XACTS
(service.output.xminhold.XminHold.assume): the slot's own xmin when a previous run left
its hold there (a crash: a clean stop clears it), else the database's datfrozenxid.
Every dead tuple still stored was deleted by an xid at or after datfrozenxid (VACUUM
sets relfrozenxid no later than the horizon it removed tuples up to), so holding it
keeps all of them, at the cost of VACUUM removing nothing newer until the hold moves
on. `await_hold(slot)` makes the next `fetch` first wait (up to `HOLD_WAIT_S`) until the
slot shows an xmin, then read on a new connection: a backend keeps the removal horizon
it last computed (GlobalVisState's maybe_needed, which GlobalVisTestIsRemovableXid
trusts without recomputing), so one that computed it before the hold was set could
still prune the page of a value the hold now keeps, this reader's own MVCC read
included. A backend started after the slot's xmin was set computes with it.
`next_full_xid()` is the server's next FullTransactionId (`pg_current_snapshot()`'s
xmax): the hot-standby feedback needs the epoch of the xmin it holds.
Connection errors surface as `SourceUnavailableError` (retry).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg2
import psycopg2.errors
import psycopg2.extensions
import psycopg2.sql
import structlog

from connectors.postgres.server import connect, retry_transient
from service.errors import SourceUnavailableError
from service.lsn import format_lsn
from service.types.varlena import read_varlena

log = structlog.get_logger(__name__)

_OID = struct.Struct("<I")
_CHUNK_HEAD = struct.Struct("<Ii")  # chunk_id oid, chunk_seq int4 (t_data of a toast row)

_NAMES_SQL = """
SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = ANY(%(oids)s::oid[]) AND c.relkind = 't'
"""

# How step 2 reads raw pages on this connection: 'reader' (pgcdc.toast_chunks), 'direct'
# (a superuser with pageinspect) or '' (neither).
_RAW_MODE_SQL = """
SELECT CASE
    WHEN pg_catalog.to_regprocedure('pgcdc.toast_chunks(regclass,oid[])') IS NOT NULL
         AND pg_catalog.has_schema_privilege('pgcdc', 'USAGE')
         AND pg_catalog.has_function_privilege(
             pg_catalog.to_regprocedure('pgcdc.toast_chunks(regclass,oid[])'), 'EXECUTE')
    THEN 'reader'
    WHEN pg_catalog.current_setting('is_superuser') = 'on'
         AND EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pageinspect')
    THEN 'direct'
    ELSE '' END
"""

_READER_SQL = "SELECT pgcdc.toast_chunks(%(oid)s::oid::regclass, %(ids)s::oid[])"

_RAW_SQL = """
SELECT i.t_data
FROM generate_series(0, (pg_catalog.pg_relation_size(%(oid)s::oid::regclass)
                         / pg_catalog.current_setting('block_size')::int)::int - 1) AS b,
     LATERAL heap_page_items(get_raw_page(%(oid)s::oid::regclass::text, b)) AS i
WHERE i.lp_flags = 1 AND i.t_data IS NOT NULL
  AND substring(i.t_data FROM 1 FOR 4) = ANY(%(heads)s::bytea[])
"""  # the superuser's direct read; pgcdc.toast_chunks does the same for the worker's role

_START_XMIN_SQL = """
SELECT coalesce((SELECT s.xmin FROM pg_catalog.pg_replication_slots s
                 WHERE s.slot_name = %(slot)s), d.datfrozenxid)::text::bigint
FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()
"""

_SLOT_XMIN_SQL = "SELECT xmin FROM pg_catalog.pg_replication_slots WHERE slot_name = %(slot)s"
HOLD_WAIT_S = 10.0

_NEXT_XID_SQL = "SELECT pg_catalog.txid_snapshot_xmax(pg_catalog.txid_current_snapshot())"


class SqlToastSource:
    """`ToastSource` on a SQL connection of the source database (module docstring)."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: psycopg2.extensions.connection | None = None
        self._raw_mode: str | None = None  # _RAW_MODE_SQL's answer, asked once per connection
        self._await_slot: str | None = None  # await_hold's slot, until the wait is done
        self.queries = 0
        self.raw_reads = 0  # values found only in the raw pages (deleted, not vacuumed)

    def _connection(self) -> psycopg2.extensions.connection:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self._dsn, "pgcdc-toast")
            self._raw_mode = None
        return self._conn

    def _query(self, sql: Any, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        def attempt() -> list[tuple[Any, ...]]:
            self.queries += 1
            with self._connection().cursor() as cur:
                cur.execute(sql, params)
                return list(cur.fetchall())

        try:
            return retry_transient("toast read", attempt)
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as exc:
            self.close()
            raise SourceUnavailableError(f"TOAST read failed: {exc}") from exc

    def close(self) -> None:
        if self._conn is not None and not self._conn.closed:
            self._conn.close()
        self._conn = None

    def await_hold(self, slot: str) -> None:
        """Before the next fetch: wait for `slot`'s xmin, then reconnect (module docstring)."""
        self._await_slot = slot

    def _wait_for_hold(self, slot: str) -> None:
        deadline = time.monotonic() + HOLD_WAIT_S
        while not self._query(_SLOT_XMIN_SQL, {"slot": slot})[0][0]:
            if time.monotonic() >= deadline:
                log.warning("toast_hold_not_seen", slot=slot, waited_s=HOLD_WAIT_S)
                break
            time.sleep(0.05)
        self.close()  # the reads go on a backend that computes its horizon with the hold

    def start_xmin(self, slot: str) -> int:
        """The 32-bit xid the xmin hold starts from (module docstring)."""
        return int(self._query(_START_XMIN_SQL, {"slot": slot})[0][0])

    def next_full_xid(self) -> int:
        """The server's next FullTransactionId (64 bits: epoch << 32 | xid)."""
        return int(self._query(_NEXT_XID_SQL, {})[0][0])

    def fetch(self, wanted: Mapping[int, Sequence[int]], lsn: int) -> dict[tuple[int, int], bytes]:
        """See `service.output.toastfill.ToastSource.fetch`."""
        if self._await_slot is not None:
            slot, self._await_slot = self._await_slot, None
            self._wait_for_hold(slot)
        names = {
            int(oid): (str(nsp), str(rel))
            for oid, nsp, rel in self._query(_NAMES_SQL, {"oids": list(wanted)})
        }
        out: dict[tuple[int, int], bytes] = {}
        for relid, ids in wanted.items():
            qualified = names.get(relid)
            if qualified is None:
                continue  # the TOAST relation is gone: every value of it is
            name = ".".join(qualified)
            try:
                chunks = self._read_live(qualified, ids)
                missing = [i for i in ids if i not in chunks]
                if missing and self._mode():
                    raw = self._read_raw(relid, missing)
                    self.raw_reads += len(raw)
                    chunks.update(raw)
            except (
                psycopg2.errors.InsufficientPrivilege,
                psycopg2.errors.ObjectNotInPrerequisiteState,  # pageinspect gone
            ) as exc:
                log.warning(
                    "toast_fill_denied",
                    toast_relation=name,
                    lsn=format_lsn(lsn),
                    error=str(exc).strip(),
                )
                continue
            for valueid, seqs in chunks.items():
                data = _assemble(seqs)
                if data is None:
                    log.warning(
                        "toast_chunks_incomplete",
                        toast_relation=name,
                        valueid=valueid,
                        lsn=format_lsn(lsn),
                    )
                    continue
                out[(relid, valueid)] = data
        return out

    def _read_live(
        self, qualified: tuple[str, str], ids: Sequence[int]
    ) -> dict[int, dict[int, bytes]]:
        sql = psycopg2.sql.SQL(
            "SELECT chunk_id, chunk_seq, chunk_data FROM {} "
            "WHERE chunk_id = ANY(%(ids)s::oid[]) ORDER BY chunk_id, chunk_seq"
        ).format(psycopg2.sql.Identifier(*qualified))
        chunks: dict[int, dict[int, bytes]] = {}
        for chunk_id, seq, data in self._query(sql, {"ids": list(ids)}):
            chunks.setdefault(int(chunk_id), {})[int(seq)] = bytes(data)
        return chunks

    def _mode(self) -> str:
        if self._raw_mode is None:
            self._raw_mode = str(self._query(_RAW_MODE_SQL, {})[0][0])
        return self._raw_mode

    def _read_raw(self, relid: int, ids: Sequence[int]) -> dict[int, dict[int, bytes]]:
        if self._mode() == "reader":
            rows = self._query(_READER_SQL, {"oid": relid, "ids": list(ids)})
        else:
            heads = [psycopg2.Binary(_OID.pack(i)) for i in ids]
            rows = self._query(_RAW_SQL, {"oid": relid, "heads": heads})
        chunks: dict[int, dict[int, bytes]] = {}
        for (t_data,) in rows:
            body = bytes(t_data)
            chunk_id, seq = _CHUNK_HEAD.unpack_from(body, 0)
            value, _ = read_varlena(body, _CHUNK_HEAD.size)  # chunk_data: plain storage
            assert isinstance(value, bytes)
            chunks.setdefault(chunk_id, {})[seq] = value
        return chunks


def _assemble(seqs: dict[int, bytes]) -> bytes | None:
    """The chunks joined in chunk_seq order, or None unless they are exactly 0..n-1."""
    if sorted(seqs) != list(range(len(seqs))):
        return None
    return b"".join(seqs[i] for i in range(len(seqs)))
