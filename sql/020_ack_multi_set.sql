-- 020_ack_multi_set.sql: ack fusion's commit judges and advances its rows in two statements
-- instead of three nested calls per row (issue 12, found profiling drain-pop1).
--
-- log_ack_multi_v1 (008) ran log_ack_at_v1 once per row: a PL/pgSQL call that locked the row
-- through log_ack_consumer_v1, built a jsonb verdict that the loop parsed back, and advanced the
-- cursor through log_cursor_advance_v1. With track_functions = pl in drain-pop1 that came to
-- about 33 us per row (10 locking, 9 advancing, 14 in calls and jsonb), 0.30 ms of every
-- ~1.05 ms flush of its one commit lane. Measured with pgbench on calls of 9 leased rows: 0.33
-- ms per call before, 0.21 ms with this file (about 0.1 ms per call plus 11 us per row). In
-- drain-pop1 (interleaved runs): 0.29 -> 0.23 ms per call of 8.8 rows, flushes 1.04 -> 0.99 ms,
-- drain rate 7 580-7 730 -> 7 950-8 130 msg/s.
--
-- What changes:
--   * the cursor advance is written once, in its set form, log_cursor_advances_v1; the
--     one-row log_cursor_advance_v1 that every other caller uses is now a call of it;
--   * log_ack_multi_v1 keeps its signature, contract and answers. When every row carries a
--     worker and no (partition, group) appears twice, which is every flush the broker sends in
--     practice, one statement locks and judges all rows and one call advances the accepted
--     ones. Otherwise it runs the per-row loop of 008 unchanged: a row without a worker may
--     create its consumer row and checks the log end instead of a lease, and two rows of one
--     (partition, group) must see each other's advance, which only the sequential loop gives.

-- queen.log_cursor_advances_v1(partition ids[], groups[], new committed[], release[]) -> void
-- Contract: THE cursor-advance UPDATE, for every (pids[i], groups[i]) at once: moves the group's
-- `committed` to GREATEST(committed, news[i]) (never backward) and adds the distance moved to
-- total_consumed; with releases[i] it also ends the lease (batch_end, worker_id,
-- lease_expires_at := null) and resets the retry and attempt state of the batch. Each
-- (partition, group) appears at most once. Validation (lease, bounds) is the caller's.
-- Locks: the consumer rows (the callers already hold them FOR UPDATE).
CREATE FUNCTION queen.log_cursor_advances_v1(p_pids uuid[], p_groups text[], p_news bigint[],
                                             p_releases boolean[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE queen.log_consumers lc SET
        committed = GREATEST(lc.committed, u.new_at),
        batch_end = CASE WHEN u.release THEN NULL ELSE lc.batch_end END,
        worker_id = CASE WHEN u.release THEN NULL ELSE lc.worker_id END,
        lease_expires_at = CASE WHEN u.release THEN NULL ELSE lc.lease_expires_at END,
        batch_retry_count = CASE WHEN u.release THEN 0 ELSE lc.batch_retry_count END,
        attempt_count = CASE WHEN u.release THEN 0 ELSE lc.attempt_count END,
        attempt_from = CASE WHEN u.release THEN NULL ELSE lc.attempt_from END,
        total_consumed = lc.total_consumed + (GREATEST(lc.committed, u.new_at) - lc.committed)
    FROM unnest(p_pids, p_groups, p_news, p_releases) AS u(pid, grp, new_at, release)
    WHERE lc.partition_id = u.pid AND lc.consumer_group = u.grp;
END;
$$;

-- queen.log_cursor_advance_v1(partition id, group, new committed, release) -> void
-- Contract: unchanged (013, 018): log_cursor_advances_v1 for one row.
-- Locks: the consumer row (the callers already hold it FOR UPDATE).
CREATE OR REPLACE FUNCTION queen.log_cursor_advance_v1(p_pid uuid, p_group text, p_new bigint,
                                                       p_release boolean)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM queen.log_cursor_advances_v1(ARRAY[p_pid], ARRAY[p_group], ARRAY[p_new],
                                         ARRAY[p_release]);
END;
$$;

-- queen.log_ack_multi_v1(pids[], groups[], ends[], workers[], counts[]) -> one row per input
-- Contract: unchanged from 008: row i gets the verdict of log_ack_at_v1(pids[i], groups[i],
-- workers[i], ends[i], true, counts[i]) run over the rows in (partition, group, ordinal) order,
-- by input ordinal, and the call commits whatever the verdicts. For leased rows on distinct
-- (partition, group) the set statement below applies log_ack_at_v1's leased branch as written
-- there: a missing row or a lease that is not this worker's and live is 'invalid or expired
-- lease' (committed null for a missing row); past batch_end is 'beyond the leased batch'; a
-- count whose span does not start right after the cursor is 'cursor moved since the pop';
-- otherwise the cursor goes to GREATEST(committed, end), the lease is released once it
-- reaches batch_end, and a row that neither moves nor releases is not written.
-- Locks: consumer rows FOR UPDATE, in (partition_id, consumer_group) order, as before.
CREATE OR REPLACE FUNCTION queen.log_ack_multi_v1(p_pids uuid[], p_groups text[],
                                                  p_ends bigint[], p_workers text[],
                                                  p_counts integer[])
RETURNS TABLE (ordinal integer, ok boolean, error text, acked bigint, committed bigint,
               lease_released boolean)
LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(array_length(p_pids, 1), 0);
    i integer;
    v jsonb;
    v_o integer[];
    v_refusal text[];
    v_was bigint[];
    v_new bigint[];
    v_released boolean[];
    v_moved_pids uuid[];
    v_moved_groups text[];
    v_moved_news bigint[];
    v_moved_releases boolean[];
BEGIN
    IF n <> coalesce(array_length(p_groups, 1), 0) OR n <> coalesce(array_length(p_ends, 1), 0)
       OR n <> coalesce(array_length(p_workers, 1), 0) OR n <> coalesce(array_length(p_counts, 1), 0) THEN
        RAISE EXCEPTION 'QARG log_ack_multi_v1: the five arrays must have one length';
    END IF;
    IF array_position(p_workers, '') IS NOT NULL OR array_position(p_workers, NULL) IS NOT NULL
       OR EXISTS (SELECT 1 FROM unnest(p_pids, p_groups) AS u(pid, grp)
                  GROUP BY u.pid, u.grp HAVING count(*) > 1) THEN
        -- The general case, row by row (008).
        FOR i IN SELECT o FROM generate_series(1, n) AS o ORDER BY p_pids[o], p_groups[o], o LOOP
            v := queen.log_ack_at_v1(p_pids[i], p_groups[i], p_workers[i], p_ends[i], true,
                                     p_counts[i]);
            ordinal := i;
            ok := (v ->> 'ok')::boolean;
            error := v ->> 'error';
            acked := COALESCE((v ->> 'acked')::bigint, 0);
            committed := (v ->> 'committed')::bigint;
            lease_released := COALESCE((v ->> 'lease_released')::boolean, false);
            RETURN NEXT;
        END LOOP;
        RETURN;
    END IF;

    -- Every row leased, each on its own (partition, group): lock in order and judge at once.
    WITH judged AS (
        SELECT i.o::integer AS o, i.pid, i.grp, l.was, l.batch_end,
               CASE WHEN l.was IS NULL
                         OR NOT (l.worker_id IS NOT DISTINCT FROM i.worker
                                 AND queen.lease_live_v1(l.batch_end, l.lease_expires_at))
                    THEN 'invalid or expired lease'
                    WHEN i.upto > l.batch_end THEN 'beyond the leased batch'
                    WHEN COALESCE(i.cnt, 0) > 0 AND l.was <> i.upto - i.cnt
                    THEN 'cursor moved since the pop'
               END AS refusal,
               GREATEST(l.was, i.upto) AS new_at
        FROM (SELECT * FROM unnest(p_pids, p_groups, p_ends, p_workers, p_counts)
                            WITH ORDINALITY AS u(pid, grp, upto, worker, cnt, o)
              ORDER BY u.pid, u.grp) i
        LEFT JOIN LATERAL (
            SELECT lc.committed AS was, lc.batch_end, lc.worker_id, lc.lease_expires_at
            FROM queen.log_consumers lc
            WHERE lc.partition_id = i.pid AND lc.consumer_group = i.grp
            FOR UPDATE) l ON true
    ), moving AS (
        SELECT j.*, j.refusal IS NULL AND j.new_at >= j.batch_end AS releases,
               j.refusal IS NULL AND (j.new_at <> j.was OR j.new_at >= j.batch_end) AS writes
        FROM judged j
    )
    SELECT array_agg(m.o), array_agg(m.refusal), array_agg(m.was), array_agg(m.new_at),
           array_agg(m.releases),
           array_agg(m.pid) FILTER (WHERE m.writes), array_agg(m.grp) FILTER (WHERE m.writes),
           array_agg(m.new_at) FILTER (WHERE m.writes),
           array_agg(m.releases) FILTER (WHERE m.writes)
    INTO v_o, v_refusal, v_was, v_new, v_released,
         v_moved_pids, v_moved_groups, v_moved_news, v_moved_releases
    FROM moving m;
    IF v_moved_pids IS NOT NULL THEN
        PERFORM queen.log_cursor_advances_v1(v_moved_pids, v_moved_groups, v_moved_news,
                                             v_moved_releases);
    END IF;
    RETURN QUERY
    SELECT x.o, x.refusal IS NULL, x.refusal,
           CASE WHEN x.refusal IS NULL THEN x.new_at - x.was ELSE 0 END,
           CASE WHEN x.refusal IS NULL THEN x.new_at ELSE x.was END,
           x.released
    FROM unnest(v_o, v_refusal, v_was, v_new, v_released) AS x(o, refusal, was, new_at, released)
    ORDER BY x.o;
END;
$$;

-- CREATE OR REPLACE resets a function's settings: keep 019's generic plans, and give the set
-- advance one too (its UPDATE is keyed by the consumer rows' primary key whatever the values).
ALTER FUNCTION queen.log_ack_multi_v1 SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION queen.log_cursor_advances_v1 SET plan_cache_mode = force_generic_plan;
