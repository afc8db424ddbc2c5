-- 018_cursor_advance_cached.sql: the cursor-advance helper keeps its plan between calls (issue 12,
-- found profiling deep-partitions).
--
-- log_cursor_advance_v1 (013_structured_refusals.sql) was a LANGUAGE sql function. An SQL
-- function whose body is an UPDATE is never inlined, and PostgreSQL 15 parses and plans its body
-- on every call: with pg_stat_statements.track = all, its UPDATE executed in 0.017 ms while the
-- call took 0.166 ms, about half of every positional ack (log_ack_at_v1, 0.30 ms mean). As
-- PL/pgSQL the statement's plan is cached for the session. Contract, arguments and locks are
-- unchanged; every caller (the ack, DLQ, lease and transaction procedures) keeps calling it by
-- name.

-- queen.log_cursor_advance_v1(partition id, group, new committed, release) -> void
-- Contract: THE cursor-advance UPDATE (unchanged from 013): moves the group's `committed` to
-- GREATEST(committed, p_new) (never backward) and adds the distance moved to total_consumed;
-- with p_release it also ends the lease (batch_end, worker_id, lease_expires_at := null) and
-- resets the retry and attempt state of the batch. Validation (lease, bounds) is the caller's.
-- Locks: the consumer row (the callers already hold it FOR UPDATE).
CREATE OR REPLACE FUNCTION queen.log_cursor_advance_v1(p_pid uuid, p_group text, p_new bigint,
                                                       p_release boolean)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE queen.log_consumers lc SET
        committed = GREATEST(lc.committed, p_new),
        batch_end = CASE WHEN p_release THEN NULL ELSE lc.batch_end END,
        worker_id = CASE WHEN p_release THEN NULL ELSE lc.worker_id END,
        lease_expires_at = CASE WHEN p_release THEN NULL ELSE lc.lease_expires_at END,
        batch_retry_count = CASE WHEN p_release THEN 0 ELSE lc.batch_retry_count END,
        attempt_count = CASE WHEN p_release THEN 0 ELSE lc.attempt_count END,
        attempt_from = CASE WHEN p_release THEN NULL ELSE lc.attempt_from END,
        total_consumed = lc.total_consumed + (GREATEST(lc.committed, p_new) - lc.committed)
    WHERE lc.partition_id = p_pid AND lc.consumer_group = p_group;
END;
$$;
