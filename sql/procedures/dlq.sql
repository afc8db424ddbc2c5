-- dlq.sql: the dead-letter queue: filing a poison message, listing, fetching for retry,
-- deleting.
--
-- Filing (log_dlq_head_v3) locks the consumer row it steps past the poison frame, like an ack.
-- The other helpers never lock a partition or consumer row: they read or delete `queen.log_dlq`
-- rows, always scoped to a tenant through log_partitions -> queues. A DLQ row keeps a snapshot
-- of the payload (json text as pushed, or sealed for an encrypted queue): retention never
-- reaches it.

-- queen.log_dlq_head_v3(partition id, group, worker, off, message id, txn, payload, sealed,
--                       error) -> jsonb {ok, error, acked, committed, lease_released, dlq_id}
-- Contract: files the poison frame `off` that log_ack_by_hash_v1 handed off (dlq = true) and
-- steps the cursor past it. Under the validated lease (worker match and lease_live_v1; for a
-- lease-less caller no lease check) and provided `off` is not committed yet and lies inside the
-- leased batch (lease-less: at or below last_offset), it inserts the queen.log_dlq row
-- (payload SNAPSHOT: the json text of the frame as pushed, a null payload stored as JSON null;
-- `sealed` says the payload is the sealed form of an encrypted queue's frame, a JSON string the
-- broker opens, stored as given; a null message id as the nil UUID; retry_count = the
-- batch_retry_count consumed), sets committed := GREATEST(committed, off), resets retry/attempt
-- state and releases the lease (log_cursor_advance_v1). Otherwise it changes nothing and
-- answers ok = false with the reason ('invalid or expired lease', 'already committed', 'beyond
-- the leased batch', 'beyond the log end'). A second call for the same hand-off therefore fails
-- harmlessly: the first released the lease (leased) or committed `off` (lease-less).
-- Locks: the consumer row, FOR UPDATE. Never a log_partitions row.
CREATE OR REPLACE FUNCTION queen.log_dlq_head_v3(p_partition_id uuid, p_group text, p_worker text,
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

-- queen.log_dlq_list_v2(tenant, queue, group, partition, limit, offset) -> one page of DLQ rows
-- Contract: the tenant's DLQ rows, optionally filtered by queue name, consumer group
-- ('__QUEUE_MODE__' selects queue mode) and partition name (a null filter matches all), oldest
-- filing first (by id, so paging is stable), `limit` rows after skipping `offset`, with the
-- message's identity and `sealed` (the broker builds Queen's JSON shape from the columns).
-- Every row carries `total`, the number of rows matching the filters regardless of paging; the
-- answer always holds at least one row: when the page is empty, a single row of NULLs but
-- `total`. Count and page come from one statement, hence one snapshot.
-- Locks: none.
CREATE OR REPLACE FUNCTION queen.log_dlq_list_v2(p_tenant uuid, p_queue text, p_group text,
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

-- queen.log_dlq_fetch_v2(tenant, partition id, transactionId, group) -> the DLQ rows a retry
-- replays
-- Contract: the DLQ rows of (partition, transactionId) on a partition of `tenant`, optionally
-- only those of one consumer group (null = every group), with the queue and partition names a
-- re-push needs, the payload as filed (json text) and whether it is sealed, in offset then id
-- order. A foreign or unknown partition returns no row.
-- Locks: none (the retry deletes by the ids returned here, after its re-push committed).
CREATE OR REPLACE FUNCTION queen.log_dlq_fetch_v2(p_tenant uuid, p_pid uuid, p_txn text,
                                                  p_group text)
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

-- queen.log_dlq_delete_v1(tenant, partition id, transactionId, group) -> rows deleted
-- Contract: deletes the DLQ rows of (partition, transactionId) on a partition of `tenant`,
-- optionally only those of one consumer group (null = every group). 0 when none matched,
-- including for a foreign partition.
-- Locks: the deleted log_dlq rows.
CREATE OR REPLACE FUNCTION queen.log_dlq_delete_v1(p_tenant uuid, p_pid uuid, p_txn text,
                                                   p_group text)
RETURNS bigint
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM queen.log_dlq d
        USING queen.log_partitions p, queen.queues q
        WHERE d.partition_id = p_pid
          AND d.transaction_id = p_txn
          AND (p_group IS NULL OR d.consumer_group = p_group)
          AND p.id = d.partition_id
          AND q.id = p.queue_id
          AND q.tenant_id = p_tenant
        RETURNING 1
    )
    SELECT count(*) FROM gone
$$;

-- queen.log_dlq_delete_ids_v1(tenant, partition id, ids[]) -> rows deleted
-- Contract: deletes the given DLQ rows (the ones a retry fetched and re-pushed), still scoped
-- to a partition of `tenant`. Rows already gone (a concurrent retry or delete) are not counted.
-- Locks: the deleted log_dlq rows.
CREATE OR REPLACE FUNCTION queen.log_dlq_delete_ids_v1(p_tenant uuid, p_pid uuid, p_ids bigint[])
RETURNS bigint
LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM queen.log_dlq d
        USING queen.log_partitions p, queen.queues q
        WHERE d.id = ANY (p_ids)
          AND d.partition_id = p_pid
          AND p.id = d.partition_id
          AND q.id = p.queue_id
          AND q.tenant_id = p_tenant
        RETURNING 1
    )
    SELECT count(*) FROM gone
$$;
