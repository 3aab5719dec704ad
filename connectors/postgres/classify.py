"""Which PostgreSQL errors are permanent: the edge that tells "retry" from "stop".

The replication stream and the worker's SQL connections (`connectors.postgres.server`)
reconnect with backoff on a lost connection. Some failures look the same to psycopg2
(an `OperationalError` or a plain `DatabaseError` with the server's text) but can never
get better by retrying;
retrying them hides the problem behind exit 3, which a supervisor retries forever.

`permanent_error(exc, slot=..., lsn=...)` returns the fatal pgcdc error for such a
failure, or None for one worth retrying:

- a TLS failure (`tls_error`): a server certificate the CA in `source.sslrootcert`
  did not sign or that does not name `source.host`, a server that accepts only TLS
  (with sslmode disable, its pg_hba.conf has no line for the unencrypted connection)
  or none at all, a client certificate the server refuses or that is missing, an
  unreadable CA, certificate or key: `TlsError` naming the setting to fix. Checked
  first: a TLS-only server refuses a plaintext connection with a "no pg_hba.conf
  entry" that is not about credentials;
- refused credentials (`password authentication failed`, no pg_hba.conf entry) or a
  role that does not exist: `SourceAuthError`; a database that does not exist:
  `SourceSetupError` naming `source.dbname`; a standby with `hot_standby = off`
  (it accepts no connection): `SourceSetupError` naming `source.host`
  (`refused_error`, which is also what `connect_error` gives for such a connection);
- a slot of the wrong type (a logical slot where pgcdc needs a physical one):
  `SlotTypeError`;
- WAL the slot should have kept is gone (`requested WAL segment … has already been
  removed`): `WalRemovedError`, naming the LSN and the remedy (a new snapshot).

`is_transient(exc)` tells the SQL errors that a plain retry of the same statement
cures: deadlock_detected (40P01), serialization_failure (40001) and
lock_not_available (55P03), e.g. a live catalog query that met a concurrent VACUUM
FULL of a catalog table (`connectors.postgres.server.retry_transient` retries them).

`is_slot_busy(exc)` tells the one failure that is permanent only after a while: the slot
is active under another walsender. The caller retries it for a grace period (a dying
worker's walsender may take a moment to go), then raises `SlotBusyError`.

Matching is on the server's message text (libpq gives psycopg2 no SQLSTATE for
connection failures, and the walsender's errors arrive as plain DatabaseError).
"""

from __future__ import annotations

import re

import psycopg2

from service.errors import (
    PgcdcError,
    SlotTypeError,
    SourceAuthError,
    SourceSetupError,
    SourceUnavailableError,
    TlsError,
    WalRemovedError,
)
from service.lsn import format_lsn

# SQLSTATE 28P01 invalid_password, 28000 invalid_authorization_specification: libpq
# reports them as OperationalError with only the server's text, so the text is matched.
_AUTH_FAILURES = (
    "password authentication failed",
    "no password supplied",
    "authentication failed",
    "no pg_hba.conf entry",
)


def is_auth_failure(exc: BaseException) -> bool:
    """Whether a psycopg2 connection error says the credentials were refused."""
    text = str(exc).lower()
    return isinstance(exc, psycopg2.OperationalError) and any(m in text for m in _AUTH_FAILURES)


# FATAL messages of a server that is up but has no such role (28000) or database
# (3D000, invalid_catalog_name): InitializeSessionUserId, InitPostgres.
_NO_ROLE = re.compile(r'role "([^"]*)" does not exist')
_NO_DATABASE = re.compile(r'database "([^"]*)" does not exist')


# libpq's and the server's texts for TLS failures no retry cures (fe-secure-openssl.c,
# fe-connect.c, hba.c, auth.c), with the setting to fix and what to say about it.
_TLS_FAILURES = (
    (
        "certificate verify failed",
        "source.sslrootcert",
        "the source's certificate is not signed by the CA in source.sslrootcert",
    ),
    (
        "does not match host name",
        "source.host",
        "the source's certificate does not name source.host (sslmode verify-full)",
    ),
    (
        "root certificate file",
        "source.sslrootcert",
        "libpq cannot use the CA file of source.sslrootcert",
    ),
    (
        "server does not support SSL",
        "source.sslmode",
        "the source does not accept TLS, which source.sslmode requires",
    ),
    (
        "requires a valid client certificate",
        "source.sslcert",
        "the source requires a client certificate: set source.sslcert and source.sslkey",
    ),
    (
        "certificate authentication failed",
        "source.sslcert",
        "the source did not accept the client certificate of source.sslcert for "
        "source.user (its CN must name the role)",
    ),
    (
        "alert unknown ca",
        "source.sslcert",
        "the source does not trust the CA that signed the client certificate of source.sslcert",
    ),
    (
        "alert bad certificate",
        "source.sslcert",
        "the source refused the client certificate of source.sslcert",
    ),
    (
        "alert certificate required",
        "source.sslcert",
        "the source requires a client certificate: set source.sslcert and source.sslkey",
    ),
    (
        "private key file",
        "source.sslkey",
        "libpq cannot use the private key of source.sslkey",
    ),
    (
        "could not read certificate file",
        "source.sslcert",
        "libpq cannot use the client certificate of source.sslcert",
    ),
)


def tls_error(exc: BaseException, what: str, *, sslmode: str | None = None) -> TlsError | None:
    """The fatal error for a connection that failed in its TLS for good, else None.

    `sslmode` is the connection's (None: unknown). A "no pg_hba.conf entry ..., no
    encryption" is a TLS matter only when pgcdc did not offer TLS (sslmode disable):
    under the other modes libpq tried TLS first wherever the server offers it, so the
    entry is missing for TLS as well (or the server has no TLS), and it is left to
    `refused_error`'s credentials case."""
    if not isinstance(exc, psycopg2.OperationalError):
        return None
    detail = str(exc).strip()
    lowered = detail.lower()
    if sslmode == "disable" and "no pg_hba.conf entry" in lowered and "no encryption" in lowered:
        return TlsError(
            f"the source accepts this connection only over TLS (its pg_hba.conf has no "
            f"line for it unencrypted) ({what}): {detail}; set source.sslmode to "
            "verify-full (or require)",
            field="source.sslmode",
        )
    for marker, field, explanation in _TLS_FAILURES:
        if marker.lower() in lowered:
            return TlsError(f"{explanation} ({what}): {detail}", field=field)
    return None


def refused_error(
    exc: BaseException, what: str, *, sslmode: str | None = None
) -> PgcdcError | None:
    """The fatal error for a connection the server refused for good (TLS, credentials,
    a role or database that does not exist), else None. `sslmode`: as `tls_error`."""
    detail = str(exc).strip()
    tls = tls_error(exc, what, sslmode=sslmode)
    if tls is not None:
        return tls
    if is_auth_failure(exc):
        return SourceAuthError(
            f"the source refused the credentials for {what}: {detail}; "
            "fix source.user / source.password",
            field="source.password",
        )
    if not isinstance(exc, psycopg2.OperationalError):
        return None
    role = _NO_ROLE.search(detail)
    if role is not None:
        return SourceAuthError(
            f"the source has no role {role.group(1)} ({what}): {detail}; fix source.user "
            "or create the role",
            field="source.user",
        )
    if "Hot standby mode is disabled" in detail:
        return SourceSetupError(
            f"the source is a standby that is not hot ({what}): {detail}; pgcdc reads the "
            "catalog from the server it streams from, so a standby source needs "
            "hot_standby = on (a restart of the standby)",
            field="source.host",
        )
    database = _NO_DATABASE.search(detail)
    if database is not None:
        return SourceSetupError(
            f"the source has no database {database.group(1)} ({what}): {detail}; fix "
            "source.dbname or create the database",
            field="source.dbname",
        )
    return None


def connect_error(
    exc: psycopg2.OperationalError, what: str, *, sslmode: str | None = None
) -> PgcdcError:
    """The pgcdc error for a failed connection: fatal when the server refused it for
    good (`refused_error`), else retryable `SourceUnavailableError`."""
    refused = refused_error(exc, what, sslmode=sslmode)
    if refused is not None:
        return refused
    return SourceUnavailableError(f"cannot connect to the source ({what}): {str(exc).strip()}")


_WRONG_TYPE = (
    "cannot use a logical replication slot for physical replication",
    "with a logical replication slot",
    "is not physical",
)
# What to do once WAL pgcdc needed is gone: only a new snapshot closes the gap.
NEW_SNAPSHOT_REMEDY = (
    "Remedy: take a new snapshot: stop every worker of this slot, then run "
    "`pgcdc run --fresh-start` once (snapshot.mode = initial re-reads every captured "
    "table; consumers should expect each row again as op r)"
)
_BUSY = re.compile(r"replication slot \"?[^\"]*\"? is active for pid", re.IGNORECASE)
_REMOVED = re.compile(r"requested WAL segment (\S+) has already been removed", re.IGNORECASE)


def permanent_error(
    exc: BaseException,
    *,
    slot: str,
    lsn: int | None = None,
    sslmode: str | None = None,
) -> PgcdcError | None:
    """The fatal error for `exc` if retrying cannot help, else None (`sslmode`: the
    connection's, as `tls_error` wants it)."""
    text = str(exc).strip()
    refused = refused_error(exc, "the replication connection", sslmode=sslmode)
    if refused is not None:
        return refused
    if any(marker in text for marker in _WRONG_TYPE):
        return SlotTypeError(
            f"replication slot {slot} is not a physical slot ({text}); pgcdc streams over "
            f"a physical slot: drop it (SELECT pg_drop_replication_slot('{slot}')) or set "
            "source.slot to another name",
            field="source.slot",
        )
    removed = _REMOVED.search(text)
    if removed is not None:
        at = f" at {format_lsn(lsn)}" if lsn is not None else ""
        return WalRemovedError(
            f"the server has removed WAL segment {removed.group(1)} that slot {slot} needs "
            f"to continue{at}; the changes in it are lost to pgcdc. {NEW_SNAPSHOT_REMEDY}",
            lsn=lsn,
        )
    return None


TRANSIENT_SQLSTATES = frozenset({"40P01", "40001", "55P03"})


def is_transient(exc: BaseException) -> bool:
    """Whether `exc` is a SQL error that running the statement again can cure."""
    return isinstance(exc, psycopg2.Error) and exc.pgcode in TRANSIENT_SQLSTATES


def is_slot_busy(exc: BaseException) -> bool:
    return _BUSY.search(str(exc)) is not None
