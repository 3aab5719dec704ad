#!/bin/bash
# Runs once, when the data directory is created (docker-entrypoint-initdb.d).
# Creates the role pgcdc connects as: LOGIN + REPLICATION for the WAL stream, read access
# to every table for the initial snapshot, CREATE on the database for pgcdc's own schema.
# Also allows replication connections from the compose network in pg_hba.conf (the image
# only allows ordinary connections) and creates a small table to capture.
set -euo pipefail

: "${PGCDC_DB_PASSWORD:?set PGCDC_DB_PASSWORD}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     -v pw="$PGCDC_DB_PASSWORD" -v db="$POSTGRES_DB" <<'SQL'
CREATE ROLE pgcdc WITH LOGIN REPLICATION PASSWORD :'pw';
GRANT pg_read_all_data TO pgcdc;
GRANT CREATE ON DATABASE :"db" TO pgcdc;

CREATE TABLE public.customers (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL,
    email       text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO public.customers (name, email)
VALUES ('Ada Lovelace', 'ada@example.org'), ('Edgar Codd', 'ted@example.org');
SQL

echo "host replication pgcdc all scram-sha-256" >> "$PGDATA/pg_hba.conf"
