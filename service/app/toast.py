"""The worker's unchanged-TOAST fill, wired (issue 32; settings section `toast`).

Puts together, for one decoding session: the pure fill stage
(`service.output.toastfill`: WAL-value cache, batched lookups) with its edge, the SQL
reader of TOAST tables (`connectors.postgres.toast`), and the xmin hold
(`service.output.xminhold`) with the replication connection's hot-standby feedback
(`PhysicalStream.hold_xmin`).

- `toast.unchanged = fill`: both, as above. `placeholder`: the fill stage runs with no
  source and no cache, only to find and count the placeholders; no hold is sent.
- Every placeholder still published is counted in
  `pgcdc_toast_placeholders_total{slot,table}` and logged as `toast_placeholder`
  (table, LSN, TOAST relation and value id); with `placeholder`, where each one is
  the configured outcome, only the first per table is logged; a release of the hold past
  `toast.max_hold_s` is logged as `toast_hold_released`.
- The hold starts, before any WAL is read, at the slot's own xmin or the database's
  datfrozenxid (`SqlToastSource.start_xmin`), so a VACUUM right after the start cannot
  remove what the first events need; it moves forward with each LSN confirmed in
  Kafka (`confirm`); the hot-standby feedback's epoch comes from the server's next
  full xid, asked again when the held xmin changes. If that question fails the last
  answer is kept (the hold stays), and with no answer yet no hold is sent.
"""

from __future__ import annotations

import time

import structlog

from connectors.postgres.stream import PhysicalStream
from connectors.postgres.toast import SqlToastSource
from service.app.metrics import Metrics
from service.app.session import Session
from service.config import Settings
from service.decode.events import RunningXactsEvent
from service.errors import ConfigError, SourceUnavailableError
from service.lsn import format_lsn
from service.output.toastfill import Placeholder, ToastFill, ToastValueCache
from service.output.xminhold import XminHold, epoch_of

log = structlog.get_logger(__name__)


class ToastWiring:
    """The fill, its reader and its hold for one session (see the module docstring)."""

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        cfg = settings.toast
        self._slot = settings.source.slot
        self._metrics = metrics
        self.enabled = cfg.unchanged == "fill"
        self.source = SqlToastSource(settings.source.dsn()) if self.enabled else None
        self.fill = ToastFill(
            self.source,
            ToastValueCache(int(cfg.cache_bytes) if self.enabled else 0),
            batch_changes=cfg.batch_changes,
            on_placeholder=self._placeholder,
        )
        self.hold = XminHold(cfg.max_hold_s) if self.enabled else None
        self._filled_seen = 0
        self._released_seen = 0
        self._epoch: tuple[int, int] | None = None  # (xmin, its epoch) last worked out
        self._logged_tables: set[str] = set()  # placeholder mode: tables logged once

    def attach(self, session: Session, stream: PhysicalStream) -> None:
        """Hook the fill into the session's sink, the hold into decoding and the stream;
        the hold starts at `SqlToastSource.start_xmin` (sent with the stream's first
        status update, before any WAL is read)."""
        if session.sink.can_stream:
            # The fill waits for whole transactions (PluginSink batches replayed
            # changes); a streamed change would reach the plugin unfilled and uncounted.
            raise ConfigError(
                "toast.unchanged needs a plugin that does not stream in-progress "
                "transactions; this session's plugin streams them",
                field="toast.unchanged",
            )
        session.sink.fill = self.fill
        if self.hold is not None:
            assert self.source is not None
            start = self.source.start_xmin(self._slot)
            self.hold.assume(start, time.monotonic())
            self.source.await_hold(self._slot)
            log.info("toast_hold_start", xmin=start)
            session.decoding.on_running_xacts = self._observe
            stream.hold_xmin = self._hold_xmin

    def _observe(self, ev: RunningXactsEvent) -> None:
        assert self.hold is not None
        self.hold.observe(ev.lsn, ev.oldest_running_xid, time.monotonic())

    def confirm(self, confirmed_lsn: int) -> None:
        """Kafka committed every transaction up to `confirmed_lsn`: the hold may move."""
        if self.hold is not None:
            self.hold.confirm(confirmed_lsn)

    def _hold_xmin(self) -> tuple[int, int] | None:
        hold = self.hold
        assert hold is not None and self.source is not None
        xmin = hold.xmin(time.monotonic())
        if hold.released != self._released_seen:
            self._released_seen = hold.released
            log.warning("toast_hold_released", max_hold_s=hold.max_hold_s)
        if xmin is None:
            return None
        if self._epoch is None or self._epoch[0] != xmin:
            try:
                self._epoch = (xmin, epoch_of(xmin, self.source.next_full_xid()))
            except SourceUnavailableError as exc:
                log.warning("toast_hold_epoch_unavailable", error=str(exc))
                if self._epoch is None:
                    return None
                return self._epoch
        return self._epoch

    def _placeholder(self, p: Placeholder) -> None:
        self._metrics.toast_placeholders.labels(self._slot, p.table).inc()
        if not self.enabled:
            # Configured, not an anomaly: one line per table says so; a line per value
            # cost a third of the worker's busy time on update-heavy TOAST traffic.
            if p.table in self._logged_tables:
                return
            self._logged_tables.add(p.table)
        log.warning(
            "toast_placeholder",
            table=p.table,
            lsn=format_lsn(p.lsn),
            toast_relid=p.toastrelid,
            valueid=p.valueid,
            fill=self.enabled,
        )

    def sync_metrics(self) -> None:
        filled = self.fill.filled
        if filled > self._filled_seen:
            self._metrics.toast_filled.labels(self._slot).inc(filled - self._filled_seen)
            self._filled_seen = filled

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
