-- 009_transaction.sql: pushes and acks in one PostgreSQL transaction (the transaction wire).

-- queen.log_transaction_wire_v1(payload jsonb) -> jsonb
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
-- names for its ack groups (echoed in results and raises); every ack of one element shares
-- (partition, group, worker).
--
-- Every required lease must be live (worker_id = lease, batch_end set, not expired) on at least
-- one partition of the tenant, checked under the consumer row locks (so it cannot be released
-- between the check and the commit). The push groups go through log_push_v1 (one segment and
-- sidecar row per partition); a duplicate (of a stored message inside the dedup window, or of
-- an earlier item of the same group, i.e. of this transaction) raises QDUP with SQLSTATE
-- unique_violation. Positional acks (the broker served the pop and knows the offsets) go
-- through log_ack_v1, addressed by names inside the tenant; the others through
-- log_ack_by_hash_v1, after checking the partition belongs to the tenant (an unknown or foreign
-- partition is 'unresolvable', either way). Any ack refusal (invalid or expired lease, beyond
-- the leased batch, an unresolvable or already committed position) raises QTXN (P0001). A raise
-- rolls back everything. Returns
-- { "push": [ {ordinal, partition_id, base_offset} ], "acks": [ {ordinal, result} ] }, where
-- result is the ack procedure's own answer (a DLQ hand-off is filed by the broker after commit,
-- under the lease the hand-off kept).
--
-- Raised messages (the broker parses them; keep the shapes):
--   QTXN required lease <k> <leaseId> is not held          k = 0-based index in required_leases
--   QDUP push group <g> item <k> duplicates item <f>       g 1-based group, k and f 0-based
--   QDUP push group <g> item <k> duplicates offset <o>        frame indices within group g
--   QTXN ack <ordinal> refused: <reason>[ hash <hex>]      reason: the procedure's error,
--                                                          'unresolvable', 'already committed'
--
-- Locks, in the one total order: provisioning, then partition rows ascending by id (inside
-- log_push_v1), then consumer rows ascending by (partition_id, group): when leases are required,
-- one sorted SELECT ... FOR UPDATE takes the consumer rows of those leases together with the
-- existing rows of every ack element; the ack elements are then processed in that same order
-- (re-locking a held row is free). Consumer locks are only taken after every partition lock.
CREATE FUNCTION queen.log_transaction_wire_v1(p_payload jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant uuid := (p_payload ->> 'tenant')::uuid;
    v_leases text[] := ARRAY(SELECT l.v FROM jsonb_array_elements_text(
                                 COALESCE(p_payload -> 'required_leases', '[]')) WITH ORDINALITY AS l(v, o)
                             ORDER BY l.o);
    v_push jsonb := '[]'::jsonb;
    v_acks jsonb := '[]'::jsonb;
    v_dup_group integer;
    v_dup_item integer;
    v_dup_first integer;
    v_dup_offset bigint;
    r record;
    a jsonb;
    k integer;
BEGIN
    IF jsonb_array_length(COALESCE(p_payload #> '{push,queues}', '[]')) > 0 THEN
        FOR r IN
            SELECT * FROM queen.log_push_v1(
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
                -- log_push_v1 wrote nothing. Name the first duplicate of the lowest group.
                IF v_dup_group IS NULL THEN
                    v_dup_group := r.ordinal;
                    v_dup_item := r.dup_index[1];
                    v_dup_first := r.dup_first[1];
                    v_dup_offset := r.dup_offset[1];
                END IF;
                CONTINUE;
            END IF;
            v_push := v_push || jsonb_build_object('ordinal', r.ordinal, 'partition_id', r.partition_id,
                                                   'base_offset', r.base_offset);
        END LOOP;
        IF v_dup_group IS NOT NULL THEN
            IF v_dup_first >= 0 THEN
                RAISE EXCEPTION 'QDUP push group % item % duplicates item %',
                    v_dup_group, v_dup_item, v_dup_first
                    USING ERRCODE = 'unique_violation';
            END IF;
            RAISE EXCEPTION 'QDUP push group % item % duplicates offset %',
                v_dup_group, v_dup_item, v_dup_offset
                USING ERRCODE = 'unique_violation';
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
                WHERE c.worker_id = v_leases[k] AND c.batch_end IS NOT NULL
                  AND c.lease_expires_at > now() AND q.tenant_id = v_tenant) THEN
                RAISE EXCEPTION 'QTXN required lease % % is not held', k - 1, v_leases[k];
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

-- queen.log_transaction_ack_v1(tenant, ack jsonb) -> the ack procedure's answer
-- Contract: one ack element of log_transaction_wire_v1 (see there); raises QTXN on any refusal,
-- naming the first offending hash when the refusal is about one position.
-- Locks: the element's consumer row (through log_ack_v1 / log_ack_by_hash_v1).
CREATE FUNCTION queen.log_transaction_ack_v1(p_tenant uuid, a jsonb)
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
            RAISE EXCEPTION 'QTXN ack % refused: %', a ->> 'ordinal',
                CASE WHEN v ->> 'error' = 'unknown partition' THEN 'unresolvable' ELSE v ->> 'error' END;
        END IF;
        RETURN v;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
                   WHERE p.id = (a ->> 'partition_id')::uuid AND q.tenant_id = p_tenant) THEN
        RAISE EXCEPTION 'QTXN ack % refused: unresolvable hash %', a ->> 'ordinal', a -> 'hashes' ->> 0;
    END IF;
    SELECT queen.log_ack_by_hash_v1(
        (a ->> 'partition_id')::uuid, a ->> 'group', a ->> 'worker',
        ARRAY(SELECT decode(x.v, 'hex') FROM jsonb_array_elements_text(a -> 'hashes')
                                             WITH ORDINALITY AS x(v, o) ORDER BY x.o),
        ARRAY(SELECT x.v FROM jsonb_array_elements_text(a -> 'statuses')
                              WITH ORDINALITY AS x(v, o) ORDER BY x.o))
    INTO v;
    IF NOT (v ->> 'ok')::boolean THEN
        RAISE EXCEPTION 'QTXN ack % refused: %', a ->> 'ordinal', v ->> 'error';
    ELSIF jsonb_array_length(v -> 'unresolvedHashes') > 0 THEN
        RAISE EXCEPTION 'QTXN ack % refused: unresolvable hash %', a ->> 'ordinal',
            v -> 'unresolvedHashes' ->> 0;
    ELSIF jsonb_array_length(v -> 'staleHashes') > 0 THEN
        RAISE EXCEPTION 'QTXN ack % refused: already committed hash %', a ->> 'ordinal',
            v -> 'staleHashes' ->> 0;
    END IF;
    RETURN v;
END;
$$;
