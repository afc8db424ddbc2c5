-- 015: Queen's whole queue option set (issue 16, wire.md "Queues").
--
-- Queen's clients send every option on each `create()`, defaults included, so configure must
-- accept all of them. This migration only stores them; the behaviour of each lives where it acts:
--   delayed_processing, window_buffer  the pop paths (a partition is not deliverable until then)
--   max_size                           the push path (unconsumed messages per queue, 0 = no limit)
--   priority                           discovery pops prefer higher values
--   encryption_enabled                 frames of this queue hold AES-256-GCM ciphertext
--   retention_enabled, ttl, retry_delay, max_wait_time_seconds
--                                      accepted and echoed only (Queen's rows engine used them)
-- Every column has the default wire.md gives, so queues created before this migration behave as
-- they did.

ALTER TABLE queen.queues
    ADD COLUMN delayed_processing    integer NOT NULL DEFAULT 0,
    ADD COLUMN window_buffer         integer NOT NULL DEFAULT 0,
    ADD COLUMN max_size              bigint  NOT NULL DEFAULT 0,
    ADD COLUMN priority              integer NOT NULL DEFAULT 0,
    ADD COLUMN encryption_enabled    boolean NOT NULL DEFAULT false,
    ADD COLUMN retention_enabled     boolean NOT NULL DEFAULT false,
    ADD COLUMN ttl                   integer NOT NULL DEFAULT 3600,
    ADD COLUMN retry_delay           integer NOT NULL DEFAULT 1000,
    ADD COLUMN max_wait_time_seconds integer NOT NULL DEFAULT 0;

-- queen.configure_queue_v2(tenant, name, namespace, task, options jsonb) -> the queue row
-- Contract: that of configure_queue_v1 (002_provision.sql) over the whole option set: creates or
-- updates a queue; an option absent from `options` keeps its current value (its default for a
-- new queue). The broker validates names, types and ranges before calling; names it does not
-- know never reach this function.
-- Locks: the queue row (UPDATE).
CREATE FUNCTION queen.configure_queue_v2(p_tenant uuid, p_name text, p_namespace text,
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

DROP FUNCTION queen.configure_queue_v1(uuid, text, text, text, jsonb);
