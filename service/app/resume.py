"""Where a resumed worker's WAL comes from: the slot, or the archive then the slot.

Receives: the settings and the stored offsets' restart and confirmed LSNs (a worker
resuming, `service.app.worker`).
Hands on: `(stream_from, bridge)`: the LSN the replication stream starts at, and an
`ArchiveBridge` for the WAL before it (None when the slot covers the offsets).

Without `source.archive`: the slot must still cover the stored restart LSN
(`check_covers`, issue 11 defect 4): else `SlotGapError`, fatal.

With it (issue 31 part 3):
- A missing slot is created, an invalidated one dropped and created again, reserving
  WAL from the server's last checkpoint redo point (pg_create_physical_replication_slot
  with immediately_reserve, as ReplicationSlotReserveWal for a physical slot). That is
  the earliest WAL the server can promise; nothing earlier is asked of it. After a
  failover this is the new primary's first slot for pgcdc.
- `bridge_range` gives the gap: the archive supplies the stored restart LSN's page up to
  the start of the segment holding the slot's restart LSN, the stream the rest. The
  archive's history is checked against the server's, and a directory is checked for
  every segment, before anything is published (`ArchiveBridge`).
- A slot that was missing means pgcdc streamed from another server: offsets confirmed
  past the end of the timeline their restart LSN lies on came from WAL this server's
  history abandoned (`TimelineDivergedError`, fatal). The offsets record no timeline,
  so a restart LSN itself past the switch point cannot be told from one on the new
  timeline; the restart LSN lags to a checkpoint redo point, so that takes a checkpoint
  between the switch point and the last offsets.
- Nothing is snapshotted again: the stored offsets and schema history are resumed
  as they are; the bridge only supplies bytes.
"""

from __future__ import annotations

import structlog

from connectors.postgres.server import connect
from connectors.postgres.slots import check_covers, drop_slot, ensure_physical_slot, slot_state
from connectors.postgres.stream import source_timeline
from connectors.postgres.walarchive import ArchiveBridge, open_archive
from service.config import Settings
from service.errors import SourceSetupError, TimelineDivergedError
from service.lsn import format_lsn
from service.wal.bridge import bridge_range
from service.wal.format import DEFAULT_SEGMENT_SIZE
from service.wal.timeline import TimelineHistory

log = structlog.get_logger(__name__)


def resume_source(
    s: Settings, restart_lsn: int, confirmed_lsn: int
) -> tuple[int, ArchiveBridge | None]:
    """`(stream_from, bridge)` for resuming from the stored offsets (module docstring)."""
    slot = s.source.slot
    conn = connect(s.source.dsn())
    try:
        with conn.cursor() as cur:
            if s.source.archive is None:
                check_covers(cur, slot, restart_lsn)
                return restart_lsn, None
            state = slot_state(cur, slot)
            invalidated = (
                state is not None and state.slot_type == "physical" and state.restart_lsn is None
            )
            if invalidated:
                drop_slot(cur, slot)
            created, slot_restart = ensure_physical_slot(cur, slot)
            cur.execute(
                "SELECT setting::bigint FROM pg_catalog.pg_settings WHERE name = 'wal_segment_size'"
            )
            row = cur.fetchone()
    finally:
        conn.close()
    if slot_restart is None:
        raise SourceSetupError(f"physical slot {slot} reserves no WAL", field="source.slot")
    if created:
        log.warning(
            "slot_created_for_resume",
            slot=slot,
            restart_lsn=format_lsn(slot_restart),
            stored_restart_lsn=format_lsn(restart_lsn),
            was="invalidated" if invalidated else "missing",
        )
    segment_size = int(row[0]) if row is not None else DEFAULT_SEGMENT_SIZE
    system_id, history = source_timeline(s.source.dsn())
    if created:
        _check_not_abandoned(slot, history, restart_lsn, confirmed_lsn)
    gap = bridge_range(restart_lsn, slot_restart, segment_size)
    if gap is None:
        return restart_lsn, None
    what = "was missing and is created with" if created else "has"
    bridge = ArchiveBridge(
        open_archive(s.source.archive, s.decoding.state_dir),
        history,
        system_id,
        gap[0],
        gap[1],
        segment_size,
        f"replication slot {slot} {what} restart_lsn {format_lsn(slot_restart)}, past the "
        f"stored offsets' restart LSN {format_lsn(restart_lsn)}: the server has WAL for "
        f"pgcdc from {format_lsn(gap[1])} on",
    )
    bridge.check_history()
    bridge.check_present()
    log.info(
        "worker_bridging_gap",
        archive=bridge.archive.describe(),
        from_lsn=format_lsn(gap[0]),
        stream_lsn=format_lsn(gap[1]),
        slot_restart_lsn=format_lsn(slot_restart),
        segments=len(bridge.plan),
    )
    return gap[1], bridge


def _check_not_abandoned(
    slot: str, history: TimelineHistory, restart_lsn: int, confirmed_lsn: int
) -> None:
    """Offsets confirmed past the end of their restart LSN's timeline, with the slot
    missing here: decoded from WAL this server never got (module docstring)."""
    entry = history.entry(history.tli_of(restart_lsn))
    if entry is not None and entry.end is not None and confirmed_lsn > entry.end:
        raise TimelineDivergedError(
            f"Kafka holds transactions decoded up to {format_lsn(confirmed_lsn)}, but this "
            f"server's timeline {entry.tli} ended at {format_lsn(entry.end)} ({history!r}) "
            f"and it had no slot {slot}: they came from WAL this server never got. "
            "Reconcile the topics, then start over deliberately (`pgcdc run --fresh-start`)",
            lsn=entry.end,
        )
