-- The DDL capture installed by `pgcdc setup` (connectors/setup.py). Idempotent: run it
-- again to upgrade in place. The function body of pgcdc.table_def is table_def.sql.
--
-- For every table a DDL command creates or changes (ddl_command_end) and every table it
-- drops (sql_drop) it writes a transactional logical message with prefix '{ddl_prefix}'
-- (service.schema.history.DDL_PREFIX, substituted by connectors.postgres.setup):
--   {"v": 1, "op": "table", "tag": <command tag>, "def": <pgcdc.table_def(oid)>}
--   {"v": 1, "op": "drop", "oid": <oid>, "schema": <schema>, "name": <name>}
-- The message lies in the WAL inside the DDL's own transaction, after the DDL, so it
-- carries the relfilenode a rewrite (ALTER ... TYPE) has just assigned.
--
-- Commands that change a table's shape or name through another object are covered
-- too, since the schema history trusts these messages alone while they are installed:
-- ALTER SCHEMA (renaming every table in it), ALTER TYPE on a composite type (its typed
-- tables, CREATE TABLE ... OF), and columns dropped by a cascade (DROP TYPE/DOMAIN ...
-- CASCADE), reported by sql_drop as 'table column' objects.

CREATE SCHEMA IF NOT EXISTS pgcdc;

CREATE OR REPLACE FUNCTION pgcdc.table_def(oid) RETURNS json
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
{table_def}
$fn$;

CREATE OR REPLACE FUNCTION pgcdc.on_ddl_command_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    cmd record;
    target oid;
    kind "char";
    persistence "char";
    seen oid[] := '{}';
BEGIN
    FOR cmd IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
        IF cmd.classid IN ('pg_catalog.pg_namespace'::regclass, 'pg_catalog.pg_type'::regclass)
           OR (cmd.classid = 'pg_catalog.pg_class'::regclass
               AND EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = cmd.objid AND c.relkind = 'c'))
        THEN
            -- a renamed schema renames its tables; an altered composite type (reported
            -- as its pg_type row, or as its pg_class row for ALTER TYPE ... ATTRIBUTE)
            -- alters the tables typed by it
            FOR target IN
                SELECT c.oid FROM pg_class c
                WHERE c.relkind IN ('r', 'p') AND c.relpersistence <> 't'
                  AND CASE WHEN cmd.classid = 'pg_catalog.pg_namespace'::regclass
                           THEN c.relnamespace = cmd.objid
                           WHEN cmd.classid = 'pg_catalog.pg_type'::regclass
                           THEN c.reloftype = cmd.objid
                           ELSE c.reloftype = (SELECT t.reltype FROM pg_class t
                                               WHERE t.oid = cmd.objid) END
                ORDER BY c.oid
            LOOP
                CONTINUE WHEN target = ANY(seen);
                seen := seen || target;
                PERFORM pg_logical_emit_message(true, '{ddl_prefix}', json_build_object(
                    'v', 1, 'op', 'table', 'tag', cmd.command_tag,
                    'def', pgcdc.table_def(target))::text);
            END LOOP;
            CONTINUE;
        END IF;
        CONTINUE WHEN cmd.classid <> 'pg_catalog.pg_class'::regclass;
        SELECT c.relkind, c.relpersistence INTO kind, persistence
        FROM pg_class c WHERE c.oid = cmd.objid;
        CONTINUE WHEN NOT FOUND;
        IF kind IN ('r', 'p') THEN
            target := cmd.objid;
        ELSIF kind IN ('i', 'I') THEN
            -- an index may be the table's key (primary key, replica identity)
            SELECT i.indrelid INTO target FROM pg_index i WHERE i.indexrelid = cmd.objid;
            SELECT c.relkind, c.relpersistence INTO kind, persistence
            FROM pg_class c WHERE c.oid = target;
            CONTINUE WHEN kind NOT IN ('r', 'p');
        ELSE
            CONTINUE;
        END IF;
        CONTINUE WHEN persistence = 't' OR target = ANY(seen);
        seen := seen || target;
        PERFORM pg_logical_emit_message(true, '{ddl_prefix}', json_build_object(
            'v', 1, 'op', 'table', 'tag', cmd.command_tag,
            'def', pgcdc.table_def(target))::text);
    END LOOP;
END
$fn$;

CREATE OR REPLACE FUNCTION pgcdc.on_sql_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    obj record;
    seen oid[] := '{}';
BEGIN
    FOR obj IN SELECT * FROM pg_event_trigger_dropped_objects() LOOP
        IF obj.classid = 'pg_catalog.pg_class'::regclass AND obj.objsubid <> 0
           AND obj.object_type = 'table column' AND NOT obj.is_temporary
           AND TG_TAG <> 'ALTER TABLE'  -- ddl_command_end reports that table itself
           AND NOT obj.objid = ANY(seen)
           AND EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = obj.objid
                       AND c.relkind IN ('r', 'p') AND c.relpersistence <> 't')
        THEN
            -- a column dropped by a cascade (DROP TYPE ... CASCADE): the table lives on
            seen := seen || obj.objid;
            PERFORM pg_logical_emit_message(true, '{ddl_prefix}', json_build_object(
                'v', 1, 'op', 'table', 'tag', TG_TAG,
                'def', pgcdc.table_def(obj.objid))::text);
            CONTINUE;
        END IF;
        CONTINUE WHEN obj.classid <> 'pg_catalog.pg_class'::regclass
            OR obj.objsubid <> 0
            OR obj.object_type NOT IN ('table')
            OR obj.is_temporary;
        PERFORM pg_logical_emit_message(true, '{ddl_prefix}', json_build_object(
            'v', 1, 'op', 'drop', 'oid', obj.objid::int8,
            'schema', obj.schema_name, 'name', obj.object_name)::text);
    END LOOP;
END
$fn$;

REVOKE ALL ON FUNCTION pgcdc.on_ddl_command_end() FROM PUBLIC;
REVOKE ALL ON FUNCTION pgcdc.on_sql_drop() FROM PUBLIC;

DROP EVENT TRIGGER IF EXISTS pgcdc_ddl_command_end;
CREATE EVENT TRIGGER pgcdc_ddl_command_end ON ddl_command_end
    EXECUTE FUNCTION pgcdc.on_ddl_command_end();

DROP EVENT TRIGGER IF EXISTS pgcdc_sql_drop;
CREATE EVENT TRIGGER pgcdc_sql_drop ON sql_drop
    EXECUTE FUNCTION pgcdc.on_sql_drop();
