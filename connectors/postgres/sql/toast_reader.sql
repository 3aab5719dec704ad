-- The TOAST reader installed by `pgcdc setup` (connectors/postgres/setup.py) beside the
-- DDL capture, in schema pgcdc. Idempotent. Run as the setup's superuser, who owns it.
--
-- pgcdc.toast_chunks(toast_relation, chunk_ids) returns the raw tuples (t_data: chunk_id,
-- chunk_seq, chunk_data as stored) of the given chunk ids in one TOAST relation, every
-- tuple still stored whether or not a snapshot sees it: what the unchanged-TOAST fill
-- needs for a value a later transaction replaced or deleted but VACUUM has not removed
-- (connectors/postgres/toast.py). Reading them takes pageinspect's get_raw_page, which
-- only a superuser may call; this SECURITY DEFINER function lets the worker's role do
-- that one thing, and no more:
-- - only a TOAST relation (relkind 't') of an ordinary or partitioned table outside
--   pg_catalog (wrong_object_type otherwise);
-- - only when the calling role (session_user: inside the function current_user is the
--   owner) may SELECT that table (insufficient_privilege otherwise), so it reveals no
--   table the role could not read, only older, not yet vacuumed values of it;
-- - EXECUTE is revoked from PUBLIC; `pgcdc setup --worker-role ROLE` grants it to ROLE.
-- The chunk id is the tuple's first 4 bytes, little-endian as pgcdc reads every on-disk
-- integer (the WAL reader assumes a little-endian server too). pageinspect is looked up
-- wherever it is installed (setup installs it in schema pgcdc when it is absent).

CREATE SCHEMA IF NOT EXISTS pgcdc;

CREATE OR REPLACE FUNCTION pgcdc.toast_chunks(toast_relation regclass, chunk_ids oid[])
RETURNS SETOF bytea
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    owner_table oid;
    inspect name;
BEGIN
    SELECT t.oid INTO owner_table
    FROM pg_class c JOIN pg_class t ON t.reltoastrelid = c.oid
    WHERE c.oid = toast_relation AND c.relkind = 't' AND t.relkind IN ('r', 'p', 'm')
      AND t.relnamespace <> 'pg_catalog'::regnamespace;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgcdc.toast_chunks: % is not the TOAST table of a user table',
            toast_relation USING ERRCODE = 'wrong_object_type';
    END IF;
    IF NOT has_table_privilege(session_user, owner_table, 'SELECT') THEN
        RAISE EXCEPTION 'pgcdc.toast_chunks: role % may not read table %',
            session_user, owner_table::regclass USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT n.nspname INTO inspect
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'pageinspect';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pgcdc.toast_chunks: the pageinspect extension is not installed'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT i.t_data
         FROM generate_series(0, $1 - 1) AS b,
              LATERAL %1$I.heap_page_items(%1$I.get_raw_page($2, b)) AS i
         WHERE i.lp_flags = 1 AND length(i.t_data) >= 8
           AND get_byte(i.t_data, 0)::int8 + (get_byte(i.t_data, 1)::int8 << 8)
               + (get_byte(i.t_data, 2)::int8 << 16) + (get_byte(i.t_data, 3)::int8 << 24)
               = ANY($3)', inspect)
    USING (pg_relation_size(toast_relation) / current_setting('block_size')::int)::int,
          toast_relation::text, chunk_ids::int8[];
END
$fn$;

REVOKE ALL ON FUNCTION pgcdc.toast_chunks(regclass, oid[]) FROM PUBLIC;
