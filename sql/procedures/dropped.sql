-- dropped.sql: THE list of procedures that no longer exist, dropped by name and signature.
--
-- Applied before the procedure files, in the same migration transaction, every time it changes;
-- and every procedure file is applied again after it, so a drop here of a procedure whose
-- return type changed (`DROP` here, new definition in its family file) never leaves it missing.
-- Each line is `DROP FUNCTION IF EXISTS`, so the list holds for any database: one that never
-- had the procedure, and one that still has it.
--
-- To retire a procedure: delete its definition from its family file and add its drop here.
-- To change a procedure's return type or OUT parameters (CREATE OR REPLACE cannot): either
-- add its drop here and keep the new definition under the same name, or define it under a
-- new `_vN` name and drop the old one here once no broker calls it.

-- Retired before the split into schema and procedures (the layout of commit 4fa2920 had
-- already dropped them; listed so that every name ever used has one place that says so).
DROP FUNCTION IF EXISTS queen.configure_queue_v1(uuid, text, text, text, jsonb);
DROP FUNCTION IF EXISTS queen.log_dlq_fetch_v1(uuid, uuid, text, text);
DROP FUNCTION IF EXISTS queen.log_dlq_head_v1(uuid, text, text, bigint, uuid, text, jsonb, text);
DROP FUNCTION IF EXISTS queen.log_dlq_head_v2(uuid, text, text, bigint, uuid, text, json, text);
DROP FUNCTION IF EXISTS queen.log_dlq_list_v1(uuid, text, text, text, integer, bigint);
DROP FUNCTION IF EXISTS queen.log_lease_span_v1(uuid, text, text, integer, integer, boolean,
                                                boolean);
DROP FUNCTION IF EXISTS queen.log_pop_candidates_v1(uuid[], text, boolean);
DROP FUNCTION IF EXISTS queen.log_pop_candidates_v2(uuid[], text, integer);
DROP FUNCTION IF EXISTS queen.log_pop_claim_v1(uuid[], text, text, integer, integer, integer,
                                               boolean, boolean);
DROP FUNCTION IF EXISTS queen.log_pop_discover_v1(uuid, text, text, text, text, integer, integer,
                                                  integer, boolean, boolean);
DROP FUNCTION IF EXISTS queen.log_pop_multi_v1(text[], text[], integer[], integer[], integer[],
                                               boolean[], integer[], uuid[], uuid[], bigint[]);
DROP FUNCTION IF EXISTS queen.log_pop_scope_v1(uuid, text, text, text, text, boolean, boolean);
DROP FUNCTION IF EXISTS queen.log_pop_v1(uuid, text, text, text, text, integer, integer, boolean,
                                         boolean);
DROP FUNCTION IF EXISTS queen.log_pop_wildcard_v1(uuid, text, text, text, integer, integer,
                                                  integer, boolean, boolean);
DROP FUNCTION IF EXISTS queen.log_pop_wildcard_v2(uuid, text, text, text, text, text, integer,
                                                  integer, integer, boolean, boolean, integer);
DROP FUNCTION IF EXISTS queen.log_push_multi_v1(uuid[], text[], text[], bytea[], bytea[]);
DROP FUNCTION IF EXISTS queen.log_push_v1(uuid, text[], text[], bytea[], bytea[]);
DROP FUNCTION IF EXISTS queen.log_subscribe_new_v1(uuid[], text);
DROP FUNCTION IF EXISTS queen.log_transaction_wire_v1(jsonb);
