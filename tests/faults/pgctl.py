"""What the fault tests do to fault-pg15 that services.py has no verb for: a clean or
immediate restart (`pg_ctl restart -m fast|immediate`), a server setting changed with
ALTER SYSTEM and a restart, and a password-checked role.

Only ever pointed at the fault instance (`info` from the `fault_pg15` fixture); kill -9
is services.py's `kill` (tests/fixtures/services.py `kill_service`).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import psycopg2

# pg_hba.conf is read top down: this line, put first, makes pwuser give a password.
_PWUSER_HBA = "host all pwuser 127.0.0.1/32 scram-sha-256\n"


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _assert_fault(info: dict[str, Any]) -> None:
    assert info["service"] == "fault-pg15", f"refusing to touch {info['service']}"


def admin(info: dict[str, Any]) -> Any:
    conn = psycopg2.connect(info["dsn"])
    conn.autocommit = True
    return conn


def restart(info: dict[str, Any], mode: str = "fast") -> None:
    """`pg_ctl restart -m mode` and wait until it accepts connections again."""
    _assert_fault(info)
    log = Path(info["pgdata"]).parent / "postgres.log"
    subprocess.run(
        _as_postgres(
            [
                f"{info['bin']}/pg_ctl",
                "-D",
                info["pgdata"],
                "-l",
                str(log),
                "-m",
                mode,
                "-w",
                "-t",
                "60",
                "restart",
            ]
        ),
        capture_output=True,
        check=True,
    )


def set_and_restart(info: dict[str, Any], setting: str, value: str | None) -> None:
    """ALTER SYSTEM SET setting = value (RESET when None), then a fast restart."""
    _assert_fault(info)
    conn = admin(info)
    with conn.cursor() as cur:
        if value is None:
            cur.execute(f"ALTER SYSTEM RESET {setting}")
        else:
            cur.execute(f"ALTER SYSTEM SET {setting} = %s", (value,))
    conn.close()
    restart(info)


def set_and_reload(info: dict[str, Any], setting: str, value: str | None) -> None:
    """ALTER SYSTEM SET setting = value (RESET when None), then pg_reload_conf()."""
    _assert_fault(info)
    conn = admin(info)
    with conn.cursor() as cur:
        if value is None:
            cur.execute(f"ALTER SYSTEM RESET {setting}")
        else:
            cur.execute(f"ALTER SYSTEM SET {setting} = %s", (value,))
        cur.execute("SELECT pg_reload_conf()")
    conn.close()


def ensure_password_role(info: dict[str, Any]) -> None:
    """Role pwuser (superuser, replication) that must log in with password `right`."""
    _assert_fault(info)
    hba = Path(info["pgdata"]) / "pg_hba.conf"
    text = subprocess.run(
        _as_postgres(["cat", str(hba)]), capture_output=True, text=True, check=True
    ).stdout
    conn = admin(info)
    with conn.cursor() as cur:
        cur.execute(
            "DO $$ BEGIN CREATE ROLE pwuser LOGIN SUPERUSER REPLICATION PASSWORD 'right'; "
            "EXCEPTION WHEN duplicate_object THEN NULL; END $$"
        )
        if _PWUSER_HBA not in text:
            subprocess.run(
                _as_postgres(["tee", str(hba)]),
                input=_PWUSER_HBA + _PWUSER_HBA.replace("all pwuser", "replication pwuser") + text,
                capture_output=True,
                text=True,
                check=True,
            )
            cur.execute("SELECT pg_reload_conf()")
    conn.close()
