-- 013_structured_refusals.sql: refusals as data, the lease predicate and the cursor advance
-- written once, and the v1 pop procedures that 012 superseded dropped.
--
-- Redefined here (same signatures, same behaviour): log_ack_at_v1, log_ack_by_hash_v1,
-- log_dlq_head_v1, log_renew_lease_v1, log_renew_lease_tenant_v1, log_transaction_wire_v1 and
-- log_transaction_ack_v1. The pop engine of 012 keeps its own "no live lease" test inside its
-- set-based claim.
--
-- Before this file the transaction wire formatted its refusals into the exception message
-- ('QTXN ack 3 refused: ...') and the broker parsed the words back. From here on every refusal
-- the broker reads is raised with a fixed message and a JSON object in DETAIL (the broker's
-- `DbError::detail()`); the message is for humans and logs only. SQLSTATEs are unchanged:
-- unique_violation for a duplicate push, raise_exception (P0001) for any other refusal.
--
-- Refusal details (every object has "refusal"):
--   {"refusal": "required_lease", "index": k, "lease": text}       k 0-based in required_leases
--   {"refusal": "duplicate", "group": g, "item": k, "of_item": f}     g 1-based push group,
--   {"refusal": "duplicate", "group": g, "item": k, "of_offset": o}   k and f 0-based frames
--   {"refusal": "ack", "ordinal": n, "reason": text, "hash": hex|null}
--       reason: the ack procedure's error, 'unresolvable' or 'already committed'; hash: the
--       first offending position's hash when the refusal is about one position.

-- queen.lease_live_v1(batch_end, lease_expires_at) -> boolean
-- Contract: THE lease-validity predicate: a consumer row holds a live lease when it has a leased
-- batch and the lease has not expired (now() is the transaction start, so every use inside one
-- transaction agrees). A plain SQL expression, inlined by the planner where it is used in a
-- query. Callers that check a given worker add `worker_id IS NOT DISTINCT FROM p_worker`.
-- Locks: none.
CREATE FUNCTION queen.lease_live_v1(p_batch_end bigint, p_expires timestamptz)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_batch_end IS NOT NULL AND p_expires > now()
$$;

-- queen.log_cursor_advance_v1(partition id, group, new committed, release) -> void
-- Contract: THE cursor-advance UPDATE. Moves the group's `committed` to GREATEST(committed,
-- p_new) (never backward) and adds the distance moved to total_consumed; with p_release it also
-- ends the lease (batch_end, worker_id, lease_expires_at := null) and resets the retry and
-- attempt state of the batch. Validation (lease, bounds) is the caller's.
-- Locks: the consumer row (the callers already hold it FOR UPDATE).
CREATE FUNCTION queen.log_cursor_advance_v1(p_pid uuid, p_group text, p_new bigint,
                                            p_release boolean)
RETURNS void
LANGUAGE sql AS $$
    UPDATE queen.log_consumers lc SET
        committed = GREATEST(lc.committed, p_new),
        batch_end = CASE WHEN p_release THEN NULL ELSE lc.batch_end END,
        worker_id = CASE WHEN p_release THEN NULL ELSE lc.worker_id END,
        lease_expires_at = CASE WHEN p_release THEN NULL ELSE lc.lease_expires_at END,
        batch_retry_count = CASE WHEN p_release THEN 0 ELSE lc.batch_retry_count END,
        attempt_count = CASE WHEN p_release THEN 0 ELSE lc.attempt_count END,
        attempt_from = CASE WHEN p_release THEN NULL ELSE lc.attempt_from END,
        total_consumed = lc.total_consumed + (GREATEST(lc.committed, p_new) - lc.committed)
    WHERE lc.partition_id = p_pid AND lc.consumer_group = p_group
$$;

-- queen.log_ack_at_v1(partition id, group, worker, upto, ok, count) -> jsonb
-- Contract: unchanged from 006_ack.sql (the positional advance of the registry fast path and of
-- fusion; see there), now through lease_live_v1 and log_cursor_advance_v1.
-- Locks: the consumer row, FOR UPDATE (log_ack_consumer_v1). Never a log_partitions row.
CREATE OR REPLACE FUNCTION queen.log_ack_at_v1(p_partition_id uuid, p_group text, p_worker text,
                                               p_upto bigint, p_ok boolean, p_count integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_leased boolean := COALESCE(p_worker, '') <> '';
    c queen.log_consumers;
    v_last bigint;
    v_new bigint;
    v_release boolean;
BEGIN
    c := queen.log_ack_consumer_v1(p_partition_id, p_group, v_leased);
    IF c.partition_id IS NULL THEN
        RETURN jsonb_build_object('ok', false, 'acked', 0, 'committed', NULL,
                                  'lease_released', false,
                                  'error', CASE WHEN v_leased THEN 'invalid or expired lease'
                                                ELSE 'unknown partition' END);
    END IF;
    IF v_leased AND NOT (c.worker_id IS NOT DISTINCT FROM p_worker
                         AND queen.lease_live_v1(c.batch_end, c.lease_expires_at)) THEN
        RETURN jsonb_build_object('ok', false, 'error', 'invalid or expired lease', 'acked', 0,
                                  'committed', c.committed, 'lease_released', false);
    END IF;

    IF NOT COALESCE(p_ok, false) THEN
        -- A release without advance: the batch's retry and attempt state stay.
        v_new := c.committed;
        v_release := c.batch_end IS NOT NULL;
        IF v_release THEN
            UPDATE queen.log_consumers lc SET
                batch_end = NULL, worker_id = NULL, lease_expires_at = NULL
            WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group;
        END IF;
    ELSE
        IF v_leased AND p_upto > c.batch_end THEN
            RETURN jsonb_build_object('ok', false, 'error', 'beyond the leased batch', 'acked', 0,
                                      'committed', c.committed, 'lease_released', false);
        END IF;
        IF v_leased AND COALESCE(p_count, 0) > 0 AND c.committed <> p_upto - p_count THEN
            RETURN jsonb_build_object('ok', false, 'error', 'cursor moved since the pop', 'acked', 0,
                                      'committed', c.committed, 'lease_released', false);
        END IF;
        IF NOT v_leased THEN
            SELECT p.last_offset INTO v_last FROM queen.log_partitions p WHERE p.id = p_partition_id;
            IF p_upto > v_last THEN
                RETURN jsonb_build_object('ok', false, 'error', 'beyond the log end', 'acked', 0,
                                          'committed', c.committed, 'lease_released', false);
            END IF;
        END IF;
        v_new := GREATEST(c.committed, p_upto);
        v_release := (c.batch_end IS NOT NULL AND v_new >= c.batch_end)
                     OR (c.batch_end IS NULL AND v_new > c.committed);
        IF v_new <> c.committed OR v_release THEN
            PERFORM queen.log_cursor_advance_v1(p_partition_id, p_group, v_new, v_release);
        END IF;
    END IF;
    RETURN jsonb_build_object('ok', true, 'error', NULL, 'acked', v_new - c.committed,
                              'committed', v_new,
                              'lease_released', v_release AND c.batch_end IS NOT NULL);
END;
$$;

-- queen.log_ack_by_hash_v1(partition id, group, worker, hashes[], statuses[]) -> jsonb
-- Contract: unchanged from 006_ack.sql (the authoritative hash path; see there for the
-- resolution, the branches and the answer), now validating the lease through lease_live_v1.
-- Its cursor UPDATE stays its own: unlike log_cursor_advance_v1 it charges the retry budget
-- (failed) and resets attempts independently of releasing the lease.
-- Locks: the consumer row, FOR UPDATE (log_ack_consumer_v1). Never a log_partitions row.
CREATE OR REPLACE FUNCTION queen.log_ack_by_hash_v1(p_partition_id uuid, p_group text,
                                                    p_worker text, p_hashes bytea[],
                                                    p_statuses text[])
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_leased boolean := COALESCE(p_worker, '') <> '';
    c queen.log_consumers;
    v_last bigint;
    v_txns_start bigint;
    v_retry_limit integer;
    v_dlq_enabled boolean;
    v_lo bigint;
    v_hi bigint;
    v_lo_row bigint;
    v_near bigint;
    v_far_row bigint;
    v_max_ok bigint;
    v_sig bigint;
    v_sig_status text;
    v_noop text[];
    v_stale text[];
    v_unresolved text[];
    v_offsets bigint[];
    v_old bigint;
    v_new bigint;
    v_branch text;
    v_release boolean := false;
    v_reset boolean := false;
    v_charge boolean := false;
    v_dlq boolean := false;
BEGIN
    IF COALESCE(array_length(p_hashes, 1), 0) <> COALESCE(array_length(p_statuses, 1), 0) THEN
        RAISE EXCEPTION 'QACK hashes and statuses differ in length';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_statuses) AS s
               WHERE s IS NULL OR s NOT IN ('completed', 'failed', 'retry', 'dlq'))
       OR EXISTS (SELECT 1 FROM unnest(p_hashes) AS h WHERE h IS NULL OR length(h) <> 16) THEN
        RAISE EXCEPTION 'QACK a status is not completed/failed/retry/dlq or a hash is not 16 bytes';
    END IF;

    c := queen.log_ack_consumer_v1(p_partition_id, p_group, v_leased);
    IF c.partition_id IS NULL THEN
        IF v_leased THEN
            RETURN queen.log_ack_refused_v1('invalid or expired lease');
        END IF;
        -- No such partition: nothing can resolve.
        RETURN queen.log_ack_refused_v1(NULL) || jsonb_build_object(
            'ok', true, 'branch', 'partial',
            'unresolvedHashes', to_jsonb(ARRAY(SELECT encode(h, 'hex') FROM unnest(p_hashes) AS h)),
            'offsets', to_jsonb(ARRAY(SELECT NULL::bigint FROM unnest(p_hashes))));
    END IF;
    IF v_leased AND NOT (c.worker_id IS NOT DISTINCT FROM p_worker
                         AND queen.lease_live_v1(c.batch_end, c.lease_expires_at)) THEN
        RETURN queen.log_ack_refused_v1('invalid or expired lease');
    END IF;

    SELECT p.last_offset, p.txns_start, q.retry_limit, q.dead_letter_queue OR q.dlq_after_max_retries
    INTO v_last, v_txns_start, v_retry_limit, v_dlq_enabled
    FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
    WHERE p.id = p_partition_id;

    v_old := c.committed;
    v_lo := GREATEST(c.committed + 1, v_txns_start);
    v_hi := CASE WHEN v_leased THEN c.batch_end ELSE v_last END;
    v_lo_row := COALESCE((SELECT max(t.base_offset) FROM queen.log_txns t
                          WHERE t.partition_id = p_partition_id AND t.base_offset <= v_lo), v_lo);
    -- The near part of the span. Under a lease it is the whole span. Without one it is the
    -- row's (possibly expired) lease span, or at least 1024 offsets: where a lease-less ack's
    -- transactionIds almost always are. The far part is read only for hashes not found nearer.
    v_near := CASE WHEN v_leased THEN v_hi
                   ELSE LEAST(v_hi, GREATEST(COALESCE(c.batch_end, v_lo - 1), v_lo + 1023)) END;
    IF v_near < v_hi THEN
        v_far_row := COALESCE((SELECT max(t.base_offset) FROM queen.log_txns t
                               WHERE t.partition_id = p_partition_id
                                 AND t.base_offset <= v_near + 1), v_near + 1);
    END IF;

    WITH input AS MATERIALIZED (
        SELECT i.ord, i.hash, i.status
        FROM unnest(p_hashes, p_statuses) WITH ORDINALITY AS i(hash, status, ord)
    ), near AS MATERIALIZED (
        SELECT substring(t.hashes FROM k * 16 + 1 FOR 16) AS hash, t.base_offset + k AS off
        FROM queen.log_txns t
        CROSS JOIN LATERAL generate_series(GREATEST(v_lo - t.base_offset, 0)::integer,
                                           (LEAST(t.end_offset, v_near) - t.base_offset)::integer)
                           AS k
        WHERE t.partition_id = p_partition_id
          AND t.base_offset >= v_lo_row AND t.base_offset <= v_near
          AND t.end_offset >= v_lo
    ), missing AS MATERIALIZED (
        SELECT DISTINCT i.hash FROM input i
        WHERE NOT EXISTS (SELECT 1 FROM near n WHERE n.hash = i.hash)
    ), far AS (
        -- Lease-less only, and only when some hash was not found nearer (the uncorrelated
        -- EXISTS gates the whole scan). With few such hashes, a row's blob is exploded only
        -- when position() finds one of them in it.
        SELECT substring(t.hashes FROM k * 16 + 1 FOR 16) AS hash, t.base_offset + k AS off
        FROM queen.log_txns t
        CROSS JOIN LATERAL generate_series(GREATEST(v_near + 1 - t.base_offset, 0)::integer,
                                           (LEAST(t.end_offset, v_hi) - t.base_offset)::integer)
                           AS k
        WHERE v_near < v_hi AND EXISTS (SELECT 1 FROM missing)
          AND t.partition_id = p_partition_id
          AND t.base_offset >= v_far_row AND t.base_offset <= v_hi
          AND t.end_offset > v_near
          AND ((SELECT count(*) FROM missing) > 16
               OR EXISTS (SELECT 1 FROM missing m WHERE position(m.hash IN t.hashes) > 0))
    ), occ AS (
        SELECT hash, off FROM near
        UNION ALL
        SELECT hash, off FROM far
    ), hit AS (
        SELECT o.hash, min(o.off) AS eff
        FROM occ o
        WHERE o.hash IN (SELECT hash FROM input)
        GROUP BY o.hash
    ), resolved AS MATERIALIZED (
        SELECT i.ord, i.hash, i.status, h.eff,
               CASE WHEN h.eff IS NOT NULL THEN false
                    ELSE EXISTS (
                        SELECT 1 FROM queen.log_txns t
                        WHERE t.partition_id = p_partition_id
                          AND t.base_offset >= v_txns_start AND t.base_offset <= c.committed
                          AND position(i.hash IN t.hashes) > 0
                          AND queen.log_hash_index_v1(
                                  t.hashes, i.hash, 0,
                                  (LEAST(t.end_offset, c.committed) - t.base_offset)::integer)
                              IS NOT NULL)
               END AS below
        FROM input i LEFT JOIN hit h USING (hash)
    ), sig AS (
        SELECT r.eff, r.status
        FROM resolved r
        WHERE r.status <> 'completed' AND r.eff IS NOT NULL
        ORDER BY r.eff, CASE r.status WHEN 'dlq' THEN 0 WHEN 'failed' THEN 1 ELSE 2 END
        LIMIT 1
    )
    SELECT (SELECT max(r.eff) FROM resolved r WHERE r.status = 'completed'),
           (SELECT s.eff FROM sig s),
           (SELECT s.status FROM sig s),
           ARRAY(SELECT encode(r.hash, 'hex') FROM resolved r
                 WHERE r.eff IS NULL AND r.below AND r.status = 'completed' ORDER BY r.ord),
           ARRAY(SELECT encode(r.hash, 'hex') FROM resolved r
                 WHERE r.eff IS NULL AND r.below AND r.status <> 'completed' ORDER BY r.ord),
           ARRAY(SELECT encode(r.hash, 'hex') FROM resolved r
                 WHERE r.eff IS NULL AND NOT r.below ORDER BY r.ord),
           ARRAY(SELECT r.eff FROM resolved r ORDER BY r.ord)
    INTO v_max_ok, v_sig, v_sig_status, v_noop, v_stale, v_unresolved, v_offsets;

    -- The maximum acked-ok offset, clamped below the head signal; never backward.
    v_new := COALESCE(v_max_ok, v_old);
    IF v_sig IS NOT NULL THEN
        v_new := LEAST(v_new, v_sig - 1);
    END IF;
    v_new := GREATEST(v_new, v_old);

    IF v_sig IS NULL THEN
        IF (c.batch_end IS NOT NULL AND v_new >= c.batch_end)
           OR (c.batch_end IS NULL AND v_new > v_old) THEN
            v_branch := 'completed'; v_release := true; v_reset := true;
        ELSE
            v_branch := 'partial';
        END IF;
    ELSIF v_sig_status = 'dlq' THEN
        v_branch := 'dlq'; v_dlq := true;
    ELSIF v_sig_status = 'retry' THEN
        v_branch := 'retry'; v_release := true;
    ELSIF c.batch_retry_count < v_retry_limit THEN
        v_branch := 'failed'; v_release := true; v_charge := true;
    ELSIF v_dlq_enabled THEN
        v_branch := 'failed_dlq'; v_dlq := true;
    ELSE
        v_branch := 'failed_drop'; v_release := true; v_reset := true;
        v_new := GREATEST(v_old, v_sig);
    END IF;

    IF v_new <> v_old OR v_release OR v_reset OR v_charge THEN
        UPDATE queen.log_consumers lc SET
            committed = v_new,
            batch_end = CASE WHEN v_release THEN NULL ELSE lc.batch_end END,
            worker_id = CASE WHEN v_release THEN NULL ELSE lc.worker_id END,
            lease_expires_at = CASE WHEN v_release THEN NULL ELSE lc.lease_expires_at END,
            batch_retry_count = CASE WHEN v_reset THEN 0
                                     WHEN v_charge THEN lc.batch_retry_count + 1
                                     ELSE lc.batch_retry_count END,
            attempt_count = CASE WHEN v_reset THEN 0 ELSE lc.attempt_count END,
            attempt_from = CASE WHEN v_reset THEN NULL ELSE lc.attempt_from END,
            total_consumed = lc.total_consumed + (v_new - v_old)
        WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group;
    END IF;

    RETURN jsonb_build_object(
        'ok', true, 'error', NULL, 'acked', v_new - v_old, 'committed', v_new,
        'lease_released', v_release AND c.batch_end IS NOT NULL,
        'dlq', v_dlq, 'dlq_offset', CASE WHEN v_dlq THEN v_sig END,
        'signal', v_sig_status, 'signal_offset', v_sig, 'branch', v_branch,
        'noopHashes', to_jsonb(v_noop), 'staleHashes', to_jsonb(v_stale),
        'unresolvedHashes', to_jsonb(v_unresolved), 'offsets', to_jsonb(v_offsets));
END;
$$;

-- queen.log_dlq_head_v1(partition id, group, worker, off, message id, txn, payload, error)
--   -> jsonb {ok, error, acked, committed, lease_released, dlq_id}
-- Contract: unchanged from 006_ack.sql (files the poison frame a hash-path ack handed off and
-- steps the cursor past it; see there), now through lease_live_v1 and log_cursor_advance_v1.
-- Locks: the consumer row, FOR UPDATE. Never a log_partitions row.
CREATE OR REPLACE FUNCTION queen.log_dlq_head_v1(p_partition_id uuid, p_group text, p_worker text,
                                                 p_off bigint, p_message_id uuid, p_txn text,
                                                 p_payload jsonb, p_error text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_leased boolean := COALESCE(p_worker, '') <> '';
    c queen.log_consumers;
    v_last bigint;
    v_id bigint;
    v_refusal text;
BEGIN
    SELECT * INTO c FROM queen.log_consumers lc
    WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group
    FOR UPDATE;
    IF NOT FOUND THEN
        v_refusal := CASE WHEN v_leased THEN 'invalid or expired lease' ELSE 'unknown consumer' END;
    ELSIF v_leased AND NOT (c.worker_id IS NOT DISTINCT FROM p_worker
                            AND queen.lease_live_v1(c.batch_end, c.lease_expires_at)) THEN
        v_refusal := 'invalid or expired lease';
    ELSIF p_off <= c.committed THEN
        v_refusal := 'already committed';
    ELSIF v_leased AND p_off > c.batch_end THEN
        v_refusal := 'beyond the leased batch';
    ELSIF NOT v_leased THEN
        SELECT p.last_offset INTO v_last FROM queen.log_partitions p WHERE p.id = p_partition_id;
        IF p_off > v_last THEN
            v_refusal := 'beyond the log end';
        END IF;
    END IF;
    IF v_refusal IS NOT NULL THEN
        RETURN jsonb_build_object('ok', false, 'error', v_refusal, 'acked', 0,
                                  'committed', c.committed, 'lease_released', false,
                                  'dlq_id', NULL);
    END IF;

    INSERT INTO queen.log_dlq (partition_id, consumer_group, "offset", message_id, transaction_id,
                               payload, error, retry_count)
    VALUES (p_partition_id, p_group, p_off,
            COALESCE(p_message_id, '00000000-0000-0000-0000-000000000000'::uuid),
            COALESCE(p_txn, ''), COALESCE(p_payload, 'null'::jsonb), p_error,
            c.batch_retry_count)
    ON CONFLICT (partition_id, consumer_group, "offset") DO NOTHING
    RETURNING id INTO v_id;

    PERFORM queen.log_cursor_advance_v1(p_partition_id, p_group, p_off, true);

    RETURN jsonb_build_object('ok', true, 'error', NULL, 'acked', p_off - c.committed,
                              'committed', p_off, 'lease_released', c.batch_end IS NOT NULL,
                              'dlq_id', v_id);
END;
$$;

-- queen.log_renew_lease_v1(worker, seconds) -> (renewed, expires_at)
-- Contract: unchanged from 007_lease_dlq.sql (renews every live lease of `worker`, never
-- shortening one nor reviving an expired one; see there), now through lease_live_v1.
-- Locks: the worker's consumer rows, FOR UPDATE in (partition_id, consumer_group) order, then
-- the UPDATE of exactly those rows.
CREATE OR REPLACE FUNCTION queen.log_renew_lease_v1(p_worker text, p_seconds integer,
                                                    OUT renewed bigint, OUT expires_at timestamptz)
RETURNS record
LANGUAGE plpgsql AS $$
BEGIN
    renewed := 0;
    IF p_seconds IS NULL OR p_seconds < 1 THEN
        RAISE EXCEPTION 'seconds must be a positive whole number'
            USING DETAIL = jsonb_build_object('refusal', 'argument', 'seconds', p_seconds)::text;
    END IF;
    IF p_worker IS NULL OR p_worker = '' THEN
        RETURN;
    END IF;
    PERFORM 1
    FROM queen.log_consumers c
    WHERE c.worker_id = p_worker AND queen.lease_live_v1(c.batch_end, c.lease_expires_at)
    ORDER BY c.partition_id, c.consumer_group
    FOR UPDATE;
    -- now() is the transaction start, so this matches exactly the rows locked above.
    WITH r AS (
        UPDATE queen.log_consumers c
        SET lease_expires_at = GREATEST(c.lease_expires_at,
                                        now() + make_interval(secs => p_seconds))
        WHERE c.worker_id = p_worker AND queen.lease_live_v1(c.batch_end, c.lease_expires_at)
        RETURNING c.lease_expires_at
    )
    SELECT count(*), min(r.lease_expires_at) INTO renewed, expires_at FROM r;
END;
$$;

-- queen.log_renew_lease_tenant_v1(tenant, worker, seconds) -> (renewed, expires_at)
-- Contract: unchanged from 007_lease_dlq.sql (the tenancy gate in front of
-- log_renew_lease_v1; see there), now through lease_live_v1.
-- Locks: none for the gate; then those of log_renew_lease_v1.
CREATE OR REPLACE FUNCTION queen.log_renew_lease_tenant_v1(p_tenant uuid, p_worker text,
                                                           p_seconds integer,
                                                           OUT renewed bigint,
                                                           OUT expires_at timestamptz)
RETURNS record
LANGUAGE sql AS $$
    SELECT r.renewed, r.expires_at
    FROM queen.log_renew_lease_v1(
        CASE WHEN EXISTS (SELECT 1
                          FROM queen.log_consumers c
                          JOIN queen.log_partitions p ON p.id = c.partition_id
                          JOIN queen.queues q ON q.id = p.queue_id
                          WHERE c.worker_id = p_worker
                            AND queen.lease_live_v1(c.batch_end, c.lease_expires_at)
                            AND q.tenant_id = p_tenant)
             THEN p_worker END,
        p_seconds) AS r
$$;

-- queen.log_transaction_refuse_v1(detail jsonb, duplicate boolean) -> never returns
-- Contract: raises the transaction wire's refusal: message 'transaction refused', DETAIL the
-- refusal object (see the head of this file), SQLSTATE unique_violation for a duplicate push
-- and raise_exception (P0001) otherwise. The raise rolls back the whole transaction.
-- Locks: none.
CREATE FUNCTION queen.log_transaction_refuse_v1(p_detail jsonb, p_duplicate boolean)
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

-- queen.log_transaction_wire_v1(payload jsonb) -> jsonb
-- Contract: unchanged from 009_transaction.sql (all or nothing; payload and answer shapes
-- there), except that refusals carry their facts in DETAIL (log_transaction_refuse_v1) instead
-- of in the message. Required leases are checked with lease_live_v1.
-- Locks, in the one total order: provisioning, then partition rows ascending by id (inside
-- log_push_v1), then consumer rows ascending by (partition_id, group): when leases are required,
-- one sorted SELECT ... FOR UPDATE takes the consumer rows of those leases together with the
-- existing rows of every ack element; the ack elements are then processed in that same order.
CREATE OR REPLACE FUNCTION queen.log_transaction_wire_v1(p_payload jsonb)
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

-- queen.log_transaction_ack_refuse_v1(ack element, reason, hash) -> never returns
-- Contract: raises the refusal of one ack element of the transaction wire:
-- {"refusal": "ack", "ordinal", "reason", "hash"} (P0001).
-- Locks: none.
CREATE FUNCTION queen.log_transaction_ack_refuse_v1(a jsonb, p_reason text, p_hash text)
RETURNS void
LANGUAGE sql AS $$
    SELECT queen.log_transaction_refuse_v1(
        jsonb_build_object('refusal', 'ack', 'ordinal', (a ->> 'ordinal')::integer,
                           'reason', p_reason, 'hash', p_hash), false)
$$;

-- queen.log_transaction_ack_v1(tenant, ack jsonb) -> the ack procedure's answer
-- Contract: unchanged from 009_transaction.sql (one ack element of log_transaction_wire_v1),
-- except that a refusal raises {"refusal": "ack", ...} in DETAIL, naming the first offending
-- hash when the refusal is about one position.
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

-- The v1 pop path of 004_pop.sql, superseded by log_pop_multi_v1 / log_pop_wildcard_v2 (012)
-- and no longer called by the broker. Dropped callers first.
DROP FUNCTION queen.log_pop_discover_v1(uuid, text, text, text, text, integer, integer, integer,
                                        boolean, boolean);
DROP FUNCTION queen.log_pop_wildcard_v1(uuid, text, text, text, integer, integer, integer,
                                        boolean, boolean);
DROP FUNCTION queen.log_pop_v1(uuid, text, text, text, text, integer, integer, boolean, boolean);
DROP FUNCTION queen.log_pop_claim_v1(uuid[], text, text, integer, integer, integer, boolean,
                                     boolean);
DROP FUNCTION queen.log_pop_candidates_v1(uuid[], text, boolean);
DROP FUNCTION queen.log_lease_span_v1(uuid, text, text, integer, integer, boolean, boolean);
