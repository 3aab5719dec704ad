-- One user table's definition as JSON, the shape `service.tabledef.TableDef`
-- parses. Used verbatim by the catalog stage (with $1 bound to the table oid) and as
-- the body of pgcdc.table_def(oid), which the DDL event trigger calls, so the live
-- catalog and the DDL messages can never disagree on the format.
SELECT json_build_object(
    'oid', c.oid::int8,
    'relfilenode', COALESCE(pg_catalog.pg_relation_filenode(c.oid), 0)::int8,
    'spcnode', (CASE WHEN c.reltablespace = 0 THEN d.dattablespace
                     ELSE c.reltablespace END)::int8,
    'toast_relid', c.reltoastrelid::int8,
    'toast_relfilenode', (CASE WHEN c.reltoastrelid = 0 THEN 0
        ELSE COALESCE(pg_catalog.pg_relation_filenode(c.reltoastrelid), 0) END)::int8,
    'schema', n.nspname::text,
    'name', c.relname::text,
    'relkind', c.relkind::text,
    'replica_identity', c.relreplident::text,
    'columns', (
        SELECT COALESCE(json_agg(json_build_object(
            'attnum', a.attnum::int4,
            'name', a.attname::text,
            'type_oid', a.atttypid::int8,
            'typmod', a.atttypmod,
            'notnull', a.attnotnull,
            'dropped', a.attisdropped,
            'generated', a.attgenerated::text,
            'attlen', a.attlen::int4,
            'attbyval', a.attbyval,
            'attalign', a.attalign::text,
            'attstorage', a.attstorage::text,
            'has_missing', a.atthasmissing,
            'missing_text', CASE WHEN a.atthasmissing THEN a.attmissingval::text END
        ) ORDER BY a.attnum), '[]'::json)
        FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = c.oid AND a.attnum > 0
    ),
    'key', (
        SELECT COALESCE(json_agg(k.attnum::int4 ORDER BY k.ord), '[]'::json)
        FROM (
            SELECT i.indkey, i.indnkeyatts
            FROM pg_catalog.pg_index i
            WHERE i.indrelid = c.oid
              AND CASE WHEN c.relreplident = 'i' THEN i.indisreplident ELSE i.indisprimary END
            LIMIT 1
        ) ix
        CROSS JOIN LATERAL unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
        WHERE k.ord <= ix.indnkeyatts
    )
)
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_database d ON d.datname = pg_catalog.current_database()
WHERE c.oid = $1
