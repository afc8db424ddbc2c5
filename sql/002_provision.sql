-- 002_provision.sql: queues and partitions come into being on first contact.
--
-- Provisioning is the first step of the lock order everywhere (provisioning, then partition
-- rows ascending by id, then consumer rows ascending by (partition id, group)). It only inserts
-- rows that do not exist yet; it never locks existing ones.

-- queen.provision_queue_v1(tenant, name) -> queue id
-- Contract: returns the id of the tenant's queue `name`, creating it with the defaults when it
-- does not exist. A dotted name `ns.task` gives namespace `ns` and task `task`.
-- Locks: none on existing rows; a concurrent creator is absorbed by ON CONFLICT.
CREATE FUNCTION queen.provision_queue_v1(p_tenant uuid, p_name text)
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
CREATE FUNCTION queen.provision_partition_v1(p_queue uuid, p_name text)
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

-- queen.configure_queue_v1(tenant, name, namespace, task, options jsonb) -> the queue row
-- Contract: creates or updates a queue; options absent from `options` keep their current value
-- (their default for a new queue). The broker validates option names and ranges before calling.
-- Locks: the queue row (UPDATE).
CREATE FUNCTION queen.configure_queue_v1(p_tenant uuid, p_name text, p_namespace text,
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
        updated_at = now()
    WHERE q.id = v_id
    RETURNING q.*;
END;
$$;
