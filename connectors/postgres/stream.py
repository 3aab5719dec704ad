"""WAL source: PostgreSQL's physical replication protocol over a physical slot.

Receives: a DSN, a slot name, optionally a start LSN; and, while running, the
pipeline's restart LSN through `confirm(lsn)` (or the `restart_lsn` attribute).
Hands on: `(start_lsn, bytes)` chunks of raw WAL exactly as the walsender sends them
(`msg.data_start`, payload up to 128 KB, page headers included, possibly ending
mid-record), contiguous, ready for `XLogReader.feed`.

Behaviour:
- The slot is created with `CREATE_REPLICATION_SLOT name PHYSICAL RESERVE_WAL` if it
  does not exist. A new physical slot's restart_lsn is the last checkpoint's redo
  pointer, so WAL from there on is retained. Without an explicit start LSN streaming
  begins at the slot's restart_lsn (`READ_REPLICATION_SLOT`, PG15+).
- `START_REPLICATION SLOT name PHYSICAL lsn TIMELINE tli` is sent with the start LSN
  rounded down to its WAL page, so the first chunk carries that page's header and the
  reader can validate it; the reader skips to the record start itself.
- Timelines, as the walreceiver follows them (WalReceiverMain, WalRcvFetchTimeLineHistoryFiles):
  every connection first sends `IDENTIFY_SYSTEM` (the server's timeline; its system
  identifier must stay the one seen first, else `SourceSetupError`) and, past timeline
  1, `TIMELINE_HISTORY` for it. Streaming asks for the timeline the history assigns to
  the start LSN (`TimelineHistory.tli_of`). A historic timeline is streamed up to its
  switch point, where the walsender ends it; the stream then reconnects at once and
  goes on, from exactly the switch point, on the next timeline. A source promoted
  while streaming (a standby, or the upstream of a cascading one) ends the copy the
  same way or drops the connection; the reconnect finds the new history. The timeline
  streamed so far must be in the new history (else `TimelineHistoryError`); when bytes
  past its switch point were already handed on (the tail of a record the promoted
  server never replayed) the stream cannot take them back: it raises
  `TimelineSwitchReplay`, and the worker replays from its stored offsets. Every page
  header handed on carries the timeline the history assigns to its page
  (`service.wal.timeline.TimelineGate`, `UnexpectedTimelineError` otherwise).
- Standby status feedback reports write = bytes received and flush = apply = the
  restart LSN handed back by the pipeline, never more: the walsender moves the
  slot's restart_lsn to the flush position (PhysicalConfirmReceivedLocation, which
  moves it backwards too). Never less than the slot's restart_lsn when the connection
  started, either: a stream started below it (the archive bridge starts at the first
  byte of the slot's segment) must not drag the slot back into WAL the server may
  already have removed. Feedback is sent every
  `status_interval` seconds and whenever a keepalive asks for a reply.
- Hot-standby feedback (XLogWalRcvSendHSFeedback's message, read by the walsender's
  ProcessStandbyHSFeedbackMessage): when `hold_xmin` is set, every status update is
  followed by an `h` message with the `(xmin, epoch)` it returns, which becomes the
  physical slot's xmin (PhysicalReplicationSlotNewXmin: VACUUM keeps what that xmin
  may still see; the unchanged-TOAST fill needs it). `hold_xmin` returning None sends
  xmin 0, which clears the slot's xmin; so does `close()` once a hold was sent. The
  slot's xmin only moves forward (or is cleared): the walsender ignores an older one.
  psycopg2 has no call for this message, so it goes out with libpq's PQputCopyData on
  psycopg2's own connection (`pgconn_ptr`), as psycopg2 sends its status updates.
- `on_idle`, when set, is called whenever every byte received so far has been handed
  on (the walsender has sent nothing more yet), before waiting for more: the Kafka
  sink commits then (adaptive batching: low latency at low load).
- `caught_up()` is true when the bytes received reach the end of WAL the walsender
  reported with its last message (the `walEnd` of XLogData and keepalive messages: its
  flush position when it sent data, what it had sent when it sent a keepalive). Idle
  is not enough: while catching up, the walsender may pause between reads of old WAL.
- A lost connection is re-established with exponential backoff and streaming resumes
  at the end of the bytes already delivered (the slot retains everything from the
  restart LSN, which is never past that point), so the chunks stay contiguous. Once the
  connection has stayed lost for `retry_budget_s` (source.retry_budget_s),
  `SourceUnavailableError` is raised (`service.backoff`: never before that).
- Receive timeout, as the walreceiver's wal_receiver_timeout (WalReceiverMain): when
  nothing at all (WAL or keepalive) has come for half of `receive_timeout` the status
  update asks the walsender for a reply; when nothing has come for the whole of it the
  connection counts as lost and is re-established as above. A silently stalled
  network therefore costs at most `receive_timeout`, never a wedged worker.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import select
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg2
import psycopg2.errors
import psycopg2.extras
import structlog

from connectors.postgres.classify import is_slot_busy, permanent_error
from connectors.postgres.slots import (
    create_replication_slot,
    identify_system,
    read_replication_slot,
    timeline_history,
)
from service.backoff import Backoff
from service.errors import (
    SlotBusyError,
    SourceSetupError,
    SourceUnavailableError,
    TimelineHistoryError,
    TimelineSwitchReplay,
)
from service.lsn import format_lsn
from service.wal.format import XLOG_BLCKSZ
from service.wal.timeline import TimelineGate, TimelineHistory

log = structlog.get_logger(__name__)


KEEPALIVE_INTERVAL_S = 10.0  # well inside the default wal_sender_timeout of 60 s

# 'h', sendTime (µs since 2000-01-01), xmin, xmin epoch, catalog_xmin, its epoch; network
# byte order (XLogWalRcvSendHSFeedback).
_HS_FEEDBACK = struct.Struct("!cqIIII")
_PG_EPOCH_UNIX_S = 946_684_800


@functools.cache
def _libpq() -> ctypes.CDLL:
    """The libpq psycopg2 itself is linked with (the one loaded in this process)."""
    path = None
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                if "libpq" in line and ".so" in line:
                    path = line.split(None, 5)[-1].strip()
                    break
    except OSError:
        path = None
    lib = ctypes.CDLL(path or ctypes.util.find_library("pq") or "libpq.so.5")
    lib.PQputCopyData.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int)
    lib.PQputCopyData.restype = ctypes.c_int
    lib.PQflush.argtypes = (ctypes.c_void_p,)
    lib.PQflush.restype = ctypes.c_int
    return lib


def send_hs_feedback(conn: Any, xmin: int, epoch: int) -> None:
    """Send one hot-standby feedback message on a streaming replication connection."""
    now_us = int((time.time() - _PG_EPOCH_UNIX_S) * 1_000_000)
    msg = _HS_FEEDBACK.pack(b"h", now_us, xmin, epoch if xmin else 0, 0, 0)
    lib = _libpq()
    pgconn = ctypes.c_void_p(conn.pgconn_ptr)
    if lib.PQputCopyData(pgconn, msg, len(msg)) != 1 or lib.PQflush(pgconn) != 0:
        raise psycopg2.OperationalError("could not send hot-standby feedback")


def source_timeline(dsn: str) -> tuple[str, TimelineHistory]:
    """The server's system identifier and the history of its current timeline, over
    a replication connection (IDENTIFY_SYSTEM, TIMELINE_HISTORY), as `_start` reads them."""
    conn = psycopg2.connect(dsn, connection_factory=psycopg2.extras.PhysicalReplicationConnection)
    try:
        cur = conn.cursor()
        system_id, tli, _ = identify_system(cur)
        return system_id, timeline_history(cur, tli)
    finally:
        conn.close()


class _EndOfTimeline(Exception):
    """Internal: every byte of a historic timeline up to its switch point was received."""


class PhysicalStream:
    """Streams raw WAL from a physical replication slot (see the module docstring)."""

    def __init__(
        self,
        dsn: str,
        slot_name: str,
        *,
        start_lsn: int | None = None,
        create_slot: bool = True,
        status_interval: float = 10.0,
        retry_budget_s: float = 300.0,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        busy_grace_s: float = 60.0,
        receive_timeout: float = 60.0,
    ) -> None:
        self._dsn = dsn
        self._sslmode = psycopg2.extensions.parse_dsn(dsn).get("sslmode")  # for permanent_error
        self.slot_name = slot_name
        self._start_lsn = start_lsn
        self._create_slot = create_slot
        self._status_interval = status_interval
        self._retry_budget_s = retry_budget_s
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._busy_grace_s = busy_grace_s
        self._receive_timeout = receive_timeout
        self.restart_lsn: int = 0  # flush position reported to the server
        self.received_lsn: int | None = None  # end of the bytes delivered so far
        self.server_version: int | None = None
        self._conn: Any = None
        self._cur: Any = None  # the replication cursor while streaming
        self.reconnects = 0  # connections lost and re-established (metrics, tests)
        self._last_data_start = 0  # data_start of the last WAL message received
        # The slot's restart_lsn when this connection started: feedback never goes below.
        self._slot_floor = 0
        self._last_keepalive = 0.0
        # The source's system identifier, from the first IDENTIFY_SYSTEM.
        self.system_id: str | None = None
        # The timeline of the bytes received so far (None before streaming), the
        # history it was chosen from, and its switch point when that timeline is
        # historic (streaming stops there and goes on with the next one).
        self.timeline: int | None = None
        self.history: TimelineHistory | None = None
        self._switch_at: int | None = None
        self._gate: TimelineGate | None = None
        self.timeline_switches = 0  # timelines followed since the start (tests, logs)
        # Called when nothing more is buffered (see the module docstring); exceptions
        # from it end the iteration of `chunks`, as the consumer's own would.
        self.on_idle: Callable[[], object] | None = None
        # The (xmin, epoch) the slot is to hold, asked at every status update; None
        # there: no hold (see the module docstring). Unset: no feedback message at all.
        self.hold_xmin: Callable[[], tuple[int, int] | None] | None = None
        self.held_xmin: int | None = None  # the xmin last sent (None: none or cleared)

    def caught_up(self) -> bool:
        """Every byte of WAL the server reported having has been received (see the
        module docstring); False before streaming started."""
        cur = self._cur
        if cur is None or self.received_lsn is None:
            return False
        return self.received_lsn >= int(cur.wal_end)

    def confirm(self, restart_lsn: int) -> None:
        """The pipeline no longer needs WAL before `restart_lsn` (never moves back)."""
        self.restart_lsn = max(self.restart_lsn, restart_lsn)

    def close(self) -> None:
        """Report the confirmed position one last time, then close the connection."""
        if self._cur is not None:
            try:
                self._feedback(self._cur)
                if self.held_xmin is not None:  # no hold outlives the connection
                    send_hs_feedback(self._conn, 0, 0)
                    self.held_xmin = None
            except (psycopg2.DatabaseError, psycopg2.InterfaceError) as exc:
                log.warning("replication_final_feedback_failed", error=str(exc).strip())
        self._cur = None
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    # --- connection ----------------------------------------------------------------

    def _connect(self) -> Any:
        conn = psycopg2.connect(
            self._dsn, connection_factory=psycopg2.extras.PhysicalReplicationConnection
        )
        self._conn = conn
        self.server_version = conn.server_version // 10000
        return conn

    def _ensure_slot(self, cur: Any) -> int:
        restart = read_replication_slot(cur, self.slot_name)
        if restart is None:
            if not self._create_slot:
                raise SourceSetupError(f"physical replication slot {self.slot_name} is missing")
            create_replication_slot(cur, self.slot_name)
            restart = read_replication_slot(cur, self.slot_name)
            if restart is None:
                raise SourceSetupError(f"slot {self.slot_name} has no restart_lsn")
        return restart

    def _start(self) -> tuple[Any, int]:
        conn = self._connect()
        cur = conn.cursor()
        system_id, server_tli, _ = identify_system(cur)
        if self.system_id is not None and system_id != self.system_id:
            raise SourceSetupError(
                f"the source is now database system {system_id}, not {self.system_id} "
                "streamed so far: a different cluster answers at this address",
                lsn=self.received_lsn,
                field="source.host",
            )
        self.system_id = system_id
        history = timeline_history(cur, server_tli)
        slot_restart = self._ensure_slot(cur)
        self._slot_floor = slot_restart
        if self.received_lsn is not None:
            start = self.received_lsn
        else:
            start = self._start_lsn if self._start_lsn is not None else slot_restart
            start &= ~(XLOG_BLCKSZ - 1)
            self.restart_lsn = max(self.restart_lsn, min(slot_restart, start))
        tli = self._follow(history, start)
        cur.start_replication(
            slot_name=self.slot_name,
            slot_type=psycopg2.extras.REPLICATION_PHYSICAL,
            start_lsn=format_lsn(start),
            timeline=tli,
        )
        return cur, start

    def _follow(self, history: TimelineHistory, start: int) -> int:
        """Choose the timeline to stream `start` from, checking the new history against
        the timeline streamed so far (see the module docstring)."""
        previous = self.timeline
        if previous is not None:
            entry = history.entry(previous)
            if entry is None:
                raise TimelineHistoryError(
                    f"timeline {previous}, streamed up to {format_lsn(start)}, is not in "
                    f"the source's timeline history {history!r}",
                    lsn=start,
                )
            if entry.end is not None and start > entry.end:
                raise TimelineSwitchReplay(
                    f"the source left timeline {previous} at {format_lsn(entry.end)}, but "
                    f"WAL of that timeline up to {format_lsn(start)} was received; what "
                    "lies past the switch point is abandoned: replaying from the offsets",
                    lsn=entry.end,
                )
        tli = history.tli_of(start)
        switch = history.switch_point(tli)
        self._switch_at = switch[0] if switch is not None else None
        if previous is not None and tli != previous:
            self.timeline_switches += 1
            log.info(
                "replication_timeline_switch",
                from_tli=previous,
                to_tli=tli,
                switch_lsn=format_lsn(start),
            )
        self.timeline, self.history = tli, history
        if self._gate is None:
            self._gate = TimelineGate(history)
        else:
            self._gate.history = history
        return tli

    # --- streaming -----------------------------------------------------------------

    def chunks(
        self, stop: threading.Event | None = None, *, idle_timeout: float | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """Yield raw WAL chunks until `stop` is set or nothing arrives for
        `idle_timeout` seconds (None: forever)."""
        wait = time.sleep if stop is None else stop.wait
        # Since the connection was last lost, or last found the slot busy (set at the
        # first failure, cleared once streaming starts again): each is retried with its
        # own budget, the outage for retry_budget_s, the busy slot for busy_grace_s.
        outage: Backoff | None = None
        busy: Backoff | None = None
        while stop is None or not stop.is_set():
            try:
                cur, _ = self._start()
                outage = busy = None
                yield from self._pump(cur, stop, idle_timeout)
                return
            except _EndOfTimeline:
                # As the walreceiver at the end of a historic timeline: go on at once
                # with the next one, from its switch point.
                log.info(
                    "replication_timeline_end",
                    tli=self.timeline,
                    switch_lsn=format_lsn(self.received_lsn or 0),
                )
                self.close()
                continue
            except (psycopg2.DatabaseError, psycopg2.InterfaceError) as exc:
                # A walsender that timed out or was terminated surfaces as a plain
                # DatabaseError on the replication cursor: reconnect as for any loss.
                log.warning(
                    "replication_reconnect",
                    error=str(exc).strip(),
                    received_lsn=format_lsn(self.received_lsn or 0),
                )
                self.close()
                self.reconnects += 1
                # Permanent failures stop the worker as fatal instead of being retried
                # into exit 3 (issue 11, defect 6); a busy slot only after a grace period.
                permanent = permanent_error(
                    exc, slot=self.slot_name, lsn=self.received_lsn, sslmode=self._sslmode
                )
                if permanent is not None:
                    raise permanent from exc
                if is_slot_busy(exc):
                    outage = None
                    busy = busy or Backoff(
                        self._busy_grace_s, self._backoff_initial, self._backoff_max
                    )
                    if busy.spent():
                        raise SlotBusyError(
                            f"replication slot {self.slot_name} has been active under another "
                            f"process for more than {self._busy_grace_s:.0f}s ({exc}); "
                            "another worker runs with this slot: stop it, or give this "
                            "one its own source.slot",
                            field="source.slot",
                        ) from exc
                    busy.sleep(wait)
                    continue
                busy = None
                outage = outage or Backoff(
                    self._retry_budget_s, self._backoff_initial, self._backoff_max
                )
                if outage.spent():
                    raise SourceUnavailableError(
                        f"the replication connection stayed lost for "
                        f"{self._retry_budget_s:.0f}s (source.retry_budget_s): {exc}",
                        lsn=self.received_lsn,
                    ) from exc
                outage.sleep(wait)
        self.close()

    def _pump(
        self, cur: Any, stop: threading.Event | None, idle_timeout: float | None
    ) -> Iterator[tuple[int, bytes]]:
        last_data = time.monotonic()
        last_feedback = 0.0
        # When anything (WAL or a keepalive, which read_message swallows) last came
        # from the server: the socket was readable or a message was returned.
        heard = last_data
        asked = False  # a reply was requested since the server was last heard
        self._cur = cur
        if self.hold_xmin is not None:
            # The xmin hold goes out before the first WAL is read: decoding that WAL
            # may already read TOAST values the hold keeps (service.app.toast).
            self._feedback(cur)
            last_feedback = time.monotonic()
        while stop is None or not stop.is_set():
            msg = cur.read_message()  # answers keepalives that request a reply
            now = time.monotonic()
            if msg is not None:
                heard, asked = now, False
            elif now - heard >= self._receive_timeout:
                log.warning(
                    "replication_receive_timeout",
                    silent_s=round(now - heard, 1),
                    received_lsn=format_lsn(self.received_lsn or 0),
                )
                raise psycopg2.OperationalError(
                    f"no message from the walsender for {self._receive_timeout:.0f}s "
                    "(source.receive_timeout_s)"
                )
            elif not asked and now - heard >= self._receive_timeout / 2:
                # As WalReceiverMain's ping: ask the walsender to answer at once.
                self._feedback(cur, reply=True)
                asked = True
            if msg is not None:
                start = msg.data_start
                payload: bytes = msg.payload
                if self.received_lsn is not None and start != self.received_lsn:
                    raise SourceUnavailableError(
                        f"walsender sent {format_lsn(start)}, expected "
                        f"{format_lsn(self.received_lsn)}",
                        lsn=start,
                    )
                if self._gate is not None:
                    self._gate.check(payload, start)
                self.received_lsn = start + len(payload)
                self._last_data_start = start
                last_data = now
                yield start, payload
                if self._switch_at is not None and self.received_lsn >= self._switch_at:
                    raise _EndOfTimeline
            # Regular feedback; when idle, at most once a second so the slot follows.
            since = now - last_feedback
            if since >= self._status_interval or (
                msg is None and since >= min(self._status_interval, 1.0)
            ):
                self._feedback(cur)
                last_feedback = now
            if msg is None:
                if idle_timeout is not None and now - last_data >= idle_timeout:
                    self.close()
                    return
                if self.on_idle is not None:
                    self.on_idle()
                readable, _, _ = select.select([cur], [], [], 0.2)
                if readable:
                    heard, asked = time.monotonic(), False

    def keepalive(self) -> None:
        """Send a status update if none went out lately, from inside a long replay.

        The walsender drops a client it has not heard from for wal_sender_timeout
        (60 s by default); replaying one large transaction can take longer than that
        between two reads. PostgreSQL's own decoding answers the same way from inside
        its output plugins (OutputPluginUpdateProgress → WalSndKeepaliveIfNecessary).
        """
        cur = self._cur
        now = time.monotonic()
        if cur is None or now - self._last_keepalive < KEEPALIVE_INTERVAL_S:
            return
        self._last_keepalive = now
        try:
            # force: psycopg2 skips a status update whose positions did not move.
            self._feedback(cur, force=True)
        except (psycopg2.DatabaseError, psycopg2.InterfaceError) as exc:
            # The next read raises the same and reconnects; nothing is lost here.
            log.warning("replication_keepalive_failed", error=str(exc).strip())

    def _feedback(self, cur: Any, *, force: bool = False, reply: bool = False) -> None:
        self._last_keepalive = time.monotonic()
        flush = self.restart_lsn
        # psycopg2 moves the reported flush position on to a keepalive's wal_end once
        # the last data message counts as confirmed (flush >= its start). For a
        # physical slot that would free WAL an unfinished transaction may still need,
        # so the position reported stays below the last message's start (the slot then
        # keeps at most one message, <= 128 kB, more than strictly needed).
        if self._last_data_start:
            flush = min(flush, self._last_data_start - 1)
        flush = max(flush, self._slot_floor)
        # Always forced: without it psycopg2 only records the values and sends them on
        # its own status interval, so a confirm could miss a stream that stops soon
        # after. The callers throttle (status_interval, KEEPALIVE_INTERVAL_S).
        del force
        cur.send_feedback(
            write_lsn=self.received_lsn or flush,
            flush_lsn=flush,
            apply_lsn=flush,
            reply=reply,
            force=True,
        )
        if self.hold_xmin is not None:
            hold = self.hold_xmin()
            if hold is not None or self.held_xmin is not None:
                xmin, epoch = hold if hold is not None else (0, 0)
                send_hs_feedback(self._conn, xmin, epoch)
                self.held_xmin = xmin or None
