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
-- may come back with no row; it plans its partitions from what it reads before locking, so a
-- candidate held by another transaction at the moment of locking is skipped, not replaced by
-- the job's next candidate (the broker's next attempt takes new candidates).
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
BEGIN
    -- One statement for every job: a per-candidate procedural loop cost several times the SQL
    -- it ran. PL/pgSQL only to keep the statement's plan cached (an SQL function replans it on
    -- every call).
    RETURN QUERY
    WITH cand AS (
        SELECT u.job, u.pid, u.k
        FROM unnest(p_cand_jobs, p_cand_pids) WITH ORDINALITY AS u(job, pid, k)
    ), look AS (
        -- What is deliverable, read without any lock: an empty look writes nothing.
        SELECT c.job, c.pid, c.k, p.last_offset AS last_at, p.log_start, p.name AS pname,
               q.name AS qname, COALESCE(p_lease_seconds[c.job], q.lease_time) AS lease,
               lc.partition_id IS NOT NULL AS has_row,
               GREATEST(COALESCE(lc.committed, p.log_start - 1) + 1, p.log_start) AS start_at
        FROM cand c
        JOIN queen.log_partitions p ON p.id = c.pid
        JOIN queen.queues q ON q.id = p.queue_id
        LEFT JOIN queen.log_consumers lc
               ON lc.partition_id = c.pid AND lc.consumer_group = p_groups[c.job]
        WHERE p.last_offset >= p.log_start
          AND (lc.batch_end IS NULL OR lc.lease_expires_at <= now())
          AND GREATEST(COALESCE(lc.committed, p.log_start - 1) + 1, p.log_start) <= p.last_offset
    ), budget AS (
        -- Per job, candidates in order, sharing the job's message budget.
        SELECT l.*, row_number() OVER w AS nth,
               COALESCE(sum(l.last_at - l.start_at + 1) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING
                                                               AND 1 PRECEDING), 0)::bigint
                   AS before
        FROM look l
        WINDOW w AS (PARTITION BY l.job ORDER BY l.k)
    ), chosen AS (
        -- One job per (partition, group): the first asking.
        SELECT DISTINCT ON (b.pid, p_groups[b.job]) b.*, p_groups[b.job] AS grp,
               LEAST(b.last_at - b.start_at, p_batches[b.job] - b.before - 1) AS span_len
        FROM budget b
        WHERE b.nth <= p_max_partitions[b.job] AND b.before < p_batches[b.job]
        ORDER BY b.pid, p_groups[b.job], b.job
    ), locked AS (
        SELECT l.partition_id, l.consumer_group, l.committed AS before
        FROM queen.log_consumers l
        JOIN chosen ch ON l.partition_id = ch.pid AND l.consumer_group = ch.grp
        WHERE ch.has_row
        ORDER BY l.partition_id, l.consumer_group
        FOR UPDATE OF l SKIP LOCKED
    ), leased AS (
        -- Re-checked under the row lock; the span starts at the cursor as it is now.
        UPDATE queen.log_consumers lc SET
            committed = CASE WHEN p_auto_acks[ch.job]
                             THEN LEAST(GREATEST(lk.before + 1, ch.log_start) + ch.span_len,
                                        ch.last_at)
                             ELSE lc.committed END,
            batch_end = CASE WHEN p_auto_acks[ch.job] THEN NULL
                             ELSE LEAST(GREATEST(lk.before + 1, ch.log_start) + ch.span_len,
                                        ch.last_at) END,
            worker_id = CASE WHEN p_auto_acks[ch.job] THEN NULL ELSE p_workers[ch.job] END,
            lease_expires_at = CASE WHEN p_auto_acks[ch.job] THEN NULL
                                    ELSE now() + make_interval(secs => ch.lease) END,
            batch_retry_count = CASE WHEN p_auto_acks[ch.job] THEN 0
                                     ELSE lc.batch_retry_count END,
            attempt_count = CASE WHEN p_auto_acks[ch.job] THEN 0
                                 WHEN lc.attempt_from = GREATEST(lk.before + 1, ch.log_start)
                                 THEN lc.attempt_count + 1 ELSE 1 END,
            attempt_from = CASE WHEN p_auto_acks[ch.job] THEN NULL
                                ELSE GREATEST(lk.before + 1, ch.log_start) END,
            total_consumed = lc.total_consumed
                + CASE WHEN p_auto_acks[ch.job]
                       THEN LEAST(GREATEST(lk.before + 1, ch.log_start) + ch.span_len, ch.last_at)
                            - GREATEST(lk.before + 1, ch.log_start) + 1
                       ELSE 0 END
        FROM locked lk, chosen ch
        WHERE lc.partition_id = lk.partition_id AND lc.consumer_group = lk.consumer_group
          AND ch.pid = lk.partition_id AND ch.grp = lk.consumer_group
          AND (lc.batch_end IS NULL OR lc.lease_expires_at <= now())
          AND GREATEST(lk.before + 1, ch.log_start) <= ch.last_at
        RETURNING ch.job, ch.k, ch.pid, ch.qname, ch.pname,
                  GREATEST(lk.before + 1, ch.log_start) AS s,
                  LEAST(GREATEST(lk.before + 1, ch.log_start) + ch.span_len, ch.last_at) AS e,
                  CASE WHEN p_auto_acks[ch.job] THEN 1 ELSE lc.attempt_count END AS att,
                  lc.lease_expires_at AS lease_at, ch.last_at
    ), created AS (
        -- A missing cursor row starts at the partition's beginning, created only under the
        -- creation advisory lock, taken without waiting.
        INSERT INTO queen.log_consumers
            (partition_id, consumer_group, committed, batch_end, worker_id, lease_expires_at,
             attempt_count, attempt_from, total_consumed)
        SELECT ch.pid, ch.grp,
               CASE WHEN p_auto_acks[ch.job] THEN ch.start_at + ch.span_len
                    ELSE ch.start_at - 1 END,
               CASE WHEN p_auto_acks[ch.job] THEN NULL ELSE ch.start_at + ch.span_len END,
               CASE WHEN p_auto_acks[ch.job] THEN NULL ELSE p_workers[ch.job] END,
               CASE WHEN p_auto_acks[ch.job] THEN NULL
                    ELSE now() + make_interval(secs => ch.lease) END,
               CASE WHEN p_auto_acks[ch.job] THEN 0 ELSE 1 END,
               CASE WHEN p_auto_acks[ch.job] THEN NULL ELSE ch.start_at END,
               CASE WHEN p_auto_acks[ch.job] THEN ch.span_len + 1 ELSE 0 END
        FROM chosen ch
        WHERE NOT ch.has_row
          AND pg_try_advisory_xact_lock(queen.consumer_lock_key_v1(ch.pid, ch.grp))
        ORDER BY ch.pid, ch.grp
        ON CONFLICT DO NOTHING
        RETURNING log_consumers.partition_id, log_consumers.consumer_group,
                  log_consumers.lease_expires_at
    ), claims AS (
        SELECT job, k, pid, qname, pname, s, e, att, lease_at, last_at FROM leased
        UNION ALL
        SELECT ch.job, ch.k, ch.pid, ch.qname, ch.pname, ch.start_at, ch.start_at + ch.span_len,
               1, cr.lease_expires_at, ch.last_at
        FROM created cr JOIN chosen ch ON ch.pid = cr.partition_id AND ch.grp = cr.consumer_group
    )
    SELECT c.job::integer, c.pid, c.qname, c.pname, c.s, c.e, c.att, c.lease_at, c.last_at,
           g.base_offset, g.end_offset, g.created_at,
           CASE WHEN EXISTS (SELECT 1 FROM unnest(p_cached_pids, p_cached_bases) AS x(pid, base)
                             WHERE x.pid = c.pid AND x.base = g.base_offset)
                THEN NULL ELSE g.blob END
    FROM claims c
    JOIN queen.log_segments g
      ON g.partition_id = c.pid
     AND g.base_offset >= COALESCE((SELECT max(x.base_offset) FROM queen.log_segments x
                                    WHERE x.partition_id = c.pid AND x.base_offset <= c.s), c.s)
     AND g.base_offset <= c.e
    ORDER BY c.job, c.k, g.base_offset;
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
