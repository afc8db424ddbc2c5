-- 008_ack_fusion.sql: many positional cursor advances in one transaction (ack fusion).

-- queen.log_ack_multi_v1(pids[], groups[], ends[], workers[], counts[]) -> one row per input
-- Contract: row i asks for the positional advance of log_ack_at_v1(pids[i], groups[i],
-- workers[i], ends[i], true, counts[i]): validate worker and lease when the worker is non-empty,
-- clamp to the leased batch_end, advance `committed` (never backward), release the lease when
-- the cursor reaches batch_end, bump total_consumed. There is no nack, retry or DLQ branch: the
-- fusion path only carries full-batch completed acks. Verdicts come back by INPUT ORDINAL
-- (`ordinal` = i), whatever order the rows were executed in: ok = true is Committed, ok = false
-- is Rejected (with the reason), and the whole call commits either way. Two rows on one
-- (partition, group) with different workers stay separate and are each validated on their own.
-- Locks: consumer rows, one at a time, in (partition_id, consumer_group) order (then ordinal),
-- the total order every batched procedure uses, so flushes cannot deadlock with each other, with
-- the transaction wire or with pops.
CREATE FUNCTION queen.log_ack_multi_v1(p_pids uuid[], p_groups text[], p_ends bigint[],
                                       p_workers text[], p_counts integer[])
RETURNS TABLE (ordinal integer, ok boolean, error text, acked bigint, committed bigint,
               lease_released boolean)
LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(array_length(p_pids, 1), 0);
    i integer;
    v jsonb;
BEGIN
    IF n <> coalesce(array_length(p_groups, 1), 0) OR n <> coalesce(array_length(p_ends, 1), 0)
       OR n <> coalesce(array_length(p_workers, 1), 0) OR n <> coalesce(array_length(p_counts, 1), 0) THEN
        RAISE EXCEPTION 'QARG log_ack_multi_v1: the five arrays must have one length';
    END IF;
    FOR i IN SELECT o FROM generate_series(1, n) AS o ORDER BY p_pids[o], p_groups[o], o LOOP
        v := queen.log_ack_at_v1(p_pids[i], p_groups[i], p_workers[i], p_ends[i], true, p_counts[i]);
        ordinal := i;
        ok := (v ->> 'ok')::boolean;
        error := v ->> 'error';
        acked := COALESCE((v ->> 'acked')::bigint, 0);
        committed := (v ->> 'committed')::bigint;
        lease_released := COALESCE((v ->> 'lease_released')::boolean, false);
        RETURN NEXT;
    END LOOP;
END;
$$;
