-- retention.sql: the retention pass (hash-sidecar purge and segment retention).
--
-- Both deletions remove a contiguous prefix of a partition's log, so `txns_start` and
-- `log_start` stay exact: everything below them is gone, everything at or above is present.
-- (`created_at` is the pushing transaction's start time and is not strictly monotone in offsets,
-- so a prefix is cut at the first row that is still young, never by age alone.)

-- queen.log_retention_v1(sidecar floor seconds) -> what the pass did
-- Contract: one pass over every partition. The sidecar purge drops log_txns rows older than
-- GREATEST(dedup window, completed retention, floor) and moves txns_start past them. Segment
-- retention drops segments older than `retention_seconds` (when > 0), and segments older than
-- `completed_retention_seconds` (when > 0) that every consumer group of the partition has
-- committed; log_start moves past them. Starts only move forward (GREATEST). Safe with several
-- brokers on one database: a pass that cannot take the retention advisory lock does nothing
-- and reports ran = false.
-- Locks: advisory xact lock; then partition rows ascending by id (the push lock order).
CREATE OR REPLACE FUNCTION queen.log_retention_v1(p_txns_floor integer,
                                                  OUT ran boolean, OUT txns_purged bigint,
                                                  OUT segments_deleted bigint)
RETURNS record
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    v_cut bigint;
    v_n bigint;
BEGIN
    txns_purged := 0;
    segments_deleted := 0;
    ran := pg_try_advisory_xact_lock(hashtext('queen.log_retention_v1'));
    IF NOT ran THEN
        RETURN;
    END IF;
    FOR r IN
        SELECT p.id, p.last_offset, p.txns_start, p.log_start,
               now() - make_interval(secs => GREATEST(q.dedup_window_seconds,
                                                      q.completed_retention_seconds,
                                                      p_txns_floor)) AS txns_cutoff,
               q.retention_seconds, q.completed_retention_seconds
        FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
        ORDER BY p.id
    LOOP
        -- Sidecar purge: the prefix before the first row that is still inside the window.
        v_cut := COALESCE((SELECT min(t.base_offset) FROM queen.log_txns t
                           WHERE t.partition_id = r.id AND t.created_at >= r.txns_cutoff),
                          r.last_offset + 1);
        IF v_cut > r.txns_start THEN
            DELETE FROM queen.log_txns t WHERE t.partition_id = r.id AND t.base_offset < v_cut;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            txns_purged := txns_purged + v_n;
            UPDATE queen.log_partitions p SET txns_start = GREATEST(p.txns_start, v_cut)
            WHERE p.id = r.id;
        END IF;

        -- Segment retention.
        v_cut := NULL;
        IF r.retention_seconds > 0 THEN
            v_cut := COALESCE((SELECT min(s.base_offset) FROM queen.log_segments s
                               WHERE s.partition_id = r.id
                                 AND s.created_at >= now() - make_interval(
                                     secs => r.retention_seconds)),
                              r.last_offset + 1);
        END IF;
        IF r.completed_retention_seconds > 0 THEN
            v_cut := GREATEST(v_cut, LEAST(
                COALESCE((SELECT min(s.base_offset) FROM queen.log_segments s
                          WHERE s.partition_id = r.id
                            AND s.created_at >= now() - make_interval(
                                secs => r.completed_retention_seconds)),
                         r.last_offset + 1),
                -- the first segment some group has not fully committed
                COALESCE((SELECT min(s.base_offset) FROM queen.log_segments s
                          WHERE s.partition_id = r.id
                            AND s.end_offset > (SELECT min(c.committed) FROM queen.log_consumers c
                                                WHERE c.partition_id = r.id)),
                         CASE WHEN EXISTS (SELECT 1 FROM queen.log_consumers c
                                           WHERE c.partition_id = r.id)
                              THEN r.last_offset + 1 ELSE r.log_start END)));
        END IF;
        IF v_cut IS NOT NULL AND v_cut > r.log_start THEN
            DELETE FROM queen.log_segments s WHERE s.partition_id = r.id AND s.base_offset < v_cut;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            segments_deleted := segments_deleted + v_n;
            UPDATE queen.log_partitions p SET log_start = GREATEST(p.log_start, v_cut)
            WHERE p.id = r.id;
        END IF;
    END LOOP;
END;
$$;
