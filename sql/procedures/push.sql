-- push.sql: the push path: deduplication, the maxSize check, the one-request push and push
-- fusion's many-partition push, and reading back one segment.
--
-- A partition row is the push serializer (`last_offset` is the offset allocator): every push
-- locks the partition rows it writes, ascending by id, after provisioning and after the rows of
-- the queues with a maxSize. A push writes one segment row (the packed frames) and one sidecar
-- row (16 bytes of transactionId hash per frame) per partition; the sidecar's dedup index is
-- defined with the tables (sql/schema/), its key function log_dedup_keys_v1 with it.

-- queen.log_dedup_probe_v1(partition id, txns_start, window seconds, hashes) -> duplicates
-- Contract: for the frames of one incoming segment (16-byte hashes concatenated in frame order)
-- returns, for every frame that is a duplicate, its index in the input together with
-- `dup_offset`, the lowest offset of a stored original inside the dedup window (-1 when none),
-- and `dup_first`, the index of an earlier equal frame of the same input (-1 when none):
-- within one request the first of two equal transactionIds wins. A window of 0 turns
-- deduplication off.
-- Cost: one GIN lookup (log_txns_dedup_idx, keys log_dedup_keys_v1) per distinct input hash,
-- plus the exploding of the (few) sidecar rows that share a key with the input; the cost does
-- not grow with the window. The common answer, no duplicate, is decided by that lookup alone:
-- when no sidecar row shares a key with the input and the input's keys are distinct (so are
-- its hashes), nothing can match, and the exact query below is not run (measured with
-- callgrind: a push of 8 frames costs a backend 13 % fewer instructions, the probe's cost less
-- than half). Otherwise the candidate scan sits behind a materialisation fence so the
-- planner cannot trade it for a scan of the (partition_id, created_at) index over the whole
-- window; partition, window and txns_start are checked on the candidates, and every verdict is
-- an exact 16-byte comparison.
-- Plan: force_generic_plan (the probe was planned on most calls once autovacuum had analyzed
-- queen.log_txns; it is index-driven whatever the values).
-- Locks: none; the caller holds the partition row lock, which serialises pushes.
CREATE OR REPLACE FUNCTION queen.log_dedup_probe_v1(p_pid uuid, p_txns_start bigint,
                                                    p_window integer, p_hashes bytea,
                                                    OUT dup_index integer[],
                                                    OUT dup_offset bigint[],
                                                    OUT dup_first integer[])
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_keys uuid[];
BEGIN
    IF p_window <= 0 THEN
        RETURN;
    END IF;
    v_keys := queen.log_dedup_keys_v1(p_pid, p_hashes);
    -- count(*), not EXISTS: a generic plan of EXISTS scans the table for an early hit.
    IF (SELECT count(*) FROM queen.log_txns t
        WHERE t.deduped AND queen.log_dedup_keys_v1(t.partition_id, t.hashes) && v_keys) = 0
       AND cardinality(v_keys) = (SELECT count(DISTINCT k) FROM unnest(v_keys) AS k) THEN
        RETURN;
    END IF;
    WITH input AS (
        SELECT k, substring(p_hashes FROM k * 16 + 1 FOR 16) AS hash
        FROM generate_series(0, length(p_hashes) / 16 - 1) AS k
    ), firsts AS (
        SELECT hash, min(k) AS first FROM input GROUP BY hash
    ), candidates AS MATERIALIZED (
        SELECT t.partition_id, t.base_offset, t.end_offset, t.created_at, t.hashes
        FROM queen.log_txns t
        WHERE t.deduped
          AND queen.log_dedup_keys_v1(t.partition_id, t.hashes) && v_keys
    ), stored AS (
        SELECT x.hash, min(x.off) AS off
        FROM (SELECT substring(c.hashes FROM j * 16 + 1 FOR 16) AS hash, c.base_offset + j AS off
              FROM candidates c
              CROSS JOIN LATERAL generate_series(0, (c.end_offset - c.base_offset)::integer) AS j
              WHERE c.partition_id = p_pid
                AND c.base_offset >= p_txns_start
                AND c.created_at >= now() - make_interval(secs => p_window)) AS x
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

-- queen.log_max_size_lock_v1(queue ids[]) -> void
-- Contract: locks the row of every listed queue whose max_size > 0, so that the pushes to one
-- limited queue check and write one after the other. Queues without a limit are not locked.
-- Locks: those queue rows, FOR NO KEY UPDATE, one at a time ascending by id (called after
-- provisioning and before any partition row lock).
CREATE OR REPLACE FUNCTION queen.log_max_size_lock_v1(p_qids uuid[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_qid uuid;
BEGIN
    FOR v_qid IN SELECT DISTINCT x FROM unnest(p_qids) AS x WHERE x IS NOT NULL ORDER BY x LOOP
        PERFORM 1 FROM queen.queues q WHERE q.id = v_qid AND q.max_size > 0
        FOR NO KEY UPDATE;
    END LOOP;
END;
$$;

-- queen.log_max_size_refusal_v1(queue id, adding) -> jsonb or NULL
-- Contract: NULL when the queue has no limit or `adding` more messages keep its depth at or
-- under max_size; else the refusal {"refusal": "queue_full", "queue", "maxSize", "depth",
-- "pushing"}.
-- Locks: none; the caller holds the queue row lock (log_max_size_lock_v1).
CREATE OR REPLACE FUNCTION queen.log_max_size_refusal_v1(p_qid uuid, p_adding bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_name text;
    v_max bigint;
    v_depth bigint;
BEGIN
    SELECT q.name, q.max_size INTO v_name, v_max FROM queen.queues q WHERE q.id = p_qid;
    IF NOT FOUND OR v_max <= 0 OR p_adding <= 0 THEN
        RETURN NULL;
    END IF;
    v_depth := queen.log_queue_depth_v1(p_qid);
    IF v_depth + p_adding <= v_max THEN
        RETURN NULL;
    END IF;
    RETURN jsonb_build_object('refusal', 'queue_full', 'queue', v_name, 'maxSize', v_max,
                              'depth', v_depth, 'pushing', p_adding);
END;
$$;

-- queen.log_push_v2(tenant, queues[], partitions[], hashes[], blobs[]) -> one row per input group
-- Contract: each input group i is one segment for partition (queues[i], partitions[i]): `blobs[i]`
-- holds its compressed frames, `hashes[i]` 16 bytes per frame in frame order. Queues and
-- partitions are provisioned on first contact. Under the partition row locks, every group is
-- probed against its queue's dedup window (log_dedup_probe_v1). When any group holds a
-- duplicate NOTHING is written: every row comes back with written = false and the duplicates
-- listed, and the broker calls again without them. Otherwise the groups of each queue with a
-- max_size are counted together against it, and when any queue would exceed its limit the call
-- raises 'queue full' (SQLSTATE P0001) with DETAIL the refusal of log_max_size_refusal_v1
-- (first such queue by id): the whole transaction rolls back, provisioning included, so nothing
-- of the request is written. Otherwise every group gets `count` offsets from its partition's
-- allocator, its segment and its sidecar row, and comes back with written = true and its base
-- offset. All groups commit together.
-- Locks: provisioning first; then the rows of limited queues ascending by id (FOR NO KEY
-- UPDATE, log_max_size_lock_v1); then partition rows ascending by id (FOR UPDATE).
CREATE OR REPLACE FUNCTION queen.log_push_v2(p_tenant uuid, p_queues text[], p_partitions text[],
                                             p_hashes bytea[], p_blobs bytea[])
RETURNS TABLE (ordinal integer, partition_id uuid, base_offset bigint, written boolean,
               dup_index integer[], dup_offset bigint[], dup_first integer[])
LANGUAGE plpgsql AS $$
DECLARE
    n integer := coalesce(array_length(p_queues, 1), 0);
    v_pids uuid[] := '{}';
    v_qids uuid[] := '{}';
    v_windows integer[] := '{}';
    v_bases bigint[];
    v_any_dup boolean := false;
    v_order integer[];
    v_txns_start bigint;
    v_last bigint;
    v_count integer;
    v_probe record;
    v_qid uuid;
    v_full jsonb;
    i integer;
BEGIN
    FOR i IN 1 .. n LOOP
        v_qid := queen.provision_queue_v1(p_tenant, p_queues[i]);
        v_qids := v_qids || v_qid;
        v_pids := v_pids || queen.provision_partition_v1(v_qid, p_partitions[i]);
        v_windows := v_windows || (SELECT q.dedup_window_seconds FROM queen.queues q
                                   WHERE q.id = v_qid);
    END LOOP;
    v_bases := array_fill(NULL::bigint, ARRAY[n]);
    PERFORM queen.log_max_size_lock_v1(v_qids);

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

    SELECT r INTO v_full
    FROM (SELECT queen.log_max_size_refusal_v1(v_qids[o], sum(length(p_hashes[o]) / 16)) AS r,
                 v_qids[o] AS qid
          FROM generate_series(1, n) AS o
          GROUP BY v_qids[o]) AS x
    WHERE x.r IS NOT NULL
    ORDER BY x.qid
    LIMIT 1;
    IF v_full IS NOT NULL THEN
        RAISE EXCEPTION 'queue full' USING DETAIL = v_full::text;
    END IF;

    FOR i IN SELECT unnest(v_order) LOOP
        v_count := length(p_hashes[i]) / 16;
        UPDATE queen.log_partitions p SET last_offset = p.last_offset + v_count
        WHERE p.id = v_pids[i]
        RETURNING p.last_offset INTO v_last;
        v_bases[i] := v_last - v_count + 1;
        INSERT INTO queen.log_segments (partition_id, base_offset, end_offset, blob)
        VALUES (v_pids[i], v_bases[i], v_last, p_blobs[i]);
        INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, hashes, deduped)
        VALUES (v_pids[i], v_bases[i], v_last, p_hashes[i], v_windows[i] > 0);
    END LOOP;

    FOR i IN 1 .. n LOOP
        ordinal := i; partition_id := v_pids[i]; base_offset := v_bases[i]; written := true;
        dup_index := NULL; dup_offset := NULL; dup_first := NULL;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- queen.log_push_multi_v2(tenants[], queues[], partitions[], hashes[], blobs[])
--   -> one row per input segment, by input ordinal
-- Contract (push fusion): input element i is one segment for partition (tenants[i], queues[i],
-- partitions[i]): `blobs[i]` holds its packed frames, `hashes[i]` 16 bytes per frame in frame
-- order. Queues and partitions are provisioned on first contact. Every partition row is locked
-- before any segment is probed or written. Then, in input order, each segment is probed
-- against its queue's dedup window (log_dedup_probe_v1): a segment holding a duplicate is NOT
-- written and comes back with written = false and its duplicates (dup_index: frame index;
-- dup_offset: the stored original's offset or -1; dup_first: the earlier equal frame of the
-- same segment or -1), so the broker can drop them and resubmit the rest. A segment without
-- duplicates whose queue's depth (counting the segments this call already wrote) plus its
-- frames would exceed the queue's max_size is NOT written either and comes back with
-- written = false, no duplicates and `full_refusal` = the refusal of log_max_size_refusal_v1
-- (the broker sends the pushes of limited queues through log_push_v2; this answer keeps the
-- limit exact when its view of a queue's options is stale). Any other segment gets `count`
-- offsets from its partition's allocator, its segment row and its sidecar row, and comes back
-- with written = true, its base offset and its created_at. One segment's refusal never stops
-- the others: all written segments commit together. The broker sends distinct partitions; a
-- repeated partition is still correct (its segments take consecutive offsets in input order,
-- and a later one is probed against the earlier).
-- Plan: force_generic_plan (its ordering loops were planned on every call).
-- Each queue's options (dedup window, maxSize) are read once, at provisioning: a queue without
-- a maxSize then costs neither the queue row lock nor the depth check, and a configure that
-- commits during the call is one the call began before.
-- Locks: provisioning first, in (tenant, queue, partition) name order (two calls creating the
-- same new queues cannot wait on each other in a cycle); then the rows of limited queues
-- ascending by id (FOR NO KEY UPDATE, log_max_size_lock_v1; none when no queue of the call had
-- a maxSize when read); then every partition row, ascending by id (FOR UPDATE), all before the
-- first probe.
CREATE OR REPLACE FUNCTION queen.log_push_multi_v2(p_tenants uuid[], p_queues text[],
                                                   p_partitions text[], p_hashes bytea[],
                                                   p_blobs bytea[])
RETURNS TABLE (ordinal integer, partition_id uuid, written boolean, base_offset bigint,
               created_at timestamptz, dup_index integer[], dup_offset bigint[],
               dup_first integer[], full_refusal jsonb)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    n integer := coalesce(array_length(p_queues, 1), 0);
    v_pids uuid[];
    v_qids uuid[];
    v_full jsonb;
    v_windows integer[];
    v_limited boolean[];
    v_any_limited boolean := false;
    v_window integer;
    v_limit boolean;
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
    v_qids := array_fill(NULL::uuid, ARRAY[n]);
    v_windows := array_fill(NULL::integer, ARRAY[n]);
    v_starts := array_fill(NULL::bigint, ARRAY[n]);
    v_limited := array_fill(false, ARRAY[n]);

    FOR i IN SELECT o FROM generate_series(1, n) AS o
             ORDER BY p_tenants[o], p_queues[o], p_partitions[o], o LOOP
        v_qid := queen.provision_queue_v1(p_tenants[i], p_queues[i]);
        v_pids[i] := queen.provision_partition_v1(v_qid, p_partitions[i]);
        v_qids[i] := v_qid;
        SELECT q.dedup_window_seconds, q.max_size > 0 INTO v_window, v_limit
        FROM queen.queues q WHERE q.id = v_qid;
        v_windows[i] := v_window;
        v_limited[i] := v_limit;
        v_any_limited := v_any_limited OR v_limit;
    END LOOP;

    -- Lock order: the rows of queues with a maxSize ascending by id, then partition rows
    -- ascending by id, one at a time (never a set-based lock).
    IF v_any_limited THEN
        PERFORM queen.log_max_size_lock_v1(v_qids);
    END IF;
    FOR i IN SELECT o FROM generate_series(1, n) AS o ORDER BY v_pids[o], o LOOP
        SELECT p.txns_start INTO v_start
        FROM queen.log_partitions p WHERE p.id = v_pids[i] FOR UPDATE;
        v_starts[i] := v_start;
    END LOOP;

    FOR i IN 1 .. n LOOP
        ordinal := i;
        partition_id := v_pids[i];
        full_refusal := NULL;
        SELECT * INTO v_probe
        FROM queen.log_dedup_probe_v1(v_pids[i], v_starts[i], v_windows[i], p_hashes[i]);
        v_full := CASE WHEN v_probe.dup_index IS NULL AND v_limited[i]
                       THEN queen.log_max_size_refusal_v1(v_qids[i], length(p_hashes[i]) / 16)
                  END;
        IF v_probe.dup_index IS NOT NULL THEN
            written := false; base_offset := NULL; created_at := NULL;
            dup_index := v_probe.dup_index; dup_offset := v_probe.dup_offset;
            dup_first := v_probe.dup_first;
        ELSIF v_full IS NOT NULL THEN
            written := false; base_offset := NULL; created_at := NULL;
            dup_index := NULL; dup_offset := NULL; dup_first := NULL;
            full_refusal := v_full;
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

-- queen.log_segment_at_v1(partition id, offset) -> the segment covering `offset`
-- Contract: the one segment whose span holds `offset`, or no row when retention removed it.
-- Used by the broker to unpack a single frame (a duplicate's original id, a DLQ payload).
-- Locks: none.
CREATE OR REPLACE FUNCTION queen.log_segment_at_v1(p_pid uuid, p_offset bigint)
RETURNS TABLE (base_offset bigint, end_offset bigint, created_at timestamptz, blob bytea)
LANGUAGE sql STABLE AS $$
    SELECT c.base_offset, c.end_offset, c.created_at, c.blob
    FROM (SELECT s.* FROM queen.log_segments s
          WHERE s.partition_id = p_pid AND s.base_offset <= p_offset
          ORDER BY s.base_offset DESC
          LIMIT 1) AS c
    WHERE c.end_offset >= p_offset
$$;
