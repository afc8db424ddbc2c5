-- 017_queue_resources.sql: maxSize on push, sealed (encrypted) DLQ payloads, the DLQ listing in
-- Queen's shape, and the queue resources routes (issue 16, wire.md "Queues", "Dead letters",
-- "Queue resources").
--
-- 1. maxSize: a queue's depth is its unconsumed messages in queue mode (per partition, the
--    offsets after the `__QUEUE_MODE__` cursor, or after `log_start - 1` when retention moved
--    past it). A push that would take a queue with `max_size > 0` above it writes nothing of
--    that queue: log_push_v2 (one request, all or nothing) raises the refusal, the fused
--    log_push_multi_v2 answers it for the segment (`full_refusal`), the transaction wire
--    (log_transaction_wire_v2, through log_push_v2) rolls back. Pushes to such a queue
--    serialise on its row (FOR NO KEY UPDATE), so two concurrent pushes cannot both pass the
--    check; queues without a limit take no such lock.
-- 2. `log_dlq.sealed`: the payload of a DLQ row filed from an encrypted queue is kept sealed
--    (a JSON string holding the base64 of nonce || ciphertext || tag); only the broker opens it,
--    on listing and on replay.
-- 3. The listing answers the message's identity and the page in Queen's shape (the broker
--    builds the JSON; this function gives the columns).
-- 4. Queue resources: list, detail and delete (the sidecar and the DLQ have no foreign keys,
--    so delete purges them explicitly).
--
-- Lock order (storage.md) gains one step: provisioning, then the rows of queues with a
-- maxSize (ascending by id, only in pushes), then partition rows ascending by id, then consumer
-- rows ascending by (partition id, group). Queue deletion follows the same order.

ALTER TABLE queen.log_dlq ADD COLUMN sealed boolean NOT NULL DEFAULT false;

-- queen.log_queue_depth_v1(queue id) -> bigint
-- Contract: the queue's unconsumed messages in queue mode: summed over its partitions, the
-- offsets after GREATEST(the `__QUEUE_MODE__` cursor, log_start - 1) up to last_offset.
-- Locks: none (reads committed state; the push path calls it under the queue row lock).
CREATE FUNCTION queen.log_queue_depth_v1(p_queue uuid)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(sum(GREATEST(0, p.last_offset
                                   - GREATEST(COALESCE(c.committed, -1), p.log_start - 1))), 0)::bigint
    FROM queen.log_partitions p
    LEFT JOIN queen.log_consumers c
           ON c.partition_id = p.id AND c.consumer_group = '__QUEUE_MODE__'
    WHERE p.queue_id = p_queue
$$;

-- queen.log_max_size_lock_v1(queue ids[]) -> void
-- Contract: locks the row of every listed queue whose max_size > 0, so that the pushes to one
-- limited queue check and write one after the other. Queues without a limit are not locked.
-- Locks: those queue rows, FOR NO KEY UPDATE, one at a time ascending by id (called after
-- provisioning and before any partition row lock).
CREATE FUNCTION queen.log_max_size_lock_v1(p_qids uuid[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_qid uuid;
BEGIN
    FOR v_qid IN SELECT DISTINCT x FROM unnest(p_qids) AS x WHERE x IS NOT NULL ORDER BY x LOOP
        PERFORM 1 FROM queen.queues q WHERE q.id = v_qid AND q.max_size > 0
        FOR NO KEY UPDATE;
    END LOOP;
END;
$$;

-- queen.log_max_size_refusal_v1(queue id, adding) -> jsonb or NULL
-- Contract: NULL when the queue has no limit or `adding` more messages keep its depth at or
-- under max_size; else the refusal {"refusal": "queue_full", "queue", "maxSize", "depth",
-- "pushing"}.
-- Locks: none; the caller holds the queue row lock (log_max_size_lock_v1).
CREATE FUNCTION queen.log_max_size_refusal_v1(p_qid uuid, p_adding bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_name text;
    v_max bigint;
    v_depth bigint;
BEGIN
    SELECT q.name, q.max_size INTO v_name, v_max FROM queen.queues q WHERE q.id = p_qid;
    IF NOT FOUND OR v_max <= 0 OR p_adding <= 0 THEN
        RETURN NULL;
    END IF;
    v_depth := queen.log_queue_depth_v1(p_qid);
    IF v_depth + p_adding <= v_max THEN
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('refusal', 'queue_full', 'queue', v_name, 'maxSize', v_max,
                              'depth', v_depth, 'pushing', p_adding);
END;
$$;

-- queen.log_push_v2(tenant, queues[], partitions[], hashes[], blobs[]) -> one row per group
-- Contract: that of log_push_v1 (003_push.sql), plus maxSize: once no group holds a duplicate,
-- the groups of each queue with a limit are counted together against it, and when any queue
-- would exceed its limit the call raises 'queue full' (SQLSTATE P0001) with DETAIL the refusal
-- of log_max_size_refusal_v1 (first such queue by id): the whole transaction rolls back,
-- provisioning included, so nothing of the request is written.
-- Locks: provisioning first; then the rows of limited queues ascending by id (FOR NO KEY
-- UPDATE); then partition rows ascending by id (FOR UPDATE).
CREATE FUNCTION queen.log_push_v2(p_tenant uuid, p_queues text[], p_partitions text[],
                                  p_hashes bytea[], p_blobs bytea[])
RETURNS TABLE (ordinal integer, partition_id uuid, base_offset bigint, written boolean,
               dup_index integer[], dup_offset bigint[], dup_first integer[])
LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(array_length(p_queues, 1), 0);
    v_pids uuid[] := '{}';
    v_qids uuid[] := '{}';
    v_windows integer[] := '{}';
    v_bases bigint[];
    v_any_dup boolean := false;
    v_order integer[];
    v_txns_start bigint;
    v_last bigint;
    v_count integer;
    v_probe record;
    v_qid uuid;
    v_full jsonb;
    i integer;
BEGIN
    FOR i IN 1 .. n LOOP
        v_qid := queen.provision_queue_v1(p_tenant, p_queues[i]);
        v_qids := v_qids || v_qid;
        v_pids := v_pids || queen.provision_partition_v1(v_qid, p_partitions[i]);
        v_windows := v_windows || (SELECT q.dedup_window_seconds FROM queen.queues q
                                   WHERE q.id = v_qid);
    END LOOP;
    v_bases := array_fill(NULL::bigint, ARRAY[n]);
    PERFORM queen.log_max_size_lock_v1(v_qids);

    -- Lock order: partition rows ascending by id.
    SELECT array_agg(o ORDER BY v_pids[o], o) INTO v_order FROM generate_series(1, n) AS o;
    FOR i IN SELECT unnest(v_order) LOOP
        SELECT p.txns_start INTO v_txns_start
        FROM queen.log_partitions p WHERE p.id = v_pids[i] FOR UPDATE;
        SELECT * INTO v_probe
        FROM queen.log_dedup_probe_v1(v_pids[i], v_txns_start, v_windows[i], p_hashes[i]);
        IF v_probe.dup_index IS NOT NULL THEN
            v_any_dup := true;
            ordinal := i; partition_id := v_pids[i]; base_offset := NULL; written := false;
            dup_index := v_probe.dup_index; dup_offset := v_probe.dup_offset;
            dup_first := v_probe.dup_first;
            RETURN NEXT;
        END IF;
    END LOOP;
    IF v_any_dup THEN
        RETURN;
    END IF;

    SELECT r INTO v_full
    FROM (SELECT queen.log_max_size_refusal_v1(v_qids[o], sum(length(p_hashes[o]) / 16)) AS r,
                 v_qids[o] AS qid
          FROM generate_series(1, n) AS o
          GROUP BY v_qids[o]) AS x
    WHERE x.r IS NOT NULL
    ORDER BY x.qid
    LIMIT 1;
    IF v_full IS NOT NULL THEN
        RAISE EXCEPTION 'queue full' USING DETAIL = v_full::text;
    END IF;

    FOR i IN SELECT unnest(v_order) LOOP
        v_count := length(p_hashes[i]) / 16;
        UPDATE queen.log_partitions p SET last_offset = p.last_offset + v_count
        WHERE p.id = v_pids[i]
        RETURNING p.last_offset INTO v_last;
        v_bases[i] := v_last - v_count + 1;
        INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, blob)
        VALUES (v_pids[i], v_bases[i], v_last, p_blobs[i]);
        INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, hashes, deduped)
        VALUES (v_pids[i], v_bases[i], v_last, p_hashes[i], v_windows[i] > 0);
    END LOOP;

    FOR i IN 1 .. n LOOP
        ordinal := i; partition_id := v_pids[i]; base_offset := v_bases[i]; written := true;
        dup_index := NULL; dup_offset := NULL; dup_first := NULL;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- queen.log_push_multi_v2(tenants[], queues[], partitions[], hashes[], blobs[])
--   -> one row per input segment, by input ordinal
-- Contract: that of log_push_multi_v1 (011_push_multi.sql), plus maxSize: a segment without
-- duplicates whose queue's depth (counting the segments this call already wrote) plus its
-- frames would exceed the queue's max_size is NOT written and comes back with written = false,
-- no duplicates and `full_refusal` = the refusal of log_max_size_refusal_v1. The broker sends
-- the pushes of limited queues through log_push_v2 (all or nothing per request); this answer
-- keeps the limit exact when its view of a queue's options is stale.
-- Locks: provisioning first, in (tenant, queue, partition) name order; then the rows of
-- limited queues ascending by id (FOR NO KEY UPDATE); then every partition row, ascending by
-- id (FOR UPDATE), all before the first probe.
CREATE FUNCTION queen.log_push_multi_v2(p_tenants uuid[], p_queues text[], p_partitions text[],
                                        p_hashes bytea[], p_blobs bytea[])
RETURNS TABLE (ordinal integer, partition_id uuid, written boolean, base_offset bigint,
               created_at timestamptz, dup_index integer[], dup_offset bigint[],
               dup_first integer[], full_refusal jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(array_length(p_queues, 1), 0);
    v_pids uuid[];
    v_qids uuid[];
    v_full jsonb;
    v_windows integer[];
    v_starts bigint[];
    v_start bigint;
    v_qid uuid;
    v_probe record;
    v_count integer;
    v_last bigint;
    i integer;
BEGIN
    IF n = 0 THEN
        RETURN;
    END IF;
    v_pids := array_fill(NULL::uuid, ARRAY[n]);
    v_qids := array_fill(NULL::uuid, ARRAY[n]);
    v_windows := array_fill(NULL::integer, ARRAY[n]);
    v_starts := array_fill(NULL::bigint, ARRAY[n]);

    FOR i IN SELECT o FROM generate_series(1, n) AS o
             ORDER BY p_tenants[o], p_queues[o], p_partitions[o], o LOOP
        v_qid := queen.provision_queue_v1(p_tenants[i], p_queues[i]);
        v_pids[i] := queen.provision_partition_v1(v_qid, p_partitions[i]);
        v_qids[i] := v_qid;
        v_windows[i] := (SELECT q.dedup_window_seconds FROM queen.queues q WHERE q.id = v_qid);
    END LOOP;

    -- Lock order: the rows of queues with a maxSize ascending by id, then partition rows
    -- ascending by id, one at a time (never a set-based lock).
    PERFORM queen.log_max_size_lock_v1(v_qids);
    FOR i IN SELECT o FROM generate_series(1, n) AS o ORDER BY v_pids[o], o LOOP
        SELECT p.txns_start INTO v_start
        FROM queen.log_partitions p WHERE p.id = v_pids[i] FOR UPDATE;
        v_starts[i] := v_start;
    END LOOP;

    FOR i IN 1 .. n LOOP
        ordinal := i;
        partition_id := v_pids[i];
        full_refusal := NULL;
        SELECT * INTO v_probe
        FROM queen.log_dedup_probe_v1(v_pids[i], v_starts[i], v_windows[i], p_hashes[i]);
        v_full := CASE WHEN v_probe.dup_index IS NULL
                       THEN queen.log_max_size_refusal_v1(v_qids[i], length(p_hashes[i]) / 16)
                  END;
        IF v_probe.dup_index IS NOT NULL THEN
            written := false; base_offset := NULL; created_at := NULL;
            dup_index := v_probe.dup_index; dup_offset := v_probe.dup_offset;
            dup_first := v_probe.dup_first;
        ELSIF v_full IS NOT NULL THEN
            written := false; base_offset := NULL; created_at := NULL;
            dup_index := NULL; dup_offset := NULL; dup_first := NULL;
            full_refusal := v_full;
        ELSE
            v_count := length(p_hashes[i]) / 16;
            UPDATE queen.log_partitions p SET last_offset = p.last_offset + v_count
            WHERE p.id = v_pids[i]
            RETURNING p.last_offset INTO v_last;
            INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, blob)
            VALUES (v_pids[i], v_last - v_count + 1, v_last, p_blobs[i]);
            INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, hashes, deduped)
            VALUES (v_pids[i], v_last - v_count + 1, v_last, p_hashes[i], v_windows[i] > 0);
            written := true; base_offset := v_last - v_count + 1; created_at := now();
            dup_index := NULL; dup_offset := NULL; dup_first := NULL;
        END IF;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- queen.log_transaction_wire_v2(payload jsonb) -> jsonb
-- Contract: that of log_transaction_wire_v1 (009_transaction.sql, 013_structured_refusals.sql),
-- its push groups going through log_push_v2: a push that would take a queue above its maxSize
-- raises 'queue full' with the refusal {"refusal": "queue_full", "queue", "maxSize", "depth",
-- "pushing"} in DETAIL, rolling everything back.
-- Locks, in the one total order: provisioning, then the rows of limited queues and the
-- partition rows (inside log_push_v2), then consumer rows ascending by (partition_id, group).
CREATE FUNCTION queen.log_transaction_wire_v2(p_payload jsonb)
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
-- queen.log_dlq_head_v3(partition id, group, worker, off, message id, txn, payload, sealed,
--                       error) -> jsonb {ok, error, acked, committed, lease_released, dlq_id}
-- Contract: that of log_dlq_head_v2 (014_reliability.sql); `sealed` says the payload is the
-- sealed form of an encrypted queue's frame (a JSON string the broker opens), stored as given.
-- Locks: the consumer row, FOR UPDATE. Never a log_partitions row.
CREATE FUNCTION queen.log_dlq_head_v3(p_partition_id uuid, p_group text, p_worker text,
                                      p_off bigint, p_message_id uuid, p_txn text,
                                      p_payload json, p_sealed boolean, p_error text)
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
                               payload, sealed, error, retry_count)
    VALUES (p_partition_id, p_group, p_off,
            COALESCE(p_message_id, '00000000-0000-0000-0000-000000000000'::uuid),
            COALESCE(p_txn, ''), COALESCE(p_payload, 'null'::json), COALESCE(p_sealed, false), p_error,
            c.batch_retry_count)
    ON CONFLICT (partition_id, consumer_group, "offset") DO NOTHING
    RETURNING id INTO v_id;

    PERFORM queen.log_cursor_advance_v1(p_partition_id, p_group, p_off, true);

    RETURN jsonb_build_object('ok', true, 'error', NULL, 'acked', p_off - c.committed,
                              'committed', p_off, 'lease_released', c.batch_end IS NOT NULL,
                              'dlq_id', v_id);
END;
$$;

DROP FUNCTION queen.log_dlq_head_v2(uuid, text, text, bigint, uuid, text, json, text);
DROP FUNCTION queen.log_transaction_wire_v1(jsonb);
DROP FUNCTION queen.log_push_v1(uuid, text[], text[], bytea[], bytea[]);
DROP FUNCTION queen.log_push_multi_v1(uuid[], text[], text[], bytea[], bytea[]);

-- queen.log_dlq_list_v2(tenant, queue, group, partition, limit, offset) -> one row per DLQ row
-- of the page, plus `total` (the count of all matching rows) on every row; a page past the end
-- is one row of NULLs but `total`.
-- Contract: that of log_dlq_list_v1 (007_lease_dlq.sql, 014_reliability.sql), with `sealed`.
-- Ordered by filing (row id), so paging is stable.
-- Locks: none.
DROP FUNCTION queen.log_dlq_list_v1(uuid, text, text, text, integer, bigint);
CREATE FUNCTION queen.log_dlq_list_v2(p_tenant uuid, p_queue text, p_group text,
                                      p_partition text, p_limit integer, p_offset bigint)
RETURNS TABLE (id bigint, queue_name text, partition_name text, partition_id uuid,
               consumer_group text, "offset" bigint, message_id uuid, transaction_id text,
               payload json, sealed boolean, error text, retry_count integer,
               failed_at timestamptz, total bigint)
LANGUAGE sql STABLE AS $$
    WITH matching AS (
        SELECT d.id, q.name AS queue_name, p.name AS partition_name, d.partition_id,
               d.consumer_group, d."offset", d.message_id, d.transaction_id, d.payload, d.sealed,
               d.error, d.retry_count, d.failed_at
        FROM queen.queues q
        JOIN queen.log_partitions p ON p.queue_id = q.id
        JOIN queen.log_dlq d ON d.partition_id = p.id
        WHERE q.tenant_id = p_tenant
          AND (p_queue IS NULL OR q.name = p_queue)
          AND (p_partition IS NULL OR p.name = p_partition)
          AND (p_group IS NULL OR d.consumer_group = p_group)
    ), counted AS (
        SELECT count(*) AS total FROM matching
    ), page AS (
        SELECT * FROM matching m ORDER BY m.id LIMIT p_limit OFFSET p_offset
    )
    SELECT pg.id, pg.queue_name, pg.partition_name, pg.partition_id, pg.consumer_group,
           pg."offset", pg.message_id, pg.transaction_id, pg.payload, pg.sealed, pg.error,
           pg.retry_count, pg.failed_at, c.total
    FROM counted c
    LEFT JOIN page pg ON true
    ORDER BY pg.id
$$;

-- queen.log_dlq_fetch_v2(tenant, partition id, txn, group) -> the DLQ rows a retry replays
-- Contract: that of log_dlq_fetch_v1 (014_reliability.sql), with `sealed`.
-- Locks: none.
DROP FUNCTION queen.log_dlq_fetch_v1(uuid, uuid, text, text);
CREATE FUNCTION queen.log_dlq_fetch_v2(p_tenant uuid, p_pid uuid, p_txn text, p_group text)
RETURNS TABLE (id bigint, queue_name text, partition_name text, consumer_group text,
               "offset" bigint, message_id uuid, payload json, sealed boolean)
LANGUAGE sql STABLE AS $$
    SELECT d.id, q.name, p.name, d.consumer_group, d."offset", d.message_id, d.payload, d.sealed
    FROM queen.log_dlq d
    JOIN queen.log_partitions p ON p.id = d.partition_id
    JOIN queen.queues q ON q.id = p.queue_id
    WHERE d.partition_id = p_pid
      AND d.transaction_id = p_txn
      AND (p_group IS NULL OR d.consumer_group = p_group)
      AND q.tenant_id = p_tenant
    ORDER BY d."offset", d.id
$$;

-- queen.log_queues_list_v1(tenant, name) -> one row per queue of the tenant (only `name` when
-- given), by name: the queue row, its partition count and its depth (log_queue_depth_v1).
-- Locks: none.
CREATE FUNCTION queen.log_queues_list_v1(p_tenant uuid, p_name text)
RETURNS TABLE (queue queen.queues, partitions bigint, depth bigint)
LANGUAGE sql STABLE AS $$
    SELECT q, (SELECT count(*) FROM queen.log_partitions p WHERE p.queue_id = q.id),
           queen.log_queue_depth_v1(q.id)
    FROM queen.queues q
    WHERE q.tenant_id = p_tenant AND (p_name IS NULL OR q.name = p_name)
    ORDER BY q.name
$$;

-- queen.log_queue_partitions_v1(queue id) -> one row per (partition, consumer row), by
-- partition name then group: the partition's name, id, last offset and depth in queue mode,
-- and per consumer group (NULL when the partition has no consumer row) its cursor and whether
-- its lease is live.
-- Locks: none.
CREATE FUNCTION queen.log_queue_partitions_v1(p_queue uuid)
RETURNS TABLE (name text, id uuid, last_offset bigint, depth bigint, consumer_group text,
               committed bigint, leased boolean)
LANGUAGE sql STABLE AS $$
    SELECT p.name, p.id, p.last_offset,
           GREATEST(0, p.last_offset - GREATEST(COALESCE(qm.committed, -1), p.log_start - 1)),
           c.consumer_group, c.committed,
           CASE WHEN c.partition_id IS NULL THEN NULL
                ELSE queen.lease_live_v1(c.batch_end, c.lease_expires_at) END
    FROM queen.log_partitions p
    LEFT JOIN queen.log_consumers qm
           ON qm.partition_id = p.id AND qm.consumer_group = '__QUEUE_MODE__'
    LEFT JOIN queen.log_consumers c ON c.partition_id = p.id
    WHERE p.queue_id = p_queue
    ORDER BY p.name, c.consumer_group
$$;

-- queen.log_queue_delete_v1(tenant, name) -> uuid[]: the deleted partitions' ids (empty for a
-- queue without partitions), NULL when the tenant has no such queue
-- Contract: deletes the queue with everything of it: DLQ rows, sidecar rows, segments, consumer
-- rows, `log_groups` rows, partitions and the queue row. The DLQ, the sidecar, the segments and
-- the consumers have no foreign key to the partition, so they are purged explicitly, before the
-- queue row whose deletion cascades to partitions and groups. A push or pop racing the
-- deletion either committed before it (and is deleted with the queue) or runs after it (and
-- provisions a new, empty queue of that name).
-- Locks, in the one total order: the queue row (FOR UPDATE), then its partition rows ascending
-- by id (FOR UPDATE: waits for pushes in flight), then its consumer rows ascending by
-- (partition id, group) (FOR UPDATE: waits for acks and pops in flight).
CREATE FUNCTION queen.log_queue_delete_v1(p_tenant uuid, p_name text)
RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
    v_qid uuid;
    v_pids uuid[];
BEGIN
    SELECT q.id INTO v_qid FROM queen.queues q
    WHERE q.tenant_id = p_tenant AND q.name = p_name
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT COALESCE(array_agg(x.id ORDER BY x.id), '{}') INTO v_pids
    FROM (SELECT p.id FROM queen.log_partitions p WHERE p.queue_id = v_qid
          ORDER BY p.id FOR UPDATE) AS x;
    PERFORM 1 FROM queen.log_consumers c WHERE c.partition_id = ANY (v_pids)
    ORDER BY c.partition_id, c.consumer_group FOR UPDATE;

    DELETE FROM queen.log_dlq d WHERE d.partition_id = ANY (v_pids);
    DELETE FROM queen.log_txns t WHERE t.partition_id = ANY (v_pids);
    DELETE FROM queen.log_segments s WHERE s.partition_id = ANY (v_pids);
    DELETE FROM queen.log_consumers c WHERE c.partition_id = ANY (v_pids);
    DELETE FROM queen.queues q WHERE q.id = v_qid;
    RETURN v_pids;
END;
$$;

-- queen.queue_meta_v1(tenant, names[]) -> the push-relevant options of those queues that exist
-- Contract: one row per existing queue among `names`: its max_size and encryption_enabled (the
-- broker keeps them briefly to choose how to pack and route a push; the maxSize verdict itself
-- is always taken under the queue row lock by the push procedures).
-- Locks: none.
CREATE FUNCTION queen.queue_meta_v1(p_tenant uuid, p_names text[])
RETURNS TABLE (name text, max_size bigint, encryption_enabled boolean)
LANGUAGE sql STABLE AS $$
    SELECT q.name, q.max_size, q.encryption_enabled
    FROM queen.queues q
    WHERE q.tenant_id = p_tenant AND q.name = ANY (p_names)
$$;
