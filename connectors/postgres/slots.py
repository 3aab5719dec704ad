"""The physical replication slot: every statement pgcdc runs about it, in one place.

pgcdc uses one physical slot per pipeline (`source.slot`): it pins the WAL the worker
still needs, and the walsender moves its `restart_lsn` up to the flush position the
stream reports. Slots are looked at and changed two ways:

- by SQL on a plain connection (`pg_replication_slots`, `pg_create_physical_replication_slot`,
  `pg_replication_slot_advance`, `pg_drop_replication_slot`): setup, teardown, status,
  peek's private slot, the worker's start position and its final feedback;
- by replication commands on the replication connection (`READ_REPLICATION_SLOT`,
  `CREATE_REPLICATION_SLOT … PHYSICAL RESERVE_WAL`, and `IDENTIFY_SYSTEM` and
  `TIMELINE_HISTORY` for the timeline the stream follows): the stream.

A slot that exists with another type is a `SourceSetupError` naming `slot_name`. A
worker resuming from stored offsets first checks that the slot still covers their
restart LSN (`check_covers`): the slot's restart_lsn only ever moves up to a restart LSN
already committed to Kafka, so one past it means the slot was moved, dropped and
recreated, or invalidated while no worker ran, and WAL in between may be gone.
Functions take an open cursor (or a DSN where they must wait for the walsender) and
return plain values; they never retry, except that `drop_slot_once_released` and
`advance_when_released` wait (bounded) for a walsender to let go of the slot.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.errors
import structlog

from connectors.postgres.classify import NEW_SNAPSHOT_REMEDY
from connectors.postgres.server import connect
from service.errors import SlotGapError, SlotTypeError, SourceSetupError
from service.lsn import format_lsn, parse_lsn
from service.wal.timeline import TimelineHistory

log = structlog.get_logger(__name__)


@dataclass(slots=True, frozen=True)
class SlotState:
    """One row of `pg_replication_slots`, with the WAL it retains behind the server."""

    slot_type: str
    active: bool
    restart_lsn: int | None  # None: the slot reserves no WAL yet
    wal_status: str | None
    retained_bytes: int
    active_pid: int | None = None  # the walsender holding the slot, while active


def slot_state(cur: Any, name: str) -> SlotState | None:
    """The slot's row, or None when there is no such slot."""
    cur.execute(
        "SELECT slot_type, active, restart_lsn::text, wal_status,"
        " pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), restart_lsn),"
        " active_pid FROM pg_catalog.pg_replication_slots WHERE slot_name = %s",
        (name,),
    )
    row = cur.fetchone()
    if row is None:
        return None
    slot_type, active, restart, wal_status, retained, pid = row
    return SlotState(
        str(slot_type),
        bool(active),
        parse_lsn(restart) if restart else None,
        wal_status,
        int(retained or 0),
        int(pid) if pid is not None else None,
    )


def ensure_physical_slot(cur: Any, name: str) -> tuple[bool, int | None]:
    """(created, restart_lsn): the physical slot `name`, created reserving WAL if absent."""
    state = slot_state(cur, name)
    if state is not None:
        if state.slot_type != "physical":
            raise SlotTypeError(
                f"replication slot {name} is a {state.slot_type} slot; pgcdc streams over a "
                f"physical slot: drop it (SELECT pg_drop_replication_slot('{name}')) or set "
                "source.slot to another name",
                field="source.slot",
            )
        return False, state.restart_lsn
    try:
        cur.execute(
            "SELECT (pg_catalog.pg_create_physical_replication_slot(%s, true)).lsn::text",
            (name,),
        )
    except psycopg2.Error as exc:
        raise SourceSetupError(f"cannot create physical replication slot {name!r}: {exc}") from exc
    (lsn,) = cur.fetchone() or (None,)
    return True, parse_lsn(lsn) if lsn else None


def check_covers(cur: Any, name: str, stored_restart: int) -> None:
    """Raise `SlotGapError` unless slot `name` exists with restart_lsn <= `stored_restart`
    (the restart LSN of the offsets being resumed from), naming both LSNs."""
    state = slot_state(cur, name)
    stored = format_lsn(stored_restart)
    if state is None:
        problem = f"replication slot {name} does not exist"
    elif state.restart_lsn is None:
        problem = (
            f"replication slot {name} retains no WAL (wal_status {state.wal_status}: "
            "invalidated, e.g. by max_slot_wal_keep_size)"
        )
    elif state.restart_lsn > stored_restart:
        problem = (
            f"replication slot {name} has restart_lsn {format_lsn(state.restart_lsn)}, "
            f"past the stored offsets' restart LSN {stored}"
        )
    else:
        return
    raise SlotGapError(
        f"{problem}, but the stored offsets resume from restart LSN {stored}: the WAL in "
        "between was not kept for pgcdc, so resuming could skip committed transactions. "
        + NEW_SNAPSHOT_REMEDY,
        lsn=stored_restart,
    )


def drop_slot(cur: Any, name: str) -> None:
    """Drop the slot if it exists; one that a walsender holds is a `SourceSetupError`."""
    state = slot_state(cur, name)
    if state is None:
        return
    if state.active:
        raise SourceSetupError(
            f"replication slot {name!r} is in use: stop pgcdc first", field="slot_name"
        )
    cur.execute("SELECT pg_catalog.pg_drop_replication_slot(%s)", (name,))


def drop_slot_once_released(cur: Any, name: str, timeout_s: float = 5.0) -> bool:
    """Drop the slot as soon as no walsender holds it: True once it is gone (or was
    absent), False if one still held it after `timeout_s`.

    For the caller's own replication connection, just closed: its walsender notices the
    close and releases the slot on its way out (ReplicationSlotRelease at exit), so for
    a moment the slot is still active and pg_drop_replication_slot refuses it (SQLSTATE
    55006, "is active for PID").
    """
    deadline = time.monotonic() + timeout_s
    while True:
        state = slot_state(cur, name)
        if state is None:
            return True
        if not state.active:
            try:
                cur.execute("SELECT pg_catalog.pg_drop_replication_slot(%s)", (name,))
                return True
            except psycopg2.errors.ObjectInUse:
                # Acquired again between the look and the drop: wait like for any holder.
                log.info("slot_drop_raced", slot=name)
            except psycopg2.errors.UndefinedObject:
                return True  # dropped meanwhile by someone else
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def advance_when_released(dsn: str, name: str, target: int, timeout_s: float = 5.0) -> str:
    """Move the slot's restart_lsn forward to `target` once no walsender holds it.

    As the walsender's PhysicalConfirmReceivedLocation, it only moves forward
    (`pg_replication_slot_advance`). Returns what happened: "advanced", "already" (the
    slot is gone or at/after `target`) or "active" (still held after `timeout_s`).
    """
    conn = connect(dsn)
    try:
        with conn.cursor() as cur:
            deadline = time.monotonic() + timeout_s
            while True:
                state = slot_state(cur, name)
                if state is None or state.restart_lsn is None or state.restart_lsn >= target:
                    return "already"
                if not state.active:
                    cur.execute(
                        "SELECT pg_catalog.pg_replication_slot_advance(%s, %s::pg_lsn)",
                        (name, format_lsn(target)),
                    )
                    return "advanced"
                if time.monotonic() > deadline:
                    return "active"
                time.sleep(0.05)
    finally:
        conn.close()


# --- on the replication connection ------------------------------------------------------


def read_replication_slot(cur: Any, name: str) -> int | None:
    """`READ_REPLICATION_SLOT` (PG15+): the physical slot's restart_lsn, None if absent."""
    cur.execute(f"READ_REPLICATION_SLOT {name}")
    row = cur.fetchone()
    if row is None or row[0] is None:
        return None
    if row[0] != "physical":
        raise SlotTypeError(f"replication slot {name} is not physical", field="source.slot")
    return parse_lsn(row[1]) if row[1] is not None else None


def create_replication_slot(cur: Any, name: str) -> None:
    """`CREATE_REPLICATION_SLOT name PHYSICAL RESERVE_WAL`; one created concurrently by
    another worker is reused."""
    try:
        cur.execute(f"CREATE_REPLICATION_SLOT {name} PHYSICAL RESERVE_WAL")
        cur.fetchall()
    except psycopg2.errors.DuplicateObject:
        return


def identify_system(cur: Any) -> tuple[str, int, int]:
    """`IDENTIFY_SYSTEM`: (system identifier, the server's timeline, its flush LSN). On a
    standby the timeline is the one it replays."""
    cur.execute("IDENTIFY_SYSTEM")
    row = cur.fetchone()
    return str(row[0]), int(row[1]), parse_lsn(str(row[2]))


def timeline_history(cur: Any, tli: int) -> TimelineHistory:
    """The history of timeline `tli` (`TIMELINE_HISTORY`, as the walreceiver fetches it
    in WalRcvFetchTimeLineHistoryFiles); timeline 1 has none."""
    if tli <= 1:
        return TimelineHistory.single(tli)
    cur.execute(f"TIMELINE_HISTORY {tli}")
    row = cur.fetchone()
    content = row[1]
    # Sent as bytea-typed raw file text: psycopg2 may hand it as bytes or memoryview.
    text = bytes(content).decode() if isinstance(content, bytes | memoryview) else str(content)
    return TimelineHistory.parse(tli, text)
