-- lease.sql: what a lease is, and renewing leases.
--
-- A lease is a consumer row's `worker_id` (the leaseId), `batch_end` and `lease_expires_at`;
-- pops write it (pop.sql), acks and DLQ filing end it (ack.sql, dlq.sql). This file holds THE
-- predicate every procedure uses to call a lease live, and renewal.
--
-- Renewal takes consumer row locks only, in (partition_id, consumer_group) order, the last step
-- of the lock order everywhere (provisioning, queue rows with a maxSize, partition rows by id,
-- consumer rows by (partition id, group)). `worker_id` deliberately has no index: it changes on
-- every pop and ack, and indexing it would make those updates non-HOT on the hottest table.
-- Renewal is rare (one call per lease every few seconds at most) and scans
-- queen.log_consumers, which holds one row per (partition, group).
--
-- Applied before the other procedure files: lease_live_v1 is called by SQL-language functions
-- elsewhere, whose bodies PostgreSQL checks when they are created.

-- queen.lease_live_v1(batch_end, lease_expires_at) -> boolean
-- Contract: THE lease-validity predicate: a consumer row holds a live lease when it has a leased
-- batch and the lease has not expired (now() is the transaction start, so every use inside one
-- transaction agrees). A plain SQL expression, inlined by the planner where it is used in a
-- query. Callers that check a given worker add `worker_id IS NOT DISTINCT FROM p_worker`.
-- Locks: none.
CREATE OR REPLACE FUNCTION queen.lease_live_v1(p_batch_end bigint, p_expires timestamptz)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_batch_end IS NOT NULL AND p_expires > now()
$$;

-- queen.log_renew_lease_v1(worker, seconds) -> (renewed, expires_at)
-- Contract: renews EVERY live lease (lease_live_v1) held by `worker` (a multi-partition pop
-- shares one worker id) to GREATEST(lease_expires_at, now() + seconds), so renewing never
-- shortens a lease and never revives an expired one. Returns how many leases were renewed and
-- the earliest new expiry among them (null when none). A null or empty worker renews nothing
-- (autoAck pops lease nothing; the tenant gate passes null to refuse). Seconds below 1 raise
-- QARG (the broker validates before calling).
-- Locks: the worker's consumer rows, FOR UPDATE in (partition_id, consumer_group) order, then
-- the UPDATE of exactly those rows (already held, so it takes no lock out of order).
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
-- Contract: the tenancy form of log_renew_lease_v1. Gate and renewal are ONE statement: the
-- worker is handed to log_renew_lease_v1 only when a single EXISTS proves that a live lease
-- (lease_live_v1) of that worker sits on a partition of `tenant`; otherwise it is handed null,
-- which renews nothing and answers (0, null), exactly like an unknown or expired lease. The gate
-- decides the argument (not a join the planner could reorder), so a foreign lease is never
-- touched. Every lease of one worker belongs to one tenant (a pop mints its worker id and pops
-- within its caller's tenant), so the gate passing means every lease it renews is the caller's.
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
