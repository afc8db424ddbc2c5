-- transaction.sql: the transaction wire: pushes and acks in one PostgreSQL transaction, all or
-- nothing, and its refusals.
--
-- Every refusal the broker reads is raised with a fixed message and a JSON object in DETAIL (the
-- broker's `DbError::detail()`); the message is for humans and logs only. SQLSTATEs:
-- unique_violation for a duplicate push, raise_exception (P0001) for any other refusal.
--
-- Refusal details (every object has "refusal"):
--   {"refusal": "required_lease", "index": k, "lease": text}       k 0-based in required_leases
--   {"refusal": "duplicate", "group": g, "item": k, "of_item": f}     g 1-based push group,
--   {"refusal": "duplicate", "group": g, "item": k, "of_offset": o}   k and f 0-based frames
--   {"refusal": "ack", "ordinal": n, "reason": text, "hash": hex|null}
--       reason: the ack procedure's error, 'unresolvable' or 'already committed'; hash: the
--       first offending position's hash when the refusal is about one position.
--   {"refusal": "queue_full", "queue", "maxSize", "depth", "pushing"}  (log_push_v2, push.sql)

-- queen.log_transaction_refuse_v1(detail jsonb, duplicate boolean) -> never returns
-- Contract: raises the transaction wire's refusal: message 'transaction refused', DETAIL the
-- refusal object (see the head of this file), SQLSTATE unique_violation for a duplicate push
-- and raise_exception (P0001) otherwise. The raise rolls back the whole transaction.
-- Locks: none.
CREATE OR REPLACE FUNCTION queen.log_transaction_refuse_v1(p_detail jsonb, p_duplicate boolean)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_duplicate THEN
        RAISE EXCEPTION 'transaction refused' USING ERRCODE = 'unique_violation',
            DETAIL = p_detail::text;
    END IF;
    RAISE EXCEPTION 'transaction refused' USING DETAIL = p_detail::text;
END;
$$;

-- queen.log_transaction_ack_refuse_v1(ack element, reason, hash) -> never returns
-- Contract: raises the refusal of one ack element of the transaction wire:
-- {"refusal": "ack", "ordinal", "reason", "hash"} (P0001).
-- Locks: none.
CREATE OR REPLACE FUNCTION queen.log_transaction_ack_refuse_v1(a jsonb, p_reason text, p_hash text)
RETURNS void
LANGUAGE sql AS $$
    SELECT queen.log_transaction_refuse_v1(
        jsonb_build_object('refusal', 'ack', 'ordinal', (a ->> 'ordinal')::integer,
                           'reason', p_reason, 'hash', p_hash), false)
$$;

-- queen.log_transaction_ack_v1(tenant, ack jsonb) -> the ack procedure's answer
-- Contract: one ack element of log_transaction_wire_v2 (see there): positional elements go
-- through log_ack_v1, the others through log_ack_by_hash_v1; any refusal raises
-- {"refusal": "ack", ...} (log_transaction_ack_refuse_v1), naming the first offending hash when
-- the refusal is about one position.
-- Locks: the element's consumer row (through log_ack_v1 / log_ack_by_hash_v1).
CREATE OR REPLACE FUNCTION queen.log_transaction_ack_v1(p_tenant uuid, a jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v jsonb;
BEGIN
    IF a ->> 'mode' = 'positional' THEN
        -- SELECT ... INTO, not `v := ...`: a plpgsql simple expression bypasses the executor,
        -- and pg_stat_statements (which the load generator charts by procedure) would not see
        -- the call.
        SELECT queen.log_ack_v1(p_tenant, a ->> 'queue', a ->> 'partition', a ->> 'group',
                                a ->> 'worker', (a ->> 'upto')::bigint, true,
                                (a ->> 'count')::integer)
        INTO v;
        IF NOT (v ->> 'ok')::boolean THEN
            PERFORM queen.log_transaction_ack_refuse_v1(a,
                CASE WHEN v ->> 'error' = 'unknown partition' THEN 'unresolvable' ELSE v ->> 'error' END,
                NULL);
        END IF;
        RETURN v;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
                   WHERE p.id = (a ->> 'partition_id')::uuid AND q.tenant_id = p_tenant) THEN
        PERFORM queen.log_transaction_ack_refuse_v1(a, 'unresolvable', a -> 'hashes' ->> 0);
    END IF;
    SELECT queen.log_ack_by_hash_v1(
        (a ->> 'partition_id')::uuid, a ->> 'group', a ->> 'worker',
        ARRAY(SELECT decode(x.v, 'hex') FROM jsonb_array_elements_text(a -> 'hashes')
                                             WITH ORDINALITY AS x(v, o) ORDER BY x.o),
        ARRAY(SELECT x.v FROM jsonb_array_elements_text(a -> 'statuses')
                              WITH ORDINALITY AS x(v, o) ORDER BY x.o))
    INTO v;
    IF NOT (v ->> 'ok')::boolean THEN
        PERFORM queen.log_transaction_ack_refuse_v1(a, v ->> 'error', NULL);
    ELSIF jsonb_array_length(v -> 'unresolvedHashes') > 0 THEN
        PERFORM queen.log_transaction_ack_refuse_v1(a, 'unresolvable', v -> 'unresolvedHashes' ->> 0);
    ELSIF jsonb_array_length(v -> 'staleHashes') > 0 THEN
        PERFORM queen.log_transaction_ack_refuse_v1(a, 'already committed', v -> 'staleHashes' ->> 0);
    END IF;
    RETURN v;
END;
$$;

-- queen.log_transaction_wire_v2(payload jsonb) -> jsonb
-- Contract: all or nothing. `payload`:
--   { "tenant": uuid,
--     "required_leases": [leaseId, ...],
--     "push": { "queues": [..], "partitions": [..], "hashes": [hex, ..], "blobs": [hex, ..] },
--     "acks": [ { "ordinal": n, "partition_id": uuid, "group": text, "worker": text,
--                 "mode": "positional", "queue": text, "partition": text, "upto": n, "count": n }
--             | { "ordinal": n, "partition_id": uuid, "group": text, "worker": text,
--                 "mode": "hash", "hashes": [hex, ..], "statuses": [..] } ] }
-- The push arrays are parallel, one element per (queue, partition) group: `hashes[i]` the hex of
-- 16 bytes per frame, `blobs[i]` the hex of the packed segment. Ack ordinals are the broker's
-- names for its ack groups (echoed in results and refusals); every ack of one element shares
-- (partition, group, worker).
--
-- Every required lease must be live (worker_id = lease and lease_live_v1) on at least one
-- partition of the tenant, checked under the consumer row locks (so it cannot be released
-- between the check and the commit). The push groups go through log_push_v2 (one segment and
-- sidecar row per partition); a duplicate (of a stored message inside the dedup window, or of
-- an earlier item of the same group, i.e. of this transaction) raises a "duplicate" refusal
-- with SQLSTATE unique_violation; a push that would take a queue above its maxSize raises
-- 'queue full' with {"refusal": "queue_full", "queue", "maxSize", "depth", "pushing"} in
-- DETAIL. Positional acks (the broker served the pop and knows the offsets) go through
-- log_ack_v1, addressed by names inside the tenant; the others through log_ack_by_hash_v1,
-- after checking the partition belongs to the tenant (an unknown or foreign partition is
-- 'unresolvable', either way). Any ack refusal (invalid or expired lease, beyond the leased
-- batch, an unresolvable or already committed position) raises an "ack" refusal (P0001). The
-- refusal objects are listed at the head of this file. A raise rolls back everything. Returns
-- { "push": [ {ordinal, partition_id, base_offset} ], "acks": [ {ordinal, result} ] }, where
-- result is the ack procedure's own answer (a DLQ hand-off is filed by the broker after commit,
-- under the lease the hand-off kept).
-- Locks, in the one total order: provisioning, then the rows of limited queues and the
-- partition rows (inside log_push_v2), then consumer rows ascending by (partition_id, group):
-- when leases are required, one sorted SELECT ... FOR UPDATE takes the consumer rows of those
-- leases together with the existing rows of every ack element; the ack elements are then
-- processed in that same order (re-locking a held row is free). Consumer locks are only taken
-- after every partition lock.
CREATE OR REPLACE FUNCTION queen.log_transaction_wire_v2(p_payload jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant uuid := (p_payload ->> 'tenant')::uuid;
    v_leases text[] := ARRAY(SELECT l.v FROM jsonb_array_elements_text(
                                 COALESCE(p_payload -> 'required_leases', '[]')) WITH ORDINALITY AS l(v, o)
                             ORDER BY l.o);
    v_push jsonb := '[]'::jsonb;
    v_acks jsonb := '[]'::jsonb;
    v_dup jsonb;
    r record;
    a jsonb;
    k integer;
BEGIN
    IF jsonb_array_length(COALESCE(p_payload #> '{push,queues}', '[]')) > 0 THEN
        FOR r IN
            SELECT * FROM queen.log_push_v2(
                v_tenant,
                ARRAY(SELECT x.v FROM jsonb_array_elements_text(p_payload #> '{push,queues}')
                                      WITH ORDINALITY AS x(v, o) ORDER BY x.o),
                ARRAY(SELECT x.v FROM jsonb_array_elements_text(p_payload #> '{push,partitions}')
                                      WITH ORDINALITY AS x(v, o) ORDER BY x.o),
                ARRAY(SELECT decode(x.v, 'hex') FROM jsonb_array_elements_text(p_payload #> '{push,hashes}')
                                      WITH ORDINALITY AS x(v, o) ORDER BY x.o),
                ARRAY(SELECT decode(x.v, 'hex') FROM jsonb_array_elements_text(p_payload #> '{push,blobs}')
                                      WITH ORDINALITY AS x(v, o) ORDER BY x.o))
            AS pr ORDER BY pr.ordinal
        LOOP
            IF NOT r.written THEN
                -- log_push_v2 wrote nothing. Name the first duplicate of the lowest group.
                IF v_dup IS NULL THEN
                    v_dup := jsonb_build_object('refusal', 'duplicate', 'group', r.ordinal,
                                                'item', r.dup_index[1]);
                    v_dup := v_dup || CASE WHEN r.dup_first[1] >= 0
                                           THEN jsonb_build_object('of_item', r.dup_first[1])
                                           ELSE jsonb_build_object('of_offset', r.dup_offset[1]) END;
                END IF;
                CONTINUE;
            END IF;
            v_push := v_push || jsonb_build_object('ordinal', r.ordinal, 'partition_id', r.partition_id,
                                                   'base_offset', r.base_offset);
        END LOOP;
        IF v_dup IS NOT NULL THEN
            PERFORM queen.log_transaction_refuse_v1(v_dup, true);
        END IF;
    END IF;

    IF cardinality(v_leases) > 0 THEN
        -- One sorted lock pass over every consumer row this call needs (the LockRows node runs
        -- above the Sort, so rows are locked in (partition_id, consumer_group) order).
        PERFORM 1
        FROM queen.log_consumers c
        WHERE (c.worker_id = ANY (v_leases)
               AND EXISTS (SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
                           WHERE p.id = c.partition_id AND q.tenant_id = v_tenant))
           OR (c.partition_id, c.consumer_group) IN (
                  SELECT (e ->> 'partition_id')::uuid, e ->> 'group'
                  FROM jsonb_array_elements(COALESCE(p_payload -> 'acks', '[]')) e)
        ORDER BY c.partition_id, c.consumer_group
        FOR UPDATE OF c;
        FOR k IN 1 .. cardinality(v_leases) LOOP
            IF NOT EXISTS (
                SELECT 1 FROM queen.log_consumers c
                JOIN queen.log_partitions p ON p.id = c.partition_id
                JOIN queen.queues q ON q.id = p.queue_id
                WHERE c.worker_id = v_leases[k]
                  AND queen.lease_live_v1(c.batch_end, c.lease_expires_at)
                  AND q.tenant_id = v_tenant) THEN
                PERFORM queen.log_transaction_refuse_v1(
                    jsonb_build_object('refusal', 'required_lease', 'index', k - 1,
                                       'lease', v_leases[k]), false);
            END IF;
        END LOOP;
    END IF;

    FOR a IN
        SELECT e FROM jsonb_array_elements(COALESCE(p_payload -> 'acks', '[]')) e
        ORDER BY (e ->> 'partition_id')::uuid, e ->> 'group', (e ->> 'ordinal')::integer
    LOOP
        SELECT v_acks || jsonb_build_object('ordinal', (a ->> 'ordinal')::integer,
                                            'result', queen.log_transaction_ack_v1(v_tenant, a))
        INTO v_acks;
    END LOOP;
    RETURN jsonb_build_object('push', v_push, 'acks', v_acks);
END;
$$;
