-- 021_pop_claim_direct.sql: the fused pop claims a flush of one-candidate jobs in one direct
-- statement (issue 12, found profiling drain-pop1).
--
-- log_pop_multi_v2 (016) answers any mix of jobs: several candidates per job sharing its
-- message budget, one job per (partition, group), consumer rows created on first contact,
-- delayed and windowed queues. That generality costs a statement of ten CTEs (candidate look,
-- ready bounds, budget windows, DISTINCT ON, lock, lease, create, union, segments) whose fixed
-- cost is about 0.12 ms per call before a single job is claimed. Hotlist pops, which are
-- nearly all pops, send exactly one candidate per job. In drain-pop1 a flush of 8.9 such jobs
-- spent 0.345 ms in it, a third of the flush. Measured with pgbench on 9 one-candidate jobs:
-- 0.38 ms per call through log_pop_multi_v2, 0.26 ms through this file. In drain-pop1
-- (interleaved runs): 0.345 -> 0.28-0.31 ms per call, flushes 0.99-1.01 -> 0.87-0.95 ms, drain
-- rate 7 890-8 040 -> 8 400-8 640 msg/s.
--
-- queen.log_pop_multi_v3 takes log_pop_multi_v2's arguments and gives its answers. When every
-- job has exactly one candidate and no (partition, group) is asked twice, one statement locks
-- the candidates' consumer rows that have something to deliver (skipping locked ones), leases
-- them and returns the spans; a second returns the spans' segments. A candidate whose consumer
-- row does not exist yet or whose queue delays or windows its messages is handed to
-- log_pop_multi_v2, which knows those rules. Any other shape of call goes to
-- log_pop_multi_v2 whole.

-- queen.log_pop_multi_v3(job groups[], job workers[], job batches[], job max partitions[],
--                        job lease seconds[], job auto acks[], candidate jobs[],
--                        candidate partitions[], cached partitions[], cached bases[])
--   -> one row per segment delivered, tagged with its job's ordinal
-- Contract: that of log_pop_multi_v2 (016), rows and writes, except that rows come grouped by
-- job rather than in one global order (each job's rows in segment order).
-- Locks: consumer rows FOR UPDATE SKIP LOCKED, the candidates sorted by (partition id, group);
-- through log_pop_multi_v2, its locks. Never waits on a lock, so the order in which the plan
-- visits rows cannot deadlock.
CREATE FUNCTION queen.log_pop_multi_v3(p_groups text[], p_workers text[], p_batches integer[],
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

ALTER FUNCTION queen.log_pop_multi_v3 SET plan_cache_mode = force_generic_plan;
