-- 003_push.sql: the push path.

-- queen.log_dedup_probe_v1(partition id, txns_start, window seconds, hashes) -> duplicates
-- Contract: for the frames of one incoming segment (16-byte hashes concatenated in frame order)
-- returns, for every frame that is a duplicate, its index in the input together with
-- `dup_offset`, the offset of the stored original inside the dedup window (-1 when none), and
-- `dup_first`, the index of an earlier equal frame of the same input (-1 when none): within one
-- request the first of two equal transactionIds wins. A window of 0 turns deduplication off.
-- Locks: none; the caller holds the partition row lock, which serialises pushes.
-- Cost: proportional to the frames pushed to the partition inside the window (the sidecar is
-- exploded once and hash-joined against the input).
CREATE FUNCTION queen.log_dedup_probe_v1(p_pid uuid, p_txns_start bigint, p_window integer,
                                         p_hashes bytea,
                                         OUT dup_index integer[], OUT dup_offset bigint[],
                                         OUT dup_first integer[])
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF p_window <= 0 THEN
        RETURN;
    END IF;
    WITH input AS (
        SELECT k, substring(p_hashes FROM k * 16 + 1 FOR 16) AS hash
        FROM generate_series(0, length(p_hashes) / 16 - 1) AS k
    ), firsts AS (
        SELECT hash, min(k) AS first FROM input GROUP BY hash
    ), stored AS (
        SELECT x.hash, min(x.off) AS off
        FROM (SELECT substring(t.hashes FROM j * 16 + 1 FOR 16) AS hash, t.base_offset + j AS off
              FROM queen.log_txns t
              CROSS JOIN LATERAL generate_series(0, (t.end_offset - t.base_offset)::integer) AS j
              WHERE t.partition_id = p_pid
                AND t.base_offset >= p_txns_start
                AND t.created_at >= now() - make_interval(secs => p_window)) AS x
        WHERE x.hash IN (SELECT hash FROM firsts)
        GROUP BY x.hash
    )
    SELECT array_agg(i.k ORDER BY i.k),
           array_agg(COALESCE(s.off, -1) ORDER BY i.k),
           array_agg(CASE WHEN i.k > f.first THEN f.first ELSE -1 END ORDER BY i.k)
    INTO dup_index, dup_offset, dup_first
    FROM input i
    JOIN firsts f USING (hash)
    LEFT JOIN stored s USING (hash)
    WHERE i.k > f.first OR s.off IS NOT NULL;
END;
$$;

-- queen.log_push_v1(tenant, queues[], partitions[], hashes[], blobs[]) -> one row per input group
-- Contract: each input group i is one segment for partition (queues[i], partitions[i]): `blobs[i]`
-- holds its compressed frames, `hashes[i]` 16 bytes per frame in frame order. Queues and
-- partitions are provisioned on first contact. Under the partition row locks, every group is
-- probed against its queue's dedup window. When any group holds a duplicate NOTHING is written:
-- every row comes back with written = false and the duplicates listed, and the broker calls
-- again without them. Otherwise every group gets `count` offsets from its partition's allocator,
-- its segment and its sidecar row, and comes back with written = true and its base offset. All
-- groups commit together.
-- Locks: provisioning first, then partition rows ascending by id (FOR UPDATE).
CREATE FUNCTION queen.log_push_v1(p_tenant uuid, p_queues text[], p_partitions text[],
                                  p_hashes bytea[], p_blobs bytea[])
RETURNS TABLE (ordinal integer, partition_id uuid, base_offset bigint, written boolean,
               dup_index integer[], dup_offset bigint[], dup_first integer[])
LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(array_length(p_queues, 1), 0);
    v_pids uuid[] := '{}';
    v_windows integer[] := '{}';
    v_bases bigint[];
    v_any_dup boolean := false;
    v_order integer[];
    v_txns_start bigint;
    v_last bigint;
    v_count integer;
    v_probe record;
    v_qid uuid;
    i integer;
BEGIN
    FOR i IN 1 .. n LOOP
        v_qid := queen.provision_queue_v1(p_tenant, p_queues[i]);
        v_pids := v_pids || queen.provision_partition_v1(v_qid, p_partitions[i]);
        v_windows := v_windows || (SELECT q.dedup_window_seconds FROM queen.queues q
                                   WHERE q.id = v_qid);
    END LOOP;
    v_bases := array_fill(NULL::bigint, ARRAY[n]);

    -- Lock order: partition rows ascending by id.
    SELECT array_agg(o ORDER BY v_pids[o], o) INTO v_order FROM generate_series(1, n) AS o;
    FOR i IN SELECT unnest(v_order) LOOP
        SELECT p.txns_start INTO v_txns_start
        FROM queen.log_partitions p WHERE p.id = v_pids[i] FOR UPDATE;
        SELECT * INTO v_probe
        FROM queen.log_dedup_probe_v1(v_pids[i], v_txns_start, v_windows[i], p_hashes[i]);
        IF v_probe.dup_index IS NOT NULL THEN
            v_any_dup := true;
            ordinal := i; partition_id := v_pids[i]; base_offset := NULL; written := false;
            dup_index := v_probe.dup_index; dup_offset := v_probe.dup_offset;
            dup_first := v_probe.dup_first;
            RETURN NEXT;
        END IF;
    END LOOP;
    IF v_any_dup THEN
        RETURN;
    END IF;

    FOR i IN SELECT unnest(v_order) LOOP
        v_count := length(p_hashes[i]) / 16;
        UPDATE queen.log_partitions p SET last_offset = p.last_offset + v_count
        WHERE p.id = v_pids[i]
        RETURNING p.last_offset INTO v_last;
        v_bases[i] := v_last - v_count + 1;
        INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, blob)
        VALUES (v_pids[i], v_bases[i], v_last, p_blobs[i]);
        INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, hashes)
        VALUES (v_pids[i], v_bases[i], v_last, p_hashes[i]);
    END LOOP;

    FOR i IN 1 .. n LOOP
        ordinal := i; partition_id := v_pids[i]; base_offset := v_bases[i]; written := true;
        dup_index := NULL; dup_offset := NULL; dup_first := NULL;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- queen.log_segment_at_v1(partition id, offset) -> the segment covering `offset`
-- Contract: the one segment whose span holds `offset`, or no row when retention removed it.
-- Used by the broker to unpack a single frame (a duplicate's original id, a DLQ payload).
-- Locks: none.
CREATE FUNCTION queen.log_segment_at_v1(p_pid uuid, p_offset bigint)
RETURNS TABLE (base_offset bigint, end_offset bigint, created_at timestamptz, blob bytea)
LANGUAGE sql STABLE AS $$
    SELECT c.base_offset, c.end_offset, c.created_at, c.blob
    FROM (SELECT s.* FROM queen.log_segments s
          WHERE s.partition_id = p_pid AND s.base_offset <= p_offset
          ORDER BY s.base_offset DESC
          LIMIT 1) AS c
    WHERE c.end_offset >= p_offset
$$;
