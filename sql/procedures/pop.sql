-- pop.sql: the pop path: subscriptions, readiness of delayed and windowed queues, candidate
-- lists, the fused claim, and the wildcard/discovery pop.
--
-- A pop leases the contiguous span after the group's cursor: (committed, batch_end]. The broker
-- keeps a hotlist of candidate partitions (a hint) and hands each pop a short list of them;
-- these procedures are the authority that re-checks every candidate under the consumer row
-- lock, whatever a broker believes (several brokers may share the database):
--   * an empty candidate writes nothing: poppability is read without a lock first, and the row
--     is locked (FOR UPDATE SKIP LOCKED, which writes a lock) only when there is something to
--     lease;
--   * a missing consumer row is created only when there is something to deliver, under a
--     non-blocking transaction advisory lock on (partition, group), so no pop ever waits on
--     another's uncommitted insert;
--   * subscription `new` (or `from <time>`) is recorded once per (queue, group) in `log_groups`,
--     seeding the partitions that exist then;
--   * many pops (jobs) claim in one transaction (pop fusion), answered by job ordinal;
--   * segments the broker already holds decoded come back without their blob;
--   * `delayed_processing` and `window_buffer` hold partitions back (log_pop_ready_end_v1), in
--     the claim and in the candidate list alike; `priority` orders the candidate list.
-- Lock order: no pop procedure ever waits for a row lock (SKIP LOCKED, try-advisory locks);
-- fused jobs still visit (partition, group) pairs in ascending order. The pop path takes no
-- partition row lock.

-- queen.consumer_lock_key_v1(partition id, group) -> bigint
-- Contract: the transaction advisory-lock key that guards the creation of one consumer row.
CREATE OR REPLACE FUNCTION queen.consumer_lock_key_v1(p_pid uuid, p_group text)
RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT hashtextextended(p_pid::text || '/' || p_group, 7217)
$$;

-- queen.log_subscribe_new_v2(queue ids[], group, from) -> void
-- Contract: the first time `group` pops a queue with subscription `new` (`from` null) or
-- `from <time>`, records the group in `log_groups` and seeds its cursor on every partition of
-- the queue that has no cursor row for it: at the tail (`from` null), or before the first
-- segment created at or after `from` (the tail when there is none). Partitions created later
-- start at their beginning. Later calls read one index entry and write nothing, whatever their
-- `from`.
-- Locks: the `log_groups` row insert (a concurrent subscriber waits, then finds it); the
-- creation advisory lock (consumer_lock_key_v1) of every seeded (partition, group), in
-- partition id order.
CREATE OR REPLACE FUNCTION queen.log_subscribe_new_v2(p_queues uuid[], p_group text,
                                                      p_from timestamptz)
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

-- queen.log_pop_ready_end_v1(partition id, start, last offset, budget, delay s, window s)
--   -> the last offset a pop may deliver from `start` on (start - 1 = nothing)
-- Contract: with `window` > 0 and the partition's newest segment created less than `window`
-- seconds ago, nothing. Otherwise, with `delay` > 0, the offset before the first segment
-- overlapping [start, start + budget - 1] that was created less than `delay` seconds ago (at
-- most start + budget - 1 and `last`: a bound, since a pop never delivers more than its
-- budget). Otherwise `last`. Ages are against the transaction's now(), as segments' created_at.
-- Reads only (the segments' primary key; never more than `budget` segments).
-- Locks: none.
CREATE OR REPLACE FUNCTION queen.log_pop_ready_end_v1(p_pid uuid, p_start bigint, p_last bigint,
                                                      p_budget integer, p_delay integer,
                                                      p_window integer)
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

-- queen.log_pop_ready_at_v1(partition id, start, delay s, window s) -> timestamptz
-- Contract: when a partition that log_pop_ready_end_v1 holds back at `start` becomes ready:
-- its newest segment's creation plus `window`, and the creation of the segment holding `start`
-- plus `delay` (the later of those that apply; null when neither does).
-- Reads only (two primary-key probes). Locks: none.
CREATE OR REPLACE FUNCTION queen.log_pop_ready_at_v1(p_pid uuid, p_start bigint, p_delay integer,
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
-- Contract: `candidates` is at most `limit` partitions of the given queues that hold messages
-- after the group's cursor (a missing cursor row counts from the partition's beginning), carry
-- no live lease for the group and are not held back by log_pop_ready_end_v1 (delayed or inside
-- their window: they are not "pending"), ordered by their queue's priority, highest first, then
-- at random. `next_ready` is the earliest time one of the held-back partitions becomes ready
-- (log_pop_ready_at_v1; null when none is held back): the hotlist reseeds then. What the
-- hotlist is (re)seeded from, and what a pop without a hotlist claims from. Reads only.
-- Locks: none (claiming re-checks everything under the consumer row lock).
CREATE OR REPLACE FUNCTION queen.log_pop_candidates_v3(p_queues uuid[], p_group text,
                                                       p_limit integer)
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

-- queen.log_pop_scope_v2(tenant, queue, namespace, task, group, subscription new,
--                        subscription from, provision) -> the queue ids a pop reads
-- Contract: a queue pop (`queue` not null) resolves its one queue, provisioning it when
-- `provision` (a pop of an unknown queue creates it, as push does); a discovery pop (`queue`
-- null) the tenant's queues matching namespace and task (an empty filter matches any). A group
-- subscribes on each (log_subscribe_new_v2) when `sub_new` is true or `sub_from` is not null,
-- from `sub_from` when given (it overrides `sub_new`), else at the tail.
-- Locks: those of provision_queue_v1 and log_subscribe_new_v2.
CREATE OR REPLACE FUNCTION queen.log_pop_scope_v2(p_tenant uuid, p_queue text, p_namespace text,
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
-- Contract: job i (1-based) pops for group `groups[i]` under leaseId `workers[i]`: it may claim
-- up to `max_partitions[i]` of its candidates (the partitions whose entry in `candidate_jobs`
-- is i) and deliver at most `batches[i]` messages in total. All jobs claim in this one
-- transaction; a partition claimed by one job is leased, so no other job of the call (or any
-- other pop) gets it. A claim leases the span after the group's cursor (auto ack commits it
-- instead):
--   * nothing deliverable (an unknown or empty partition, nothing after the cursor, a live
--     lease, a partition held back by its queue's delayed_processing or window_buffer) is found
--     without taking any lock, and writes nothing;
--   * a span never goes past what log_pop_ready_end_v1 allows (it stops before the first
--     segment still delayed); the bound is computed once, before locking, against the
--     transaction's now(), and the span re-checked under the row lock is clamped to it;
--   * a missing consumer row starts at the partition's beginning (subscription `new` seeded
--     the partitions that existed beforehand, see log_subscribe_new_v2) and is created only
--     under the creation advisory lock (consumer_lock_key_v1), taken without waiting.
-- A null lease length takes the queue's `lease_time`; `attempt` counts deliveries of a span
-- starting at the same offset. Each row carries the claimed span, its job's ordinal, the
-- partition's true last offset and one segment overlapping the span; `blob` is null when the
-- segment is listed in (cached partitions, cached bases), which the broker holds decoded. A job
-- may come back with no row; it plans its partitions from what it reads before locking, so a
-- candidate held by another transaction at the moment of locking is skipped, not replaced by
-- the job's next candidate (the broker's next attempt takes new candidates).
-- Plan: force_generic_plan (its claim statement was planned on a quarter of the calls, 1.6 ms
-- each for a 0.4 ms execution; it is keyed by candidate partition ids).
-- Locks: consumer rows FOR UPDATE SKIP LOCKED, visited in ascending (partition id, group) when
-- several jobs share the call (one job keeps its candidates' order: the hotlist's, or priority
-- then random); creation advisory locks taken without waiting. Never waits on a lock.
CREATE OR REPLACE FUNCTION queen.log_pop_multi_v2(p_groups text[], p_workers text[],
                                                  p_batches integer[], p_max_partitions integer[],
                                                  p_lease_seconds integer[], p_auto_acks boolean[],
                                                  p_cand_jobs integer[], p_cand_pids uuid[],
                                                  p_cached_pids uuid[], p_cached_bases bigint[])
RETURNS TABLE (ordinal integer, partition_id uuid, queue_name text, partition_name text,
               span_start bigint, span_end bigint, attempt integer,
               lease_expires_at timestamptz, last_offset bigint, seg_base bigint,
               seg_end bigint, seg_created timestamptz, blob bytea)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
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

-- queen.log_pop_multi_v3(job groups[], job workers[], job batches[], job max partitions[],
--                        job lease seconds[], job auto acks[], candidate jobs[],
--                        candidate partitions[], cached partitions[], cached bases[])
--   -> one row per segment delivered, tagged with its job's ordinal
-- Contract: that of log_pop_multi_v2, rows and writes, except that rows come grouped by job
-- rather than in one global order (each job's rows in segment order). When every job has
-- exactly one candidate and no (partition, group) is asked twice (hotlist pops, nearly all
-- pops), one statement locks the candidates' consumer rows that have something to deliver
-- (skipping locked ones), leases them and returns the spans; a second returns the spans'
-- segments. A candidate whose consumer row does not exist yet or whose queue delays or windows
-- its messages is handed to log_pop_multi_v2 with its job's arguments, and so is any other
-- shape of call, whole.
-- Plan: force_generic_plan (keyed by candidate partition ids).
-- Locks: consumer rows FOR UPDATE SKIP LOCKED, the candidates sorted by (partition id, group);
-- through log_pop_multi_v2, its locks. Never waits on a lock, so the order in which the plan
-- visits rows cannot deadlock.
CREATE OR REPLACE FUNCTION queen.log_pop_multi_v3(p_groups text[], p_workers text[],
                                                  p_batches integer[], p_max_partitions integer[],
                                                  p_lease_seconds integer[], p_auto_acks boolean[],
                                                  p_cand_jobs integer[], p_cand_pids uuid[],
                                                  p_cached_pids uuid[], p_cached_bases bigint[])
RETURNS TABLE (ordinal integer, partition_id uuid, queue_name text, partition_name text,
               span_start bigint, span_end bigint, attempt integer,
               lease_expires_at timestamptz, last_offset bigint, seg_base bigint,
               seg_end bigint, seg_created timestamptz, blob bytea)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    n integer := coalesce(array_length(p_groups, 1), 0);
    v_jobs integer[];
    v_pids uuid[];
    v_queues text[];
    v_names text[];
    v_starts bigint[];
    v_ends bigint[];
    v_attempts integer[];
    v_leases timestamptz[];
    v_lasts bigint[];
    v_general_jobs integer[];
    v_general_pids uuid[];
BEGIN
    IF coalesce(array_length(p_cand_jobs, 1), 0) <> n
       OR (SELECT count(DISTINCT u.job) FILTER (WHERE u.job BETWEEN 1 AND n)
           FROM unnest(p_cand_jobs) AS u(job)) <> n
       OR EXISTS (SELECT 1 FROM unnest(p_cand_jobs, p_cand_pids) AS u(job, pid)
                  GROUP BY u.pid, p_groups[u.job] HAVING count(*) > 1) THEN
        RETURN QUERY SELECT * FROM queen.log_pop_multi_v2(
            p_groups, p_workers, p_batches, p_max_partitions, p_lease_seconds, p_auto_acks,
            p_cand_jobs, p_cand_pids, p_cached_pids, p_cached_bases);
        RETURN;
    END IF;

    -- One candidate per job: lock what has something to deliver, lease it (re-checked under
    -- the lock, as in 016), and note the candidates only log_pop_multi_v2 can judge.
    WITH looked AS MATERIALIZED (
        SELECT c.job, c.pid, c.grp, l.before, p.last_offset AS last_at, p.log_start,
               p.name AS pname, q.name AS qname,
               COALESCE(p_lease_seconds[c.job], q.lease_time) AS lease,
               l.before IS NULL
                   AND (q.delayed_processing <> 0 OR q.window_buffer <> 0
                        OR NOT EXISTS (SELECT 1 FROM queen.log_consumers x
                                       WHERE x.partition_id = c.pid
                                         AND x.consumer_group = c.grp)) AS general
        FROM (SELECT u.job, u.pid, p_groups[u.job] AS grp
              FROM unnest(p_cand_jobs, p_cand_pids) AS u(job, pid)
              ORDER BY u.pid, p_groups[u.job]) c
        JOIN queen.log_partitions p ON p.id = c.pid
        JOIN queen.queues q ON q.id = p.queue_id
        LEFT JOIN LATERAL (
            SELECT lc.committed AS before
            FROM queen.log_consumers lc
            WHERE lc.partition_id = c.pid AND lc.consumer_group = c.grp
              AND q.delayed_processing = 0 AND q.window_buffer = 0
              AND p_max_partitions[c.job] >= 1 AND p_batches[c.job] >= 1
              AND (lc.batch_end IS NULL OR lc.lease_expires_at <= now())
              AND GREATEST(lc.committed + 1, p.log_start) <= p.last_offset
            FOR UPDATE SKIP LOCKED) l ON true
    ), spans AS (
        SELECT k.*, GREATEST(k.before + 1, k.log_start) AS s,
               LEAST(GREATEST(k.before + 1, k.log_start) + p_batches[k.job] - 1, k.last_at) AS e
        FROM looked k
        WHERE k.before IS NOT NULL
    ), leased AS (
        UPDATE queen.log_consumers lc SET
            committed = CASE WHEN p_auto_acks[k.job] THEN k.e ELSE lc.committed END,
            batch_end = CASE WHEN p_auto_acks[k.job] THEN NULL ELSE k.e END,
            worker_id = CASE WHEN p_auto_acks[k.job] THEN NULL ELSE p_workers[k.job] END,
            lease_expires_at = CASE WHEN p_auto_acks[k.job] THEN NULL
                                    ELSE now() + make_interval(secs => k.lease) END,
            batch_retry_count = CASE WHEN p_auto_acks[k.job] THEN 0
                                     ELSE lc.batch_retry_count END,
            attempt_count = CASE WHEN p_auto_acks[k.job] THEN 0
                                 WHEN lc.attempt_from = k.s THEN lc.attempt_count + 1
                                 ELSE 1 END,
            attempt_from = CASE WHEN p_auto_acks[k.job] THEN NULL ELSE k.s END,
            total_consumed = lc.total_consumed
                + CASE WHEN p_auto_acks[k.job] THEN k.e - k.s + 1 ELSE 0 END
        FROM spans k
        WHERE lc.partition_id = k.pid AND lc.consumer_group = k.grp
          AND (lc.batch_end IS NULL OR lc.lease_expires_at <= now())
          AND k.s <= k.last_at
        RETURNING k.job, k.pid, k.qname, k.pname, k.s, k.e,
                  CASE WHEN p_auto_acks[k.job] THEN 1 ELSE lc.attempt_count END AS att,
                  lc.lease_expires_at AS lease_at, k.last_at
    )
    SELECT a.jobs, a.pids, a.queues, a.names, a.starts, a.ends, a.attempts, a.leases, a.lasts,
           g.jobs, g.pids
    INTO v_jobs, v_pids, v_queues, v_names, v_starts, v_ends, v_attempts, v_leases, v_lasts,
         v_general_jobs, v_general_pids
    FROM (SELECT array_agg(x.job) AS jobs, array_agg(x.pid) AS pids,
                 array_agg(x.qname) AS queues, array_agg(x.pname) AS names,
                 array_agg(x.s) AS starts, array_agg(x.e) AS ends, array_agg(x.att) AS attempts,
                 array_agg(x.lease_at) AS leases, array_agg(x.last_at) AS lasts
          FROM leased x) a,
         (SELECT array_agg(k.job) AS jobs, array_agg(k.pid) AS pids
          FROM looked k WHERE k.general) g;

    -- The leased spans' segments, as 016 delivers them (a held one without its blob).
    RETURN QUERY
    SELECT c.job, c.pid, c.qname, c.pname, c.s, c.e, c.att, c.lease_at, c.last_at,
           g.base_offset, g.end_offset, g.created_at,
           CASE WHEN EXISTS (SELECT 1 FROM unnest(p_cached_pids, p_cached_bases) AS x(pid, base)
                             WHERE x.pid = c.pid AND x.base = g.base_offset)
                THEN NULL ELSE g.blob END
    FROM unnest(v_jobs, v_pids, v_queues, v_names, v_starts, v_ends, v_attempts, v_leases,
                v_lasts) AS c(job, pid, qname, pname, s, e, att, lease_at, last_at)
    JOIN queen.log_segments g
      ON g.partition_id = c.pid
     AND g.base_offset >= COALESCE((SELECT max(x.base_offset) FROM queen.log_segments x
                                    WHERE x.partition_id = c.pid AND x.base_offset <= c.s), c.s)
     AND g.base_offset <= c.e
    ORDER BY c.job, g.base_offset;

    -- First contacts and delayed or windowed queues: log_pop_multi_v2 with only those
    -- candidates (the other jobs, left without one, claim nothing there), so its ordinals are
    -- already the jobs' own.
    IF v_general_jobs IS NOT NULL THEN
        RETURN QUERY SELECT * FROM queen.log_pop_multi_v2(
            p_groups, p_workers, p_batches, p_max_partitions, p_lease_seconds, p_auto_acks,
            v_general_jobs, v_general_pids, p_cached_pids, p_cached_bases);
    END IF;
END;
$$;

-- queen.log_pop_wildcard_v3(tenant, queue, namespace, task, group, worker, batch,
--                           max partitions, lease seconds, subscription new,
--                           subscription from, auto ack, limit)
--   -> segment rows (see log_pop_multi_v2; ordinal is always 1)
-- Contract: a wildcard pop without the hotlist: resolves the queues (log_pop_scope_v2, a queue
-- pop provisioning its queue), lists at most `limit` candidates (log_pop_candidates_v3:
-- held-back partitions are not listed, higher-priority queues come first, so a discovery pop
-- prefers them), and claims from them as one job (log_pop_multi_v2). What a pop runs when the
-- hotlist is off, for discovery pops, and for a pop that does not wait while the hotlist has
-- nothing.
-- Locks: those of log_pop_scope_v2 and log_pop_multi_v2.
CREATE OR REPLACE FUNCTION queen.log_pop_wildcard_v3(p_tenant uuid, p_queue text, p_namespace text,
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
