-- 004_pop.sql: the pop path (specific partition, wildcard, discovery).
--
-- A pop leases the contiguous span after the group's cursor: (committed, batch_end]. The lease is
-- the consumer row's `worker_id` (= the leaseId), `lease_expires_at` and `batch_end`. Consumer rows
-- are claimed with FOR UPDATE SKIP LOCKED, so concurrent pops never wait on each other and never
-- deadlock; the pop path takes no partition row lock.

-- queen.log_lease_span_v1(partition id, group, worker, budget, lease seconds, subscription new,
--                         auto ack) -> the claimed span, or no row
-- Contract: claims the group's consumer row in the partition when it is free (no lease, or the
-- lease expired), seeding a new group's cursor from the subscription mode (`all`: the retained
-- backlog, `new`: the tail). Returns the span [span_start, span_end] of at most `budget` offsets
-- after the cursor, and writes the lease; with auto ack the cursor moves to span_end instead and
-- no lease is written. `attempt` counts deliveries of a span starting at the same offset (a lease
-- expiry redelivers with attempt + 1; the retry budget is not touched). Nothing to deliver, or a
-- row held by someone else: no row, nothing written.
-- Locks: the consumer row, FOR UPDATE SKIP LOCKED.
CREATE FUNCTION queen.log_lease_span_v1(p_pid uuid, p_group text, p_worker text, p_budget integer,
                                        p_lease_seconds integer, p_sub_new boolean,
                                        p_auto_ack boolean,
                                        OUT span_start bigint, OUT span_end bigint,
                                        OUT attempt integer, OUT lease_expires_at timestamptz)
RETURNS record
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
    v_log_start bigint;
    c record;
BEGIN
    SELECT p.last_offset, p.log_start INTO v_last, v_log_start
    FROM queen.log_partitions p WHERE p.id = p_pid;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO c FROM queen.log_consumers lc
    WHERE lc.partition_id = p_pid AND lc.consumer_group = p_group
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM queen.log_consumers lc
                   WHERE lc.partition_id = p_pid AND lc.consumer_group = p_group) THEN
            RETURN;  -- held by a concurrent pop or ack
        END IF;
        INSERT INTO queen.log_consumers (partition_id, consumer_group, committed)
        VALUES (p_pid, p_group, CASE WHEN p_sub_new THEN v_last ELSE v_log_start - 1 END)
        ON CONFLICT DO NOTHING;
        SELECT * INTO c FROM queen.log_consumers lc
        WHERE lc.partition_id = p_pid AND lc.consumer_group = p_group
        FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    IF c.batch_end IS NOT NULL AND c.lease_expires_at > now() THEN
        RETURN;  -- a live lease
    END IF;
    IF GREATEST(c.committed + 1, v_log_start) > v_last THEN
        RETURN;  -- nothing after the cursor
    END IF;
    span_start := GREATEST(c.committed + 1, v_log_start);
    span_end := LEAST(span_start + p_budget - 1, v_last);
    IF p_auto_ack THEN
        attempt := 1;
        UPDATE queen.log_consumers lc SET
            committed = span_end, batch_end = NULL, worker_id = NULL, lease_expires_at = NULL,
            batch_retry_count = 0, attempt_count = 0, attempt_from = NULL,
            total_consumed = lc.total_consumed + (span_end - span_start + 1)
        WHERE lc.partition_id = p_pid AND lc.consumer_group = p_group;
    ELSE
        attempt := CASE WHEN c.attempt_from = span_start THEN c.attempt_count + 1 ELSE 1 END;
        lease_expires_at := now() + make_interval(secs => p_lease_seconds);
        UPDATE queen.log_consumers lc SET
            batch_end = span_end, worker_id = p_worker,
            lease_expires_at = log_lease_span_v1.lease_expires_at,
            attempt_count = attempt, attempt_from = span_start
        WHERE lc.partition_id = p_pid AND lc.consumer_group = p_group;
    END IF;
END;
$$;

-- queen.log_pop_claim_v1(candidates[], group, worker, batch, max partitions, lease seconds,
--                        subscription new, auto ack) -> one row per segment delivered
-- Contract: walks the candidate partitions in the given order and claims spans until
-- `max_partitions` partitions are leased or `batch` messages are delivered in total. Each row
-- carries the claimed span and one segment overlapping it (the broker unpacks only the frames
-- inside the span). A null lease length takes each queue's `lease_time`.
-- Locks: consumer rows one at a time, FOR UPDATE SKIP LOCKED (see log_lease_span_v1).
CREATE FUNCTION queen.log_pop_claim_v1(p_candidates uuid[], p_group text, p_worker text,
                                       p_batch integer, p_max_partitions integer,
                                       p_lease_seconds integer, p_sub_new boolean,
                                       p_auto_ack boolean)
RETURNS TABLE (partition_id uuid, queue_name text, partition_name text, span_start bigint,
               span_end bigint, attempt integer, lease_expires_at timestamptz,
               seg_base bigint, seg_end bigint, seg_created timestamptz, blob bytea)
LANGUAGE plpgsql AS $$
DECLARE
    v_pid uuid;
    v_budget integer := p_batch;
    v_claimed integer := 0;
    v_queue text;
    v_partition text;
    v_lease integer;
    s record;
BEGIN
    FOREACH v_pid IN ARRAY p_candidates LOOP
        EXIT WHEN v_claimed >= p_max_partitions OR v_budget <= 0;
        SELECT q.name, p.name, COALESCE(p_lease_seconds, q.lease_time)
        INTO v_queue, v_partition, v_lease
        FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
        WHERE p.id = v_pid;
        SELECT * INTO s FROM queen.log_lease_span_v1(v_pid, p_group, p_worker, v_budget, v_lease,
                                                     p_sub_new, p_auto_ack);
        CONTINUE WHEN s.span_start IS NULL;
        v_claimed := v_claimed + 1;
        v_budget := v_budget - (s.span_end - s.span_start + 1)::integer;
        RETURN QUERY
        SELECT v_pid, v_queue, v_partition, s.span_start, s.span_end, s.attempt,
               s.lease_expires_at, g.base_offset, g.end_offset, g.created_at, g.blob
        FROM queen.log_segments g
        WHERE g.partition_id = v_pid
          AND g.base_offset >= COALESCE((SELECT max(x.base_offset) FROM queen.log_segments x
                                         WHERE x.partition_id = v_pid
                                           AND x.base_offset <= s.span_start), s.span_start)
          AND g.base_offset <= s.span_end
        ORDER BY g.base_offset;
    END LOOP;
END;
$$;

-- queen.log_pop_candidates_v1(queue ids[], group, subscription new) -> partition ids
-- Contract: the partitions of the given queues that hold messages after the group's cursor and
-- carry no live lease for the group, in random order (so concurrent wildcard pops spread out).
-- With subscription `new`, first seeds the group's cursor at the tail of every partition it has
-- not seen yet, so messages pushed after the group's first pop are not mistaken for backlog.
-- Locks: none (claiming re-checks everything under the consumer row lock).
CREATE FUNCTION queen.log_pop_candidates_v1(p_queues uuid[], p_group text, p_sub_new boolean)
RETURNS uuid[]
LANGUAGE plpgsql AS $$
BEGIN
    IF p_sub_new THEN
        INSERT INTO queen.log_consumers (partition_id, consumer_group, committed)
        SELECT p.id, p_group, p.last_offset
        FROM queen.log_partitions p
        WHERE p.queue_id = ANY (p_queues)
          AND NOT EXISTS (SELECT 1 FROM queen.log_consumers c
                          WHERE c.partition_id = p.id AND c.consumer_group = p_group)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN ARRAY(
        SELECT p.id
        FROM queen.log_partitions p
        LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = p_group
        WHERE p.queue_id = ANY (p_queues)
          AND p.last_offset >= GREATEST(COALESCE(c.committed, p.log_start - 1) + 1, p.log_start)
          AND (c.batch_end IS NULL OR c.lease_expires_at <= now())
        ORDER BY random());
END;
$$;

-- queen.log_pop_v1(tenant, queue, partition, group, worker, batch, lease seconds,
--                  subscription new, auto ack) -> segment rows (see log_pop_claim_v1)
-- Contract: pops one named partition. An unknown queue is provisioned; an unknown partition
-- delivers nothing.
-- Locks: the consumer row, FOR UPDATE SKIP LOCKED.
CREATE FUNCTION queen.log_pop_v1(p_tenant uuid, p_queue text, p_partition text, p_group text,
                                 p_worker text, p_batch integer, p_lease_seconds integer,
                                 p_sub_new boolean, p_auto_ack boolean)
RETURNS TABLE (partition_id uuid, queue_name text, partition_name text, span_start bigint,
               span_end bigint, attempt integer, lease_expires_at timestamptz,
               seg_base bigint, seg_end bigint, seg_created timestamptz, blob bytea)
LANGUAGE plpgsql AS $$
DECLARE
    v_pid uuid;
BEGIN
    SELECT p.id INTO v_pid
    FROM queen.log_partitions p
    WHERE p.queue_id = queen.provision_queue_v1(p_tenant, p_queue) AND p.name = p_partition;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM queen.log_pop_claim_v1(ARRAY[v_pid], p_group, p_worker, p_batch, 1,
                                                      p_lease_seconds, p_sub_new, p_auto_ack);
END;
$$;

-- queen.log_pop_wildcard_v1(tenant, queue, group, worker, batch, max partitions, lease seconds,
--                           subscription new, auto ack) -> segment rows
-- Contract: pops up to `max_partitions` partitions of one queue that have messages and no live
-- lease for the group, all under one worker id. An unknown queue is provisioned.
-- Locks: consumer rows one at a time, FOR UPDATE SKIP LOCKED.
CREATE FUNCTION queen.log_pop_wildcard_v1(p_tenant uuid, p_queue text, p_group text,
                                          p_worker text, p_batch integer,
                                          p_max_partitions integer, p_lease_seconds integer,
                                          p_sub_new boolean, p_auto_ack boolean)
RETURNS TABLE (partition_id uuid, queue_name text, partition_name text, span_start bigint,
               span_end bigint, attempt integer, lease_expires_at timestamptz,
               seg_base bigint, seg_end bigint, seg_created timestamptz, blob bytea)
LANGUAGE plpgsql AS $$
DECLARE
    v_queues uuid[] := ARRAY[queen.provision_queue_v1(p_tenant, p_queue)];
BEGIN
    RETURN QUERY SELECT * FROM queen.log_pop_claim_v1(
        queen.log_pop_candidates_v1(v_queues, p_group, p_sub_new), p_group, p_worker, p_batch,
        p_max_partitions, p_lease_seconds, p_sub_new, p_auto_ack);
END;
$$;

-- queen.log_pop_discover_v1(tenant, namespace, task, group, worker, batch, max partitions,
--                           lease seconds, subscription new, auto ack) -> segment rows
-- Contract: the wildcard pop across every queue of the tenant matching namespace and task (an
-- empty filter matches any; the broker refuses both empty).
-- Locks: consumer rows one at a time, FOR UPDATE SKIP LOCKED.
CREATE FUNCTION queen.log_pop_discover_v1(p_tenant uuid, p_namespace text, p_task text,
                                          p_group text, p_worker text, p_batch integer,
                                          p_max_partitions integer, p_lease_seconds integer,
                                          p_sub_new boolean, p_auto_ack boolean)
RETURNS TABLE (partition_id uuid, queue_name text, partition_name text, span_start bigint,
               span_end bigint, attempt integer, lease_expires_at timestamptz,
               seg_base bigint, seg_end bigint, seg_created timestamptz, blob bytea)
LANGUAGE plpgsql AS $$
DECLARE
    v_queues uuid[] := ARRAY(
        SELECT q.id FROM queen.queues q
        WHERE q.tenant_id = p_tenant
          AND (p_namespace = '' OR q.namespace = p_namespace)
          AND (p_task = '' OR q.task = p_task));
BEGIN
    RETURN QUERY SELECT * FROM queen.log_pop_claim_v1(
        queen.log_pop_candidates_v1(v_queues, p_group, p_sub_new), p_group, p_worker, p_batch,
        p_max_partitions, p_lease_seconds, p_sub_new, p_auto_ack);
END;
$$;
