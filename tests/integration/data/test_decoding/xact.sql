-- Workload: PostgreSQL's contrib/test_decoding/sql/xact.sql (PostgreSQL License),
-- run by tests/integration/contrib_scripts.py. Unchanged but for this header.
SET synchronous_commit = on;

SELECT 'init' FROM pg_create_logical_replication_slot('regression_slot', 'test_decoding');

CREATE TABLE xact_test(data text);
INSERT INTO xact_test VALUES ('before-test');

BEGIN;
SELECT * FROM xact_test FOR UPDATE;
SAVEPOINT foo;
INSERT INTO xact_test VALUES ('after-assignment');
COMMIT;
SELECT data FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL, 'include-xids', '0', 'skip-empty-xacts', '1');

DROP TABLE xact_test;

SELECT pg_drop_replication_slot('regression_slot');
