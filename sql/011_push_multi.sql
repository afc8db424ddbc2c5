-- 011_push_multi.sql: push fusion's procedure, one transaction for many partitions' segments.

-- queen.log_push_multi_v1(tenants[], queues[], partitions[], hashes[], blobs[])
--   -> one row per input segment, by input ordinal
-- Contract: input element i is one segment for partition (tenants[i], queues[i],
-- partitions[i]): `blobs[i]` holds its packed frames, `hashes[i]` 16 bytes per frame in frame
-- order. Queues and partitions are provisioned on first contact. Every partition row is locked
-- before any segment is probed or written. Then, in input order, each segment is probed
-- against its queue's dedup window (queen.log_dedup_probe_v1): a segment holding a duplicate
-- is NOT written and comes back with written = false and its duplicates (dup_index: frame
-- index; dup_offset: the stored original's offset or -1; dup_first: the earlier equal frame
-- of the same segment or -1), so the broker can drop them and resubmit the rest; any other
-- segment gets `count` offsets from its partition's allocator, its segment row and its
-- sidecar row, and comes back with written = true, its base offset and its created_at. One
-- segment's duplicates never stop the others: all written segments commit together. The
-- broker sends distinct partitions; a repeated partition is still correct (its segments take
-- consecutive offsets in input order, and a later one is probed against the earlier).
-- Locks: provisioning first, in (tenant, queue, partition) name order (two calls creating the
-- same new queues cannot wait on each other in a cycle); then every partition row, ascending
-- by id (FOR UPDATE), all before the first probe.
CREATE FUNCTION queen.log_push_multi_v1(p_tenants uuid[], p_queues text[], p_partitions text[],
                                        p_hashes bytea[], p_blobs bytea[])
RETURNS TABLE (ordinal integer, partition_id uuid, written boolean, base_offset bigint,
               created_at timestamptz, dup_index integer[], dup_offset bigint[],
               dup_first integer[])
LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(array_length(p_queues, 1), 0);
    v_pids uuid[];
    v_windows integer[];
    v_starts bigint[];
    v_start bigint;
    v_qid uuid;
    v_probe record;
    v_count integer;
    v_last bigint;
    i integer;
BEGIN
    IF n = 0 THEN
        RETURN;
    END IF;
    v_pids := array_fill(NULL::uuid, ARRAY[n]);
    v_windows := array_fill(NULL::integer, ARRAY[n]);
    v_starts := array_fill(NULL::bigint, ARRAY[n]);

    FOR i IN SELECT o FROM generate_series(1, n) AS o
             ORDER BY p_tenants[o], p_queues[o], p_partitions[o], o LOOP
        v_qid := queen.provision_queue_v1(p_tenants[i], p_queues[i]);
        v_pids[i] := queen.provision_partition_v1(v_qid, p_partitions[i]);
        v_windows[i] := (SELECT q.dedup_window_seconds FROM queen.queues q WHERE q.id = v_qid);
    END LOOP;

    -- Lock order: partition rows ascending by id, one at a time (never a set-based lock).
    FOR i IN SELECT o FROM generate_series(1, n) AS o ORDER BY v_pids[o], o LOOP
        SELECT p.txns_start INTO v_start
        FROM queen.log_partitions p WHERE p.id = v_pids[i] FOR UPDATE;
        v_starts[i] := v_start;
    END LOOP;

    FOR i IN 1 .. n LOOP
        ordinal := i;
        partition_id := v_pids[i];
        SELECT * INTO v_probe
        FROM queen.log_dedup_probe_v1(v_pids[i], v_starts[i], v_windows[i], p_hashes[i]);
        IF v_probe.dup_index IS NOT NULL THEN
            written := false; base_offset := NULL; created_at := NULL;
            dup_index := v_probe.dup_index; dup_offset := v_probe.dup_offset;
            dup_first := v_probe.dup_first;
        ELSE
            v_count := length(p_hashes[i]) / 16;
            UPDATE queen.log_partitions p SET last_offset = p.last_offset + v_count
            WHERE p.id = v_pids[i]
            RETURNING p.last_offset INTO v_last;
            INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, blob)
            VALUES (v_pids[i], v_last - v_count + 1, v_last, p_blobs[i]);
            INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, hashes, deduped)
            VALUES (v_pids[i], v_last - v_count + 1, v_last, p_hashes[i], v_windows[i] > 0);
            written := true; base_offset := v_last - v_count + 1; created_at := now();
            dup_index := NULL; dup_offset := NULL; dup_first := NULL;
        END IF;
        RETURN NEXT;
    END LOOP;
END;
$$;
