-- 007_lease_dlq.sql: lease renewal and the dead-letter helpers (list, fetch for retry, delete).
--
-- Renewal takes consumer row locks only, in (partition_id, consumer_group) order, the last step
-- of the lock order everywhere (provisioning, partition rows by id, consumer rows by
-- (partition id, group)). The DLQ helpers never lock a partition or consumer row: they read or
-- delete `queen.log_dlq` rows, always scoped to a tenant through log_partitions -> queues.
--
-- `worker_id` deliberately has no index: it changes on every pop and ack, and indexing it would
-- make those updates non-HOT on the hottest table. Renewal is rare (one call per lease every
-- few seconds at most) and scans queen.log_consumers, which holds one row per
-- (partition, group).

-- queen.log_renew_lease_v1(worker, seconds) -> (renewed, expires_at)
-- Contract: renews EVERY live lease (batch_end set, lease_expires_at > now()) held by `worker`
-- (a multi-partition pop shares one worker id) to GREATEST(lease_expires_at, now() + seconds),
-- so renewing never shortens a lease and never revives an expired one. Returns how many leases
-- were renewed and the earliest new expiry among them (null when none). A null or empty worker
-- renews nothing (autoAck pops lease nothing; the tenant gate passes null to refuse). Seconds
-- below 1 raise QARG (the broker validates before calling).
-- Locks: the worker's consumer rows, FOR UPDATE in (partition_id, consumer_group) order, then
-- the UPDATE of exactly those rows (already held, so it takes no lock out of order).
CREATE FUNCTION queen.log_renew_lease_v1(p_worker text, p_seconds integer,
                                         OUT renewed bigint, OUT expires_at timestamptz)
RETURNS record
LANGUAGE plpgsql AS $$
BEGIN
    renewed := 0;
    IF p_seconds IS NULL OR p_seconds < 1 THEN
        RAISE EXCEPTION 'QARG seconds must be a positive whole number, not %', p_seconds;
    END IF;
    IF p_worker IS NULL OR p_worker = '' THEN
        RETURN;
    END IF;
    PERFORM 1
    FROM queen.log_consumers c
    WHERE c.worker_id = p_worker AND c.batch_end IS NOT NULL AND c.lease_expires_at > now()
    ORDER BY c.partition_id, c.consumer_group
    FOR UPDATE;
    -- now() is the transaction start, so this matches exactly the rows locked above.
    WITH r AS (
        UPDATE queen.log_consumers c
        SET lease_expires_at = GREATEST(c.lease_expires_at,
                                        now() + make_interval(secs => p_seconds))
        WHERE c.worker_id = p_worker AND c.batch_end IS NOT NULL AND c.lease_expires_at > now()
        RETURNING c.lease_expires_at
    )
    SELECT count(*), min(r.lease_expires_at) INTO renewed, expires_at FROM r;
END;
$$;

-- queen.log_renew_lease_tenant_v1(tenant, worker, seconds) -> (renewed, expires_at)
-- Contract: the tenancy form of log_renew_lease_v1. Gate and renewal are ONE statement: the
-- worker is handed to log_renew_lease_v1 only when a single EXISTS proves that a live lease of
-- that worker sits on a partition of `tenant`; otherwise it is handed null, which renews nothing
-- and answers (0, null), exactly like an unknown or expired lease. The gate decides the
-- argument (not a join the planner could reorder), so a foreign lease is never touched. Every
-- lease of one worker belongs to one tenant (a pop mints its worker id and pops within its
-- caller's tenant), so the gate passing means every lease it renews is the caller's.
-- Locks: none for the gate; then those of log_renew_lease_v1.
CREATE FUNCTION queen.log_renew_lease_tenant_v1(p_tenant uuid, p_worker text, p_seconds integer,
                                                OUT renewed bigint, OUT expires_at timestamptz)
RETURNS record
LANGUAGE sql AS $$
    SELECT r.renewed, r.expires_at
    FROM queen.log_renew_lease_v1(
        CASE WHEN EXISTS (SELECT 1
                          FROM queen.log_consumers c
                          JOIN queen.log_partitions p ON p.id = c.partition_id
                          JOIN queen.queues q ON q.id = p.queue_id
                          WHERE c.worker_id = p_worker
                            AND c.batch_end IS NOT NULL
                            AND c.lease_expires_at > now()
                            AND q.tenant_id = p_tenant)
             THEN p_worker END,
        p_seconds) AS r
$$;

-- queen.log_dlq_list_v1(tenant, queue, group, partition, limit, offset) -> one page of DLQ rows
-- Contract: the tenant's DLQ rows, optionally filtered by queue name, consumer group
-- ('__QUEUE_MODE__' selects queue mode) and partition name (a null filter matches all), oldest
-- filing first (by id), `limit` rows after skipping `offset`. Every row carries `total`, the
-- number of rows matching the filters regardless of paging; the answer always holds at least one
-- row: when the page is empty, a single row whose `id` is null carries the total. Count and page
-- come from one statement, hence one snapshot.
-- Locks: none.
CREATE FUNCTION queen.log_dlq_list_v1(p_tenant uuid, p_queue text, p_group text,
                                      p_partition text, p_limit integer, p_offset bigint)
RETURNS TABLE (id bigint, queue_name text, partition_name text, partition_id uuid,
               consumer_group text, "offset" bigint, message_id uuid, transaction_id text,
               payload jsonb, error text, retry_count integer, failed_at timestamptz,
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

-- queen.log_dlq_fetch_v1(tenant, partition id, transactionId, group) -> the matching DLQ rows
-- Contract: the DLQ rows of (partition, transactionId) on a partition of `tenant`, optionally
-- only those of one consumer group (null = every group), with the queue and partition names a
-- re-push needs, in offset then id order. A foreign or unknown partition returns no row.
-- Locks: none (the retry deletes by the ids returned here, after its re-push committed).
CREATE FUNCTION queen.log_dlq_fetch_v1(p_tenant uuid, p_pid uuid, p_txn text, p_group text)
RETURNS TABLE (id bigint, queue_name text, partition_name text, consumer_group text,
               "offset" bigint, message_id uuid, payload jsonb)
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

-- queen.log_dlq_delete_v1(tenant, partition id, transactionId, group) -> rows deleted
-- Contract: deletes the DLQ rows of (partition, transactionId) on a partition of `tenant`,
-- optionally only those of one consumer group (null = every group). 0 when none matched,
-- including for a foreign partition.
-- Locks: the deleted log_dlq rows.
CREATE FUNCTION queen.log_dlq_delete_v1(p_tenant uuid, p_pid uuid, p_txn text, p_group text)
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
CREATE FUNCTION queen.log_dlq_delete_ids_v1(p_tenant uuid, p_pid uuid, p_ids bigint[])
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
