-- 012_pop_engine.sql: the pop path that never scans to find nothing and writes nothing when empty.
--
-- The broker keeps a hotlist of candidate partitions (a hint) and hands each pop a short list of
-- them; these procedures are the authority that re-checks every candidate under the consumer
-- row lock. Compared with 004_pop.sql:
--   * an empty candidate writes nothing: poppability is read without a lock first, and the row
--     is locked (FOR UPDATE SKIP LOCKED, which writes a lock) only when there is something to
--     lease;
--   * a missing consumer row is created only when there is something to deliver, under a
--     non-blocking transaction advisory lock on (partition, group), so no pop ever waits on
--     another's uncommitted insert;
--   * subscription `new` is recorded once per (queue, group) in `log_groups` (seeding the tail of
--     the partitions that exist then), instead of an INSERT ... ON CONFLICT on every pop;
--   * many pops (jobs) claim in one transaction (pop fusion), answered by job ordinal;
--   * segments the broker already holds decoded come back without their blob;
--   * the SQL wildcard, when it runs, considers a bounded candidate list.
-- Lock order: no pop procedure ever waits for a row lock (SKIP LOCKED, try-advisory locks);
-- fused jobs still visit (partition, group) pairs in ascending order.

-- A group subscribed with `new` on a queue: partitions that had no cursor row for it when this row
-- was written have been seeded at their tail; partitions created later start at their beginning.
CREATE TABLE queen.log_groups (
    queue_id       uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    consumer_group text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, consumer_group)
);

-- queen.consumer_lock_key_v1(partition id, group) -> bigint
-- Contract: the transaction advisory-lock key that guards the creation of one consumer row.
CREATE FUNCTION queen.consumer_lock_key_v1(p_pid uuid, p_group text)
RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT hashtextextended(p_pid::text || '/' || p_group, 7217)
$$;

-- queen.log_subscribe_new_v1(queue ids[], group) -> void
-- Contract: the first time `group` pops a queue with subscription `new`, records the group and
-- seeds its cursor at the tail of every partition of the queue that has no cursor row for it.
-- Later calls read one index entry and write nothing.
-- Locks: the `log_groups` row insert (a concurrent subscriber waits, then finds it); the
-- creation advisory lock of every seeded (partition, group), in partition id order.
CREATE FUNCTION queen.log_subscribe_new_v1(p_queues uuid[], p_group text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_qid uuid;
BEGIN
    FOREACH v_qid IN ARRAY p_queues LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM queen.log_groups g
                              WHERE g.queue_id = v_qid AND g.consumer_group = p_group);
        INSERT INTO queen.log_groups (queue_id, consumer_group) VALUES (v_qid, p_group)
        ON CONFLICT DO NOTHING;
        CONTINUE WHEN NOT FOUND;
        PERFORM pg_advisory_xact_lock(queen.consumer_lock_key_v1(p.id, p_group))
        FROM queen.log_partitions p
        WHERE p.queue_id = v_qid
        ORDER BY p.id;
        INSERT INTO queen.log_consumers (partition_id, consumer_group, committed)
        SELECT p.id, p_group, p.last_offset
        FROM queen.log_partitions p
        WHERE p.queue_id = v_qid
        ORDER BY p.id
        ON CONFLICT DO NOTHING;
    END LOOP;
END;
$$;

-- queen.log_pop_multi_v1(job groups[], job workers[], job batches[], job max partitions[],
--                        job lease seconds[], job auto acks[], candidate jobs[],
--                        candidate partitions[], cached partitions[], cached bases[])
--   -> one row per segment delivered, tagged with its job's ordinal
-- Contract: job i (1-based) pops for group `groups[i]` under leaseId `workers[i]`: it may claim
-- up to `max_partitions[i]` of its candidates (the partitions whose entry in `candidate_jobs`
-- is i) and deliver at most `batches[i]` messages in total. All jobs claim in this one
-- transaction; a partition claimed by one job is leased, so no other job of the call (or any
-- other pop) gets it. A claim leases the span after the group's cursor (auto ack commits it
-- instead), as log_lease_span_v1 does, except that:
--   * nothing deliverable (an unknown or empty partition, nothing after the cursor, a live
--     lease) is found without taking any lock, and writes nothing;
--   * a missing consumer row starts at the partition's beginning (subscription `new` seeded
--     the partitions that existed beforehand, see log_subscribe_new_v1) and is created only
--     under the creation advisory lock, taken without waiting.
-- A null lease length takes the queue's `lease_time`; `attempt` counts deliveries of a span
-- starting at the same offset. Each row carries the claimed span, its job's ordinal, the
-- partition's last offset and one segment overlapping the span; `blob` is null when the
-- segment is listed in (cached partitions, cached bases), which the broker holds decoded. A job
-- may come back with no row.
-- Locks: consumer rows FOR UPDATE SKIP LOCKED, visited in ascending (partition id, group) when
-- several jobs share the call (one job keeps its candidates' order: the hotlist's, or random);
-- creation advisory locks taken without waiting. Never waits on a lock.
CREATE FUNCTION queen.log_pop_multi_v1(p_groups text[], p_workers text[], p_batches integer[],
                                       p_max_partitions integer[], p_lease_seconds integer[],
                                       p_auto_acks boolean[], p_cand_jobs integer[],
                                       p_cand_pids uuid[], p_cached_pids uuid[],
                                       p_cached_bases bigint[])
RETURNS TABLE (ordinal integer, partition_id uuid, queue_name text, partition_name text,
               span_start bigint, span_end bigint, attempt integer,
               lease_expires_at timestamptz, last_offset bigint, seg_base bigint,
               seg_end bigint, seg_created timestamptz, blob bytea)
LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(array_length(p_groups, 1), 0);
    v_budget integer[] := p_batches;
    v_claimed integer[] := array_fill(0, ARRAY[n]);
    v_cached bigint[];
    v_job integer;
    v_pid uuid;
    v_group text;
    v_auto boolean;
    v_log_start bigint;
    v_lease integer;
    v_has_row boolean;
    v_committed bigint;
    v_batch_end bigint;
    v_expires timestamptz;
    cand record;
BEGIN
    FOR cand IN
        SELECT u.job, u.pid
        FROM unnest(p_cand_jobs, p_cand_pids) WITH ORDINALITY AS u(job, pid, k)
        ORDER BY CASE WHEN n > 1 THEN u.pid END, CASE WHEN n > 1 THEN p_groups[u.job] END,
                 u.job, u.k
    LOOP
        v_job := cand.job; v_pid := cand.pid;
        CONTINUE WHEN v_claimed[v_job] >= p_max_partitions[v_job] OR v_budget[v_job] <= 0;
        v_group := p_groups[v_job]; v_auto := p_auto_acks[v_job];
        -- Read first, lock only when there is something to lease: an empty look writes nothing.
        SELECT p.last_offset, p.log_start, p.name, q.name,
               COALESCE(p_lease_seconds[v_job], q.lease_time),
               c.partition_id IS NOT NULL, c.committed, c.batch_end, c.lease_expires_at
        INTO last_offset, v_log_start, partition_name, queue_name, v_lease,
             v_has_row, v_committed, v_batch_end, v_expires
        FROM queen.log_partitions p
        JOIN queen.queues q ON q.id = p.queue_id
        LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = v_group
        WHERE p.id = v_pid;
        CONTINUE WHEN NOT FOUND OR last_offset < v_log_start;
        span_start := NULL;
        IF NOT v_has_row THEN
            CONTINUE WHEN NOT pg_try_advisory_xact_lock(queen.consumer_lock_key_v1(v_pid, v_group));
            span_start := v_log_start;
            span_end := LEAST(span_start + v_budget[v_job] - 1, last_offset);
            attempt := 1;
            lease_expires_at := CASE WHEN v_auto THEN NULL
                                     ELSE now() + make_interval(secs => v_lease) END;
            INSERT INTO queen.log_consumers
                (partition_id, consumer_group, committed, batch_end, worker_id, lease_expires_at,
                 attempt_count, attempt_from, total_consumed)
            VALUES (v_pid, v_group,
                    CASE WHEN v_auto THEN span_end ELSE span_start - 1 END,
                    CASE WHEN v_auto THEN NULL ELSE span_end END,
                    CASE WHEN v_auto THEN NULL ELSE p_workers[v_job] END,
                    lease_expires_at,
                    CASE WHEN v_auto THEN 0 ELSE 1 END,
                    CASE WHEN v_auto THEN NULL ELSE span_start END,
                    CASE WHEN v_auto THEN span_end - span_start + 1 ELSE 0 END)
            ON CONFLICT DO NOTHING;
            CONTINUE WHEN NOT FOUND;
        ELSE
            CONTINUE WHEN (v_batch_end IS NOT NULL AND v_expires > now())
                       OR GREATEST(v_committed + 1, v_log_start) > last_offset;
            IF v_auto THEN
                -- Auto ack: the cursor moves past the span, no lease is written.
                UPDATE queen.log_consumers lc SET
                    committed = LEAST(GREATEST(lc.committed + 1, v_log_start)
                                      + v_budget[v_job] - 1, last_offset),
                    batch_end = NULL, worker_id = NULL, lease_expires_at = NULL,
                    batch_retry_count = 0, attempt_count = 0, attempt_from = NULL,
                    total_consumed = lc.total_consumed
                        + LEAST(GREATEST(lc.committed + 1, v_log_start) + v_budget[v_job] - 1,
                                last_offset) - GREATEST(lc.committed + 1, v_log_start) + 1
                FROM (SELECT l.partition_id, l.consumer_group, l.committed AS before
                      FROM queen.log_consumers l
                      WHERE l.partition_id = v_pid AND l.consumer_group = v_group
                      FOR UPDATE SKIP LOCKED) AS locked
                WHERE lc.partition_id = locked.partition_id
                  AND lc.consumer_group = locked.consumer_group
                  AND (lc.batch_end IS NULL OR lc.lease_expires_at <= now())
                  AND GREATEST(lc.committed + 1, v_log_start) <= last_offset
                RETURNING GREATEST(locked.before + 1, v_log_start), lc.committed, 1, NULL
                INTO span_start, span_end, attempt, lease_expires_at;
            ELSE
                -- The lease: span (committed, batch_end], re-checked under the row lock.
                UPDATE queen.log_consumers lc SET
                    batch_end = LEAST(GREATEST(lc.committed + 1, v_log_start)
                                      + v_budget[v_job] - 1, last_offset),
                    worker_id = p_workers[v_job],
                    lease_expires_at = now() + make_interval(secs => v_lease),
                    attempt_count = CASE WHEN lc.attempt_from = GREATEST(lc.committed + 1, v_log_start)
                                         THEN lc.attempt_count + 1 ELSE 1 END,
                    attempt_from = GREATEST(lc.committed + 1, v_log_start)
                FROM (SELECT l.partition_id, l.consumer_group
                      FROM queen.log_consumers l
                      WHERE l.partition_id = v_pid AND l.consumer_group = v_group
                      FOR UPDATE SKIP LOCKED) AS locked
                WHERE lc.partition_id = locked.partition_id
                  AND lc.consumer_group = locked.consumer_group
                  AND (lc.batch_end IS NULL OR lc.lease_expires_at <= now())
                  AND GREATEST(lc.committed + 1, v_log_start) <= last_offset
                RETURNING lc.attempt_from, lc.batch_end, lc.attempt_count, lc.lease_expires_at
                INTO span_start, span_end, attempt, lease_expires_at;
            END IF;
            CONTINUE WHEN span_start IS NULL;  -- held by someone else, or changed meanwhile
        END IF;
        v_claimed[v_job] := v_claimed[v_job] + 1;
        v_budget[v_job] := v_budget[v_job] - (span_end - span_start + 1)::integer;
        v_cached := ARRAY(SELECT c.base FROM unnest(p_cached_pids, p_cached_bases) AS c(pid, base)
                          WHERE c.pid = v_pid);
        RETURN QUERY
        SELECT v_job, v_pid, queue_name, partition_name, span_start, span_end,
               attempt, lease_expires_at, last_offset, g.base_offset, g.end_offset,
               g.created_at,
               CASE WHEN g.base_offset = ANY (v_cached) THEN NULL ELSE g.blob END
        FROM queen.log_segments g
        WHERE g.partition_id = v_pid
          AND g.base_offset >= COALESCE((SELECT max(x.base_offset) FROM queen.log_segments x
                                         WHERE x.partition_id = v_pid
                                           AND x.base_offset <= span_start), span_start)
          AND g.base_offset <= span_end
        ORDER BY g.base_offset;
    END LOOP;
END;
$$;

-- queen.log_pop_candidates_v2(queue ids[], group, limit) -> partition ids
-- Contract: at most `limit` partitions of the given queues that hold messages after the group's
-- cursor (a missing cursor row counts from the partition's beginning) and carry no live lease
-- for the group, in random order. What the hotlist is (re)seeded from, and what a pop without
-- a hotlist claims from. Reads only.
-- Locks: none (claiming re-checks everything under the consumer row lock).
CREATE FUNCTION queen.log_pop_candidates_v2(p_queues uuid[], p_group text, p_limit integer)
RETURNS uuid[]
LANGUAGE sql STABLE AS $$
    SELECT ARRAY(
        SELECT p.id
        FROM queen.log_partitions p
        LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = p_group
        WHERE p.queue_id = ANY (p_queues)
          AND p.last_offset >= GREATEST(COALESCE(c.committed, p.log_start - 1) + 1, p.log_start)
          AND (c.batch_end IS NULL OR c.lease_expires_at <= now())
        ORDER BY random()
        LIMIT p_limit)
$$;

-- queen.log_pop_scope_v1(tenant, queue, namespace, task, group, subscription new, provision)
--   -> the queue ids a pop reads
-- Contract: a queue pop (`queue` not null) resolves its one queue, provisioning it when
-- `provision` (a pop of an unknown queue creates it, as push does); a discovery pop (`queue`
-- null) the tenant's queues matching namespace and task (an empty filter matches any). With
-- subscription `new`, records the group on each (log_subscribe_new_v1).
-- Locks: those of provision_queue_v1 and log_subscribe_new_v1.
CREATE FUNCTION queen.log_pop_scope_v1(p_tenant uuid, p_queue text, p_namespace text,
                                       p_task text, p_group text, p_sub_new boolean,
                                       p_provision boolean)
RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
    v_queues uuid[];
BEGIN
    IF p_queue IS NOT NULL AND p_provision THEN
        v_queues := ARRAY[queen.provision_queue_v1(p_tenant, p_queue)];
    ELSIF p_queue IS NOT NULL THEN
        v_queues := ARRAY(SELECT q.id FROM queen.queues q
                          WHERE q.tenant_id = p_tenant AND q.name = p_queue);
    ELSE
        v_queues := ARRAY(SELECT q.id FROM queen.queues q
                          WHERE q.tenant_id = p_tenant
                            AND (p_namespace = '' OR q.namespace = p_namespace)
                            AND (p_task = '' OR q.task = p_task));
    END IF;
    IF p_sub_new THEN
        PERFORM queen.log_subscribe_new_v1(v_queues, p_group);
    END IF;
    RETURN v_queues;
END;
$$;

-- queen.log_partition_ids_v1(tenant, queue, partition) -> the partition id, or no row
-- Contract: resolves a named partition for a pop (the broker caches the answer; ids never
-- change). Reads only.
-- Locks: none.
CREATE FUNCTION queen.log_partition_ids_v1(p_tenant uuid, p_queue text, p_partition text)
RETURNS TABLE (partition_id uuid, queue_id uuid)
LANGUAGE sql STABLE AS $$
    SELECT p.id, q.id
    FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
    WHERE q.tenant_id = p_tenant AND q.name = p_queue AND p.name = p_partition
$$;

-- queen.log_pop_wildcard_v2(tenant, queue, namespace, task, group, worker, batch,
--                           max partitions, lease seconds, subscription new, auto ack, limit)
--   -> segment rows (see log_pop_multi_v1; ordinal is always 1)
-- Contract: a wildcard pop without the hotlist: resolves the queues (log_pop_scope_v1, a queue
-- pop provisioning its queue), lists at most `limit` candidates in random order
-- (log_pop_candidates_v2), and claims from them as one job. What a pop runs when the hotlist is
-- off, for discovery pops, and for a pop that does not wait while the hotlist has nothing.
-- Locks: those of log_pop_scope_v1 and log_pop_multi_v1.
CREATE FUNCTION queen.log_pop_wildcard_v2(p_tenant uuid, p_queue text, p_namespace text,
                                          p_task text, p_group text, p_worker text,
                                          p_batch integer, p_max_partitions integer,
                                          p_lease_seconds integer, p_sub_new boolean,
                                          p_auto_ack boolean, p_limit integer)
RETURNS TABLE (ordinal integer, partition_id uuid, queue_name text, partition_name text,
               span_start bigint, span_end bigint, attempt integer,
               lease_expires_at timestamptz, last_offset bigint, seg_base bigint,
               seg_end bigint, seg_created timestamptz, blob bytea)
LANGUAGE plpgsql AS $$
DECLARE
    v_cands uuid[] := queen.log_pop_candidates_v2(
        queen.log_pop_scope_v1(p_tenant, p_queue, p_namespace, p_task, p_group, p_sub_new, true),
        p_group, p_limit);
BEGIN
    RETURN QUERY SELECT * FROM queen.log_pop_multi_v1(
        ARRAY[p_group], ARRAY[p_worker], ARRAY[p_batch], ARRAY[p_max_partitions],
        ARRAY[p_lease_seconds], ARRAY[p_auto_ack],
        array_fill(1, ARRAY[cardinality(v_cands)]), v_cands, '{}'::uuid[], '{}'::bigint[]);
END;
$$;
