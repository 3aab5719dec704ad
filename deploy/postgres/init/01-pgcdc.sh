#!/bin/bash
# Runs once, when the data directory is created (docker-entrypoint-initdb.d), as the
# image's superuser. Creates the role the pgcdc worker connects as, with exactly the
# privileges `pgcdc run` needs (connectors/postgres/privileges.py, README "Privileges"):
#   LOGIN, REPLICATION          the physical replication connection and its slot
#   pg_read_all_data            SELECT on every table (and USAGE on every schema), for
#                               snapshots
#   on 15: pg_checkpoint        CHECKPOINT writes the RUNNING_XACTS record decoding
#                               starts from
#   on 16+: EXECUTE ON FUNCTION pg_log_standby_snapshot()   writes that record alone;
#                               granted in this database (function ACLs are per database)
# and nothing else: the DDL capture's event triggers need a superuser, and compose's
# pgcdc-setup installs them with the superuser's own credentials; with
# `--worker-role pgcdc` it also grants this role EXECUTE on pgcdc.toast_chunks, the
# SECURITY DEFINER reader of replaced TOAST values the unchanged-TOAST fill needs (the
# function does not exist before setup creates it, so this script cannot grant it).
# Also allows the role's replication connections in pg_hba.conf (the image only allows
# ordinary ones) and creates a small table to capture.
#
# Environment: POSTGRES_USER, POSTGRES_DB and PGDATA (set by the postgres image);
# PGCDC_DB_PASSWORD, or PGCDC_DB_PASSWORD_FILE naming a file that holds it (a compose
# secret), one of them, as the image's POSTGRES_PASSWORD(_FILE): an empty value counts as
# unset; PGCDC_DB_USER, the role's name (default pgcdc); PGCDC_HBA_HOSTSSL, off (default)
# or on: TCP over TLS only, every `host` line of the image's pg_hba.conf becomes `hostssl`
# and so does the replication line (docker-compose.tls.yml; the server needs ssl=on).
# psql connects where libpq's defaults say (in the image: the init-time server's socket).
set -euo pipefail

if [ -n "${PGCDC_DB_PASSWORD:-}" ] && [ -n "${PGCDC_DB_PASSWORD_FILE:-}" ]; then
    echo "both PGCDC_DB_PASSWORD and PGCDC_DB_PASSWORD_FILE are set: keep one" >&2
    exit 1
fi
if [ -n "${PGCDC_DB_PASSWORD_FILE:-}" ]; then
    PGCDC_DB_PASSWORD="$(< "$PGCDC_DB_PASSWORD_FILE")"
fi
: "${PGCDC_DB_PASSWORD:?set PGCDC_DB_PASSWORD or PGCDC_DB_PASSWORD_FILE}"
role="${PGCDC_DB_USER:-pgcdc}"
case "${PGCDC_HBA_HOSTSSL:-off}" in
    off) hba=host ;;
    on) hba=hostssl ;;
    *) echo "PGCDC_HBA_HOSTSSL must be on or off, not ${PGCDC_HBA_HOSTSSL}" >&2; exit 1 ;;
esac

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     -v role="$role" -v pw="$PGCDC_DB_PASSWORD" <<'SQL'
CREATE ROLE :"role" WITH LOGIN REPLICATION PASSWORD :'pw';
GRANT pg_read_all_data TO :"role";
SELECT current_setting('server_version_num')::int >= 160000 AS log_standby_snapshot \gset
\if :log_standby_snapshot
GRANT EXECUTE ON FUNCTION pg_catalog.pg_log_standby_snapshot() TO :"role";
\else
GRANT pg_checkpoint TO :"role";
\endif

CREATE TABLE public.customers (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL,
    email       text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO public.customers (name, email)
VALUES ('Ada Lovelace', 'ada@example.org'), ('Edgar Codd', 'ted@example.org');
SQL

if [ "$hba" = hostssl ]; then
    # initdb's loopback lines and the image's `host all all all ...` alike: a TCP
    # connection without TLS then matches no line and is refused.
    sed -i -E 's/^host([[:space:]])/hostssl\1/' "$PGDATA/pg_hba.conf"
fi
echo "$hba replication $role all scram-sha-256" >> "$PGDATA/pg_hba.conf"
