-- 014: a DLQ that can file whatever a push accepted (issue 15).
--
-- 1. `log_dlq.payload` becomes `json` (was `jsonb`): `json` keeps the payload's text as sent
--    (number digits, key order, whitespace, escapes) and accepts a `\u0000` escape inside a
--    string, which `jsonb` refuses (SQLSTATE 22P05) - a refusal that used to keep the lease and
--    jam the partition. The broker passes and reads the text (`::text`), byte for byte.
-- 2. The (partition_id, transaction_id) btree could not hold a long incompressible transactionId
--    (SQLSTATE 54000, a push accepts up to 65535 bytes). It becomes a hash index on
--    transaction_id, which stores a 4-byte hash whatever the key's length; lookups still filter
--    by partition.
-- 3. log_dlq_head_v1 (jsonb payload) is replaced by log_dlq_head_v2 (json payload); the list and
--    fetch functions answer the payload as json. Contracts otherwise unchanged.

ALTER TABLE queen.log_dlq ALTER COLUMN payload TYPE json USING payload::json;

DROP INDEX queen.log_dlq_txn_idx;
CREATE INDEX log_dlq_txn_idx ON queen.log_dlq USING hash (transaction_id);

DROP FUNCTION queen.log_dlq_head_v1(uuid, text, text, bigint, uuid, text, jsonb, text);

-- queen.log_dlq_head_v2(partition id, group, worker, off, message id, txn, payload, error)
--   -> jsonb {ok, error, acked, committed, lease_released, dlq_id}
-- Contract: that of log_dlq_head_v1 (013_structured_refusals.sql), the payload being the json
-- text of the frame as pushed (null stored as JSON null).
-- Locks: the consumer row, FOR UPDATE. Never a log_partitions row.
CREATE FUNCTION queen.log_dlq_head_v2(p_partition_id uuid, p_group text, p_worker text,
                                      p_off bigint, p_message_id uuid, p_txn text,
                                      p_payload json, p_error text)
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
            COALESCE(p_txn, ''), COALESCE(p_payload, 'null'::json), p_error,
            c.batch_retry_count)
    ON CONFLICT (partition_id, consumer_group, "offset") DO NOTHING
    RETURNING id INTO v_id;

    PERFORM queen.log_cursor_advance_v1(p_partition_id, p_group, p_off, true);

    RETURN jsonb_build_object('ok', true, 'error', NULL, 'acked', p_off - c.committed,
                              'committed', p_off, 'lease_released', c.batch_end IS NOT NULL,
                              'dlq_id', v_id);
END;
$$;

-- queen.log_dlq_list_v1: contract unchanged from 007_lease_dlq.sql; the payload is json.
-- Locks: none.
DROP FUNCTION queen.log_dlq_list_v1(uuid, text, text, text, integer, bigint);
CREATE FUNCTION queen.log_dlq_list_v1(p_tenant uuid, p_queue text, p_group text,
                                      p_partition text, p_limit integer, p_offset bigint)
RETURNS TABLE (id bigint, queue_name text, partition_name text, partition_id uuid,
               consumer_group text, "offset" bigint, message_id uuid, transaction_id text,
               payload json, error text, retry_count integer, failed_at timestamptz,
               total bigint)
LANGUAGE sql STABLE AS $$
    WITH matching AS (
        SELECT d.id, q.name AS queue_name, p.name AS partition_name, d.partition_id,
               d.consumer_group, d."offset", d.message_id, d.transaction_id, d.payload, d.error,
               d.retry_count, d.failed_at
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
           pg."offset", pg.message_id, pg.transaction_id, pg.payload, pg.error, pg.retry_count,
           pg.failed_at, c.total
    FROM counted c
    LEFT JOIN page pg ON true
    ORDER BY pg.id
$$;

-- queen.log_dlq_fetch_v1: contract unchanged from 007_lease_dlq.sql; the payload is json.
-- Locks: none.
DROP FUNCTION queen.log_dlq_fetch_v1(uuid, uuid, text, text);
CREATE FUNCTION queen.log_dlq_fetch_v1(p_tenant uuid, p_pid uuid, p_txn text, p_group text)
RETURNS TABLE (id bigint, queue_name text, partition_name text, consumer_group text,
               "offset" bigint, message_id uuid, payload json)
LANGUAGE sql STABLE AS $$
    SELECT d.id, q.name, p.name, d.consumer_group, d."offset", d.message_id, d.payload
    FROM queen.log_dlq d
    JOIN queen.log_partitions p ON p.id = d.partition_id
    JOIN queen.queues q ON q.id = p.queue_id
    WHERE d.partition_id = p_pid
      AND d.transaction_id = p_txn
      AND (p_group IS NULL OR d.consumer_group = p_group)
      AND q.tenant_id = p_tenant
    ORDER BY d."offset", d.id
$$;
