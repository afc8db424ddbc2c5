-- queues.sql: queues and partitions: provisioning on first contact, configuration, the queue
-- resources (list, detail, delete) and the push-relevant options the broker caches.
--
-- Provisioning is the first step of the lock order everywhere (provisioning, then the rows of
-- queues with a maxSize in pushes, then partition rows ascending by id, then consumer rows
-- ascending by (partition id, group)). It only inserts rows that do not exist yet; it never
-- locks existing ones. Queue deletion follows the same order.

-- queen.provision_queue_v1(tenant, name) -> queue id
-- Contract: returns the id of the tenant's queue `name`, creating it with the defaults when it
-- does not exist. A dotted name `ns.task` gives namespace `ns` and task `task`.
-- Locks: none on existing rows; a concurrent creator is absorbed by ON CONFLICT.
CREATE OR REPLACE FUNCTION queen.provision_queue_v1(p_tenant uuid, p_name text)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
BEGIN
    SELECT id INTO v_id FROM queen.queues WHERE tenant_id = p_tenant AND name = p_name;
    IF FOUND THEN
        RETURN v_id;
    END IF;
    INSERT INTO queen.queues (id, tenant_id, name, namespace, task)
    VALUES (gen_random_uuid(), p_tenant, p_name,
            CASE WHEN position('.' IN p_name) > 0 THEN split_part(p_name, '.', 1) ELSE '' END,
            CASE WHEN position('.' IN p_name) > 0
                 THEN substr(p_name, position('.' IN p_name) + 1) ELSE '' END)
    ON CONFLICT (tenant_id, name) DO NOTHING;
    SELECT id INTO STRICT v_id FROM queen.queues WHERE tenant_id = p_tenant AND name = p_name;
    RETURN v_id;
END;
$$;

-- queen.provision_partition_v1(queue id, name) -> partition id
-- Contract: returns the id of the queue's partition `name`, creating it empty when missing.
-- Locks: none on existing rows.
CREATE OR REPLACE FUNCTION queen.provision_partition_v1(p_queue uuid, p_name text)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
BEGIN
    SELECT id INTO v_id FROM queen.log_partitions WHERE queue_id = p_queue AND name = p_name;
    IF FOUND THEN
        RETURN v_id;
    END IF;
    INSERT INTO queen.log_partitions (id, queue_id, name)
    VALUES (gen_random_uuid(), p_queue, p_name)
    ON CONFLICT (queue_id, name) DO NOTHING;
    SELECT id INTO STRICT v_id FROM queen.log_partitions WHERE queue_id = p_queue AND name = p_name;
    RETURN v_id;
END;
$$;

-- queen.configure_queue_v2(tenant, name, namespace, task, options jsonb) -> the queue row
-- Contract: creates or updates a queue over the whole option set (wire.md "Queues"); an option
-- absent from `options` keeps its current value (its default for a new queue). The broker
-- validates names, types and ranges before calling; names it does not know never reach this
-- function.
-- Locks: the queue row (UPDATE).
CREATE OR REPLACE FUNCTION queen.configure_queue_v2(p_tenant uuid, p_name text, p_namespace text,
                                                    p_task text, p_options jsonb)
RETURNS SETOF queen.queues
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid := queen.provision_queue_v1(p_tenant, p_name);
BEGIN
    RETURN QUERY
    UPDATE queen.queues q SET
        namespace = COALESCE(p_namespace, q.namespace),
        task = COALESCE(p_task, q.task),
        lease_time = COALESCE((p_options ->> 'leaseTime')::integer, q.lease_time),
        retry_limit = COALESCE((p_options ->> 'retryLimit')::integer, q.retry_limit),
        dead_letter_queue = COALESCE((p_options ->> 'deadLetterQueue')::boolean, q.dead_letter_queue),
        dlq_after_max_retries = COALESCE((p_options ->> 'dlqAfterMaxRetries')::boolean,
                                         q.dlq_after_max_retries),
        dedup_window_seconds = COALESCE((p_options ->> 'dedupWindowSeconds')::integer,
                                        q.dedup_window_seconds),
        completed_retention_seconds = COALESCE((p_options ->> 'completedRetentionSeconds')::integer,
                                               q.completed_retention_seconds),
        retention_seconds = COALESCE((p_options ->> 'retentionSeconds')::integer, q.retention_seconds),
        delayed_processing = COALESCE((p_options ->> 'delayedProcessing')::integer,
                                      q.delayed_processing),
        window_buffer = COALESCE((p_options ->> 'windowBuffer')::integer, q.window_buffer),
        max_size = COALESCE((p_options ->> 'maxSize')::bigint, q.max_size),
        priority = COALESCE((p_options ->> 'priority')::integer, q.priority),
        encryption_enabled = COALESCE((p_options ->> 'encryptionEnabled')::boolean,
                                      q.encryption_enabled),
        retention_enabled = COALESCE((p_options ->> 'retentionEnabled')::boolean,
                                     q.retention_enabled),
        ttl = COALESCE((p_options ->> 'ttl')::integer, q.ttl),
        retry_delay = COALESCE((p_options ->> 'retryDelay')::integer, q.retry_delay),
        max_wait_time_seconds = COALESCE((p_options ->> 'maxWaitTimeSeconds')::integer,
                                         q.max_wait_time_seconds),
        updated_at = now()
    WHERE q.id = v_id
    RETURNING q.*;
END;
$$;

-- queen.log_queue_depth_v1(queue id) -> bigint
-- Contract: the queue's unconsumed messages in queue mode: summed over its partitions, the
-- offsets after GREATEST(the `__QUEUE_MODE__` cursor, log_start - 1) up to last_offset.
-- Locks: none (reads committed state; the push path calls it under the queue row lock).
CREATE OR REPLACE FUNCTION queen.log_queue_depth_v1(p_queue uuid)
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(sum(GREATEST(0, p.last_offset
                                   - GREATEST(COALESCE(c.committed, -1), p.log_start - 1))), 0)::bigint
    FROM queen.log_partitions p
    LEFT JOIN queen.log_consumers c
           ON c.partition_id = p.id AND c.consumer_group = '__QUEUE_MODE__'
    WHERE p.queue_id = p_queue
$$;

-- queen.log_queues_list_v1(tenant, name) -> one row per queue of the tenant (only `name` when
-- given), by name: the queue row, its partition count and its depth (log_queue_depth_v1).
-- Locks: none.
CREATE OR REPLACE FUNCTION queen.log_queues_list_v1(p_tenant uuid, p_name text)
RETURNS TABLE (queue queen.queues, partitions bigint, depth bigint)
LANGUAGE sql STABLE AS $$
    SELECT q, (SELECT count(*) FROM queen.log_partitions p WHERE p.queue_id = q.id),
           queen.log_queue_depth_v1(q.id)
    FROM queen.queues q
    WHERE q.tenant_id = p_tenant AND (p_name IS NULL OR q.name = p_name)
    ORDER BY q.name
$$;

-- queen.log_queue_partitions_v1(queue id) -> one row per (partition, consumer row), by
-- partition name then group: the partition's name, id, last offset and depth in queue mode,
-- and per consumer group (NULL when the partition has no consumer row) its cursor and whether
-- its lease is live.
-- Locks: none.
CREATE OR REPLACE FUNCTION queen.log_queue_partitions_v1(p_queue uuid)
RETURNS TABLE (name text, id uuid, last_offset bigint, depth bigint, consumer_group text,
               committed bigint, leased boolean)
LANGUAGE sql STABLE AS $$
    SELECT p.name, p.id, p.last_offset,
           GREATEST(0, p.last_offset - GREATEST(COALESCE(qm.committed, -1), p.log_start - 1)),
           c.consumer_group, c.committed,
           CASE WHEN c.partition_id IS NULL THEN NULL
                ELSE queen.lease_live_v1(c.batch_end, c.lease_expires_at) END
    FROM queen.log_partitions p
    LEFT JOIN queen.log_consumers qm
           ON qm.partition_id = p.id AND qm.consumer_group = '__QUEUE_MODE__'
    LEFT JOIN queen.log_consumers c ON c.partition_id = p.id
    WHERE p.queue_id = p_queue
    ORDER BY p.name, c.consumer_group
$$;

-- queen.log_queue_delete_v1(tenant, name) -> uuid[]: the deleted partitions' ids (empty for a
-- queue without partitions), NULL when the tenant has no such queue
-- Contract: deletes the queue with everything of it: DLQ rows, sidecar rows, segments, consumer
-- rows, `log_groups` rows, partitions and the queue row. The DLQ, the sidecar, the segments and
-- the consumers have no foreign key to the partition, so they are purged explicitly, before the
-- queue row whose deletion cascades to partitions and groups. A push or pop racing the
-- deletion either committed before it (and is deleted with the queue) or runs after it (and
-- provisions a new, empty queue of that name).
-- Locks, in the one total order: the queue row (FOR UPDATE), then its partition rows ascending
-- by id (FOR UPDATE: waits for pushes in flight), then its consumer rows ascending by
-- (partition id, group) (FOR UPDATE: waits for acks and pops in flight).
CREATE OR REPLACE FUNCTION queen.log_queue_delete_v1(p_tenant uuid, p_name text)
RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
    v_qid uuid;
    v_pids uuid[];
BEGIN
    SELECT q.id INTO v_qid FROM queen.queues q
    WHERE q.tenant_id = p_tenant AND q.name = p_name
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT COALESCE(array_agg(x.id ORDER BY x.id), '{}') INTO v_pids
    FROM (SELECT p.id FROM queen.log_partitions p WHERE p.queue_id = v_qid
          ORDER BY p.id FOR UPDATE) AS x;
    PERFORM 1 FROM queen.log_consumers c WHERE c.partition_id = ANY (v_pids)
    ORDER BY c.partition_id, c.consumer_group FOR UPDATE;

    DELETE FROM queen.log_dlq d WHERE d.partition_id = ANY (v_pids);
    DELETE FROM queen.log_txns t WHERE t.partition_id = ANY (v_pids);
    DELETE FROM queen.log_segments s WHERE s.partition_id = ANY (v_pids);
    DELETE FROM queen.log_consumers c WHERE c.partition_id = ANY (v_pids);
    DELETE FROM queen.queues q WHERE q.id = v_qid;
    RETURN v_pids;
END;
$$;

-- queen.queue_meta_v1(tenant, names[]) -> the push-relevant options of those queues that exist
-- Contract: one row per existing queue among `names`: its max_size and encryption_enabled (the
-- broker keeps them briefly to choose how to pack and route a push; the maxSize verdict itself
-- is always taken under the queue row lock by the push procedures).
-- Locks: none.
CREATE OR REPLACE FUNCTION queen.queue_meta_v1(p_tenant uuid, p_names text[])
RETURNS TABLE (name text, max_size bigint, encryption_enabled boolean)
LANGUAGE sql STABLE AS $$
    SELECT q.name, q.max_size, q.encryption_enabled
    FROM queen.queues q
    WHERE q.tenant_id = p_tenant AND q.name = ANY (p_names)
$$;
