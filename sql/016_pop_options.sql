-- 016: the pop side of Queen's queue options (issue 16, wire.md "Queues" and "Pop").
--
-- What changes against 012_pop_engine.sql, all in PostgreSQL so that it holds whatever a broker
-- believes (the hotlist, the pending gate and pop fusion are hints; several brokers may share
-- this database):
--   * `delayed_processing` (seconds): a pop delivers nothing from a segment younger than that;
--     its span stops before the first such segment after the group's cursor;
--   * `window_buffer` (seconds): a pop takes nothing from a partition whose newest segment is
--     younger than that;
--     both are computed by log_pop_ready_end_v1 and applied by the claim (log_pop_multi_v2)
--     and by the candidate list (log_pop_candidates_v3), so a held-back partition is neither
--     claimed nor "pending" (the gate parks); the list also says when the first held-back
--     partition becomes ready, so the hotlist reseeds then;
--   * `priority`: the candidate list puts partitions of higher-priority queues first, and a
--     single-job claim keeps that order, so a discovery pop prefers them;
--   * subscription `from <timestamp>` besides `new`: a group's first pop may seed its cursors
--     at the first segment created at or after a time instead of at the tail.
-- Queues without these options (every default is 0 / none) take the same plans as before: the
-- extra reads run only for a queue whose delay or window is set.
-- Lock order is that of 012: no pop procedure ever waits for a row lock.

-- queen.log_pop_ready_end_v1(partition id, start, last offset, budget, delay s, window s)
--   -> the last offset a pop may deliver from `start` on (start - 1 = nothing)
-- Contract: with `window` > 0 and the partition's newest segment created less than `window`
-- seconds ago, nothing. Otherwise, with `delay` > 0, the offset before the first segment
-- overlapping [start, start + budget - 1] that was created less than `delay` seconds ago (at
-- most start + budget - 1 and `last`: a bound, since a pop never delivers more than its
-- budget). Otherwise `last`. Ages are against the transaction's now(), as segments' created_at.
-- Reads only (the segments' primary key; never more than `budget` segments).
-- Locks: none.
CREATE FUNCTION queen.log_pop_ready_end_v1(p_pid uuid, p_start bigint, p_last bigint,
                                           p_budget integer, p_delay integer, p_window integer)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p_window > 0
             AND (SELECT g.created_at FROM queen.log_segments g
                  WHERE g.partition_id = p_pid
                  ORDER BY g.base_offset DESC LIMIT 1)
                 > now() - make_interval(secs => p_window)
        THEN p_start - 1
        WHEN p_delay > 0 THEN
            COALESCE(
                (SELECT g.base_offset - 1 FROM queen.log_segments g
                 WHERE g.partition_id = p_pid
                   AND g.base_offset >= COALESCE(
                           (SELECT max(x.base_offset) FROM queen.log_segments x
                            WHERE x.partition_id = p_pid AND x.base_offset <= p_start), p_start)
                   AND g.base_offset <= LEAST(p_last, p_start + p_budget - 1)
                   AND g.created_at > now() - make_interval(secs => p_delay)
                 ORDER BY g.base_offset LIMIT 1),
                LEAST(p_last, p_start + p_budget - 1))
        ELSE p_last
    END
$$;

-- queen.log_subscribe_new_v2(queue ids[], group, from) -> void
-- Contract: that of log_subscribe_new_v1 (012_pop_engine.sql) with a starting point: the first
-- time `group` pops a queue with subscription `new` (`from` null) or `from <time>`, records the
-- group and seeds its cursor on every partition of the queue that has no cursor row for it: at
-- the tail (`from` null), or before the first segment created at or after `from` (the tail when
-- there is none). Partitions created later start at their beginning. Later calls read one index
-- entry and write nothing, whatever their `from`.
-- Locks: the `log_groups` row insert (a concurrent subscriber waits, then finds it); the
-- creation advisory lock of every seeded (partition, group), in partition id order.
CREATE FUNCTION queen.log_subscribe_new_v2(p_queues uuid[], p_group text, p_from timestamptz)
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
        SELECT p.id, p_group,
               CASE WHEN p_from IS NULL THEN p.last_offset
                    ELSE COALESCE((SELECT g.base_offset FROM queen.log_segments g
                                   WHERE g.partition_id = p.id AND g.created_at >= p_from
                                   ORDER BY g.base_offset LIMIT 1),
                                  p.last_offset + 1) - 1
               END
        FROM queen.log_partitions p
        WHERE p.queue_id = v_qid
        ORDER BY p.id
        ON CONFLICT DO NOTHING;
    END LOOP;
END;
$$;

-- queen.log_pop_scope_v2(tenant, queue, namespace, task, group, subscription new,
--                        subscription from, provision) -> the queue ids a pop reads
-- Contract: that of log_pop_scope_v1 (012_pop_engine.sql); a group subscribes
-- (log_subscribe_new_v2) when `sub_new` is true or `sub_from` is not null, from `sub_from`
-- when given (it overrides `sub_new`), else at the tail.
-- Locks: those of provision_queue_v1 and log_subscribe_new_v2.
CREATE FUNCTION queen.log_pop_scope_v2(p_tenant uuid, p_queue text, p_namespace text,
                                       p_task text, p_group text, p_sub_new boolean,
                                       p_sub_from timestamptz, p_provision boolean)
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
    IF p_sub_new OR p_sub_from IS NOT NULL THEN
        PERFORM queen.log_subscribe_new_v2(v_queues, p_group, p_sub_from);
    END IF;
    RETURN v_queues;
END;
$$;

-- queen.log_pop_multi_v2(job groups[], job workers[], job batches[], job max partitions[],
--                        job lease seconds[], job auto acks[], candidate jobs[],
--                        candidate partitions[], cached partitions[], cached bases[])
--   -> one row per segment delivered, tagged with its job's ordinal
-- Contract: that of log_pop_multi_v1 (012_pop_engine.sql), except that a claim never goes past
-- what log_pop_ready_end_v1 allows for the partition's queue (delayed_processing,
-- window_buffer): a held-back partition is skipped as an empty one is (no lock, no write), and
-- a span stops before the first segment still delayed. The bound is computed once, before
-- locking, against the transaction's now(); the span re-checked under the row lock is clamped
-- to it. `last_offset` in each row is still the partition's true last offset.
-- Locks: consumer rows FOR UPDATE SKIP LOCKED, visited in ascending (partition id, group) when
-- several jobs share the call (one job keeps its candidates' order); creation advisory locks
-- taken without waiting. Never waits on a lock.
CREATE FUNCTION queen.log_pop_multi_v2(p_groups text[], p_workers text[], p_batches integer[],
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
    -- One statement for every job (see log_pop_multi_v1); PL/pgSQL to keep its plan cached.
    RETURN QUERY
    WITH cand AS (
        SELECT u.job, u.pid, u.k
        FROM unnest(p_cand_jobs, p_cand_pids) WITH ORDINALITY AS u(job, pid, k)
    ), seen AS (
        -- What is after the cursor, read without any lock: an empty look writes nothing.
        SELECT c.job, c.pid, c.k, p.last_offset AS last_at, p.log_start, p.name AS pname,
               q.name AS qname, COALESCE(p_lease_seconds[c.job], q.lease_time) AS lease,
               lc.partition_id IS NOT NULL AS has_row,
               GREATEST(COALESCE(lc.committed, p.log_start - 1) + 1, p.log_start) AS start_at,
               q.delayed_processing AS delay, q.window_buffer AS win
        FROM cand c
        JOIN queen.log_partitions p ON p.id = c.pid
        JOIN queen.queues q ON q.id = p.queue_id
        LEFT JOIN queen.log_consumers lc
               ON lc.partition_id = c.pid AND lc.consumer_group = p_groups[c.job]
        WHERE p.last_offset >= p.log_start
          AND (lc.batch_end IS NULL OR lc.lease_expires_at <= now())
          AND GREATEST(COALESCE(lc.committed, p.log_start - 1) + 1, p.log_start) <= p.last_offset
    ), look AS (
        -- What of it is ready: the queue's delay and window (read only when set).
        SELECT r.* FROM (
            SELECT s.*,
                   CASE WHEN s.delay = 0 AND s.win = 0 THEN s.last_at
                        ELSE queen.log_pop_ready_end_v1(s.pid, s.start_at, s.last_at,
                                                        p_batches[s.job], s.delay, s.win)
                   END AS ready_at
            FROM seen s) r
        WHERE r.ready_at >= r.start_at
    ), budget AS (
        -- Per job, candidates in order, sharing the job's message budget.
        SELECT l.*, row_number() OVER w AS nth,
               COALESCE(sum(l.ready_at - l.start_at + 1) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING
                                                                AND 1 PRECEDING), 0)::bigint
                   AS before
        FROM look l
        WINDOW w AS (PARTITION BY l.job ORDER BY l.k)
    ), chosen AS (
        -- One job per (partition, group): the first asking.
        SELECT DISTINCT ON (b.pid, p_groups[b.job]) b.*, p_groups[b.job] AS grp,
               LEAST(b.ready_at - b.start_at, p_batches[b.job] - b.before - 1) AS span_len
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
        -- Re-checked under the row lock; the span starts at the cursor as it is now and never
        -- goes past the ready bound.
        UPDATE queen.log_consumers lc SET
            committed = CASE WHEN p_auto_acks[ch.job]
                             THEN LEAST(GREATEST(lk.before + 1, ch.log_start) + ch.span_len,
                                        ch.ready_at)
                             ELSE lc.committed END,
            batch_end = CASE WHEN p_auto_acks[ch.job] THEN NULL
                             ELSE LEAST(GREATEST(lk.before + 1, ch.log_start) + ch.span_len,
                                        ch.ready_at) END,
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
                       THEN LEAST(GREATEST(lk.before + 1, ch.log_start) + ch.span_len,
                                  ch.ready_at)
                            - GREATEST(lk.before + 1, ch.log_start) + 1
                       ELSE 0 END
        FROM locked lk, chosen ch
        WHERE lc.partition_id = lk.partition_id AND lc.consumer_group = lk.consumer_group
          AND ch.pid = lk.partition_id AND ch.grp = lk.consumer_group
          AND (lc.batch_end IS NULL OR lc.lease_expires_at <= now())
          AND GREATEST(lk.before + 1, ch.log_start) <= ch.ready_at
        RETURNING ch.job, ch.k, ch.pid, ch.qname, ch.pname,
                  GREATEST(lk.before + 1, ch.log_start) AS s,
                  LEAST(GREATEST(lk.before + 1, ch.log_start) + ch.span_len, ch.ready_at) AS e,
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

-- queen.log_pop_ready_at_v1(partition id, start, delay s, window s) -> timestamptz
-- Contract: when a partition that log_pop_ready_end_v1 holds back at `start` becomes ready:
-- its newest segment's creation plus `window`, and the creation of the segment holding `start`
-- plus `delay` (the later of those that apply; null when neither does).
-- Reads only (two primary-key probes). Locks: none.
CREATE FUNCTION queen.log_pop_ready_at_v1(p_pid uuid, p_start bigint, p_delay integer,
                                          p_window integer)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT GREATEST(
        CASE WHEN p_window > 0 THEN
            (SELECT g.created_at FROM queen.log_segments g
             WHERE g.partition_id = p_pid
             ORDER BY g.base_offset DESC LIMIT 1) + make_interval(secs => p_window)
        END,
        CASE WHEN p_delay > 0 THEN
            (SELECT g.created_at FROM queen.log_segments g
             WHERE g.partition_id = p_pid AND g.base_offset <= p_start
             ORDER BY g.base_offset DESC LIMIT 1) + make_interval(secs => p_delay)
        END)
$$;

-- queen.log_pop_candidates_v3(queue ids[], group, limit) -> (candidates, next_ready)
-- Contract: `candidates` is what log_pop_candidates_v2 (012_pop_engine.sql) listed, less the
-- partitions that log_pop_ready_end_v1 holds back (delayed or inside their window: they are
-- not "pending"), ordered by their queue's priority, highest first, then at random.
-- `next_ready` is the earliest time one of the held-back partitions becomes ready
-- (log_pop_ready_at_v1; null when none is held back): the hotlist reseeds then. What the
-- hotlist is (re)seeded from, and what a pop without a hotlist claims from. Reads only.
-- Locks: none (claiming re-checks everything under the consumer row lock).
CREATE FUNCTION queen.log_pop_candidates_v3(p_queues uuid[], p_group text, p_limit integer)
RETURNS TABLE (candidates uuid[], next_ready timestamptz)
LANGUAGE sql STABLE AS $$
    WITH pending AS (
        SELECT s.*,
               CASE WHEN s.delay = 0 AND s.win = 0 THEN true
                    ELSE queen.log_pop_ready_end_v1(s.id, s.start_at, s.last_offset, 1,
                                                    s.delay, s.win) >= s.start_at
               END AS ready
        FROM (
            SELECT p.id, q.priority, p.last_offset,
                   GREATEST(COALESCE(c.committed, p.log_start - 1) + 1, p.log_start) AS start_at,
                   q.delayed_processing AS delay, q.window_buffer AS win
            FROM queen.log_partitions p
            JOIN queen.queues q ON q.id = p.queue_id
            LEFT JOIN queen.log_consumers c
                   ON c.partition_id = p.id AND c.consumer_group = p_group
            WHERE p.queue_id = ANY (p_queues)
              AND p.last_offset >= GREATEST(COALESCE(c.committed, p.log_start - 1) + 1,
                                            p.log_start)
              AND (c.batch_end IS NULL OR c.lease_expires_at <= now())) s
    )
    SELECT ARRAY(SELECT r.id FROM pending r WHERE r.ready
                 ORDER BY r.priority DESC, random()
                 LIMIT p_limit),
           (SELECT min(queen.log_pop_ready_at_v1(h.id, h.start_at, h.delay, h.win))
            FROM pending h WHERE NOT h.ready)
$$;

-- queen.log_pop_wildcard_v3(tenant, queue, namespace, task, group, worker, batch,
--                           max partitions, lease seconds, subscription new,
--                           subscription from, auto ack, limit)
--   -> segment rows (see log_pop_multi_v2; ordinal is always 1)
-- Contract: that of log_pop_wildcard_v2 (012_pop_engine.sql) through log_pop_scope_v2,
-- log_pop_candidates_v3 and log_pop_multi_v2: held-back partitions are not claimed, and the
-- candidates of higher-priority queues come first (a discovery pop prefers them).
-- Locks: those of log_pop_scope_v2 and log_pop_multi_v2.
CREATE FUNCTION queen.log_pop_wildcard_v3(p_tenant uuid, p_queue text, p_namespace text,
                                          p_task text, p_group text, p_worker text,
                                          p_batch integer, p_max_partitions integer,
                                          p_lease_seconds integer, p_sub_new boolean,
                                          p_sub_from timestamptz, p_auto_ack boolean,
                                          p_limit integer)
RETURNS TABLE (ordinal integer, partition_id uuid, queue_name text, partition_name text,
               span_start bigint, span_end bigint, attempt integer,
               lease_expires_at timestamptz, last_offset bigint, seg_base bigint,
               seg_end bigint, seg_created timestamptz, blob bytea)
LANGUAGE plpgsql AS $$
DECLARE
    v_cands uuid[];
BEGIN
    SELECT c.candidates INTO v_cands
    FROM queen.log_pop_candidates_v3(
        queen.log_pop_scope_v2(p_tenant, p_queue, p_namespace, p_task, p_group, p_sub_new,
                               p_sub_from, true),
        p_group, p_limit) c;
    RETURN QUERY SELECT * FROM queen.log_pop_multi_v2(
        ARRAY[p_group], ARRAY[p_worker], ARRAY[p_batch], ARRAY[p_max_partitions],
        ARRAY[p_lease_seconds], ARRAY[p_auto_ack],
        array_fill(1, ARRAY[cardinality(v_cands)]), v_cands, '{}'::uuid[], '{}'::bigint[]);
END;
$$;

-- The broker no longer calls the 012 versions.
DROP FUNCTION queen.log_pop_wildcard_v2(uuid, text, text, text, text, text, integer, integer,
                                        integer, boolean, boolean, integer);
DROP FUNCTION queen.log_pop_candidates_v2(uuid[], text, integer);
DROP FUNCTION queen.log_pop_multi_v1(text[], text[], integer[], integer[], integer[], boolean[],
                                     integer[], uuid[], uuid[], bigint[]);
DROP FUNCTION queen.log_pop_scope_v1(uuid, text, text, text, text, boolean, boolean);
DROP FUNCTION queen.log_subscribe_new_v1(uuid[], text);
