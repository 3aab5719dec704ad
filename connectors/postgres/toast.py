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
2. For the ids step 1 did not see, when the `pageinspect` extension is installed in the
   database and usable by the role: the TOAST relation's pages, read raw
   (`heap_page_items(get_raw_page(...))`), every tuple still stored whether or not a
   snapshot sees it. This is what finds a value a later transaction deleted or replaced
   (its chunks then have an xmax, invisible to step 1) but that VACUUM has not removed,
   which the slot's xmin hold (connectors.postgres.stream) prevents. Chunk ids are
   unique among the stored tuples of a TOAST relation (GetNewOidWithIndex checks with
   SnapshotAny), so every stored chunk of that id belongs to the value.
A value whose chunk_seq run is not 0..n-1 is not handed back (a warning
`toast_chunks_incomplete` names it): without the xmin hold, pruning
(heap_page_prune_opt, on any read of the page, this reader's own included) and VACUUM
remove dead chunks page by page, so part of a value can be gone. A
missing privilege on the TOAST table is a warning `toast_fill_denied`: the values of
that batch stay placeholders (counted by the caller), the worker goes on.

`next_full_xid()` is the server's next FullTransactionId (`pg_current_snapshot()`'s
xmax): the hot-standby feedback needs the epoch of the xmin it holds.
Connection errors surface as `SourceUnavailableError` (retry).
"""

from __future__ import annotations

import struct
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

_PAGEINSPECT_SQL = "SELECT true FROM pg_catalog.pg_extension WHERE extname = 'pageinspect'"

_RAW_SQL = """
SELECT i.t_data
FROM generate_series(0, (pg_catalog.pg_relation_size(%(oid)s::oid::regclass)
                         / pg_catalog.current_setting('block_size')::int)::int - 1) AS b,
     LATERAL heap_page_items(get_raw_page(%(oid)s::oid::regclass::text, b)) AS i
WHERE i.lp_flags = 1 AND i.t_data IS NOT NULL
  AND substring(i.t_data FROM 1 FOR 4) = ANY(%(heads)s::bytea[])
"""

_NEXT_XID_SQL = "SELECT pg_catalog.txid_snapshot_xmax(pg_catalog.txid_current_snapshot())"


class SqlToastSource:
    """`ToastSource` on a SQL connection of the source database (module docstring)."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: psycopg2.extensions.connection | None = None
        self._pageinspect: bool | None = None  # asked once per connection
        self.queries = 0
        self.raw_reads = 0  # values found only in the raw pages (deleted, not vacuumed)

    def _connection(self) -> psycopg2.extensions.connection:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self._dsn, "pgcdc-toast")
            self._pageinspect = None
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

    def next_full_xid(self) -> int:
        """The server's next FullTransactionId (64 bits: epoch << 32 | xid)."""
        return int(self._query(_NEXT_XID_SQL, {})[0][0])

    def fetch(self, wanted: Mapping[int, Sequence[int]], lsn: int) -> dict[tuple[int, int], bytes]:
        """See `service.output.toastfill.ToastSource.fetch`."""
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
                if missing and self._has_pageinspect():
                    raw = self._read_raw(relid, missing)
                    self.raw_reads += len(raw)
                    chunks.update(raw)
            except psycopg2.errors.InsufficientPrivilege as exc:
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

    def _has_pageinspect(self) -> bool:
        if self._pageinspect is None:
            self._pageinspect = bool(self._query(_PAGEINSPECT_SQL, {}))
        return self._pageinspect

    def _read_raw(self, relid: int, ids: Sequence[int]) -> dict[int, dict[int, bytes]]:
        heads = [psycopg2.Binary(_OID.pack(i)) for i in ids]
        chunks: dict[int, dict[int, bytes]] = {}
        for (t_data,) in self._query(_RAW_SQL, {"oid": relid, "heads": heads}):
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
