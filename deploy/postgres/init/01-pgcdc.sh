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
# pgcdc-setup installs them with the superuser's own credentials.
# Also allows the role's replication connections in pg_hba.conf (the image only allows
# ordinary ones) and creates a small table to capture.
#
# Environment: POSTGRES_USER, POSTGRES_DB and PGDATA (set by the postgres image);
# PGCDC_DB_PASSWORD (required); PGCDC_DB_USER, the role's name (default pgcdc). psql
# connects where libpq's defaults say (in the image: the init-time server's socket).
set -euo pipefail

: "${PGCDC_DB_PASSWORD:?set PGCDC_DB_PASSWORD}"
role="${PGCDC_DB_USER:-pgcdc}"

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

echo "host replication $role all scram-sha-256" >> "$PGDATA/pg_hba.conf"
