-- 001_schema.sql: the tables of the log engine (schema `queen`).
--
-- Layout facts the ack contract relies on (see shared spec storage.md and ack-internals.md):
--   * a partition row is the push serializer: `last_offset` is the offset allocator;
--   * a segment holds the compressed frames of one push for one partition, addressed by
--     (partition_id, base_offset); only the broker packs and unpacks blobs;
--   * the hash sidecar `log_txns` mirrors every segment with 16 bytes per frame (big-endian
--     xxh3_128 of the transactionId, in frame order), written whether or not dedup is on;
--   * a consumer row is the cursor of one (partition, group) and the only lock the ack path takes.
--
-- Hot rows (partition allocators, consumer cursors) are updated constantly: a low fillfactor
-- keeps those updates HOT, and per-table autovacuum settings keep the dead versions in check.

CREATE SCHEMA IF NOT EXISTS queen;

CREATE TABLE queen.queues (
    id                          uuid PRIMARY KEY,
    tenant_id                   uuid NOT NULL,
    name                        text NOT NULL,
    namespace                   text NOT NULL DEFAULT '',
    task                        text NOT NULL DEFAULT '',
    lease_time                  integer NOT NULL DEFAULT 300,
    retry_limit                 integer NOT NULL DEFAULT 3,
    dead_letter_queue           boolean NOT NULL DEFAULT true,
    dlq_after_max_retries       boolean NOT NULL DEFAULT true,
    dedup_window_seconds        integer NOT NULL DEFAULT 3600,
    completed_retention_seconds integer NOT NULL DEFAULT 0,
    retention_seconds           integer NOT NULL DEFAULT 0,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);
CREATE INDEX queues_discovery_idx ON queen.queues (tenant_id, namespace, task);

CREATE TABLE queen.log_partitions (
    id          uuid PRIMARY KEY,
    queue_id    uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    name        text NOT NULL,
    last_offset bigint NOT NULL DEFAULT -1,   -- offset allocator, -1 = empty
    log_start   bigint NOT NULL DEFAULT 0,    -- segments below were deleted by retention
    txns_start  bigint NOT NULL DEFAULT 0,    -- sidecar rows below were purged
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (queue_id, name)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 200);

CREATE TABLE queen.log_segments (
    partition_id uuid NOT NULL,
    base_offset  bigint NOT NULL,
    end_offset   bigint NOT NULL,             -- inclusive
    created_at   timestamptz NOT NULL DEFAULT now(),
    blob         bytea NOT NULL,              -- lz4 frames, packed by the broker
    PRIMARY KEY (partition_id, base_offset)
);
-- Blobs are compressed by the broker and hashes are random: TOAST compression would only burn CPU.
ALTER TABLE queen.log_segments ALTER COLUMN blob SET STORAGE EXTERNAL;

CREATE TABLE queen.log_txns (
    partition_id uuid NOT NULL,
    base_offset  bigint NOT NULL,
    end_offset   bigint NOT NULL,             -- inclusive
    created_at   timestamptz NOT NULL DEFAULT now(),
    hashes       bytea NOT NULL,              -- 16 bytes per frame, hash k belongs to base_offset + k
    PRIMARY KEY (partition_id, base_offset)
);
ALTER TABLE queen.log_txns ALTER COLUMN hashes SET STORAGE EXTERNAL;
-- The dedup probe and the sidecar purge both select a partition's rows by age.
CREATE INDEX log_txns_age_idx ON queen.log_txns (partition_id, created_at);

CREATE TABLE queen.log_consumers (
    partition_id      uuid NOT NULL,
    consumer_group    text NOT NULL,          -- '__QUEUE_MODE__' for queue mode
    committed         bigint NOT NULL DEFAULT -1,
    batch_end         bigint,                 -- inclusive end of the leased span, null = no lease
    worker_id         text,                   -- the leaseId of the live lease
    lease_expires_at  timestamptz,
    batch_retry_count integer NOT NULL DEFAULT 0,
    attempt_count     integer NOT NULL DEFAULT 0,
    attempt_from      bigint,                 -- the span start attempt_count counts from
    total_consumed    bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (partition_id, consumer_group)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 200);

-- No foreign key into segments: retention must never cascade into the DLQ.
CREATE TABLE queen.log_dlq (
    id              bigserial PRIMARY KEY,
    partition_id    uuid NOT NULL,
    consumer_group  text NOT NULL,
    "offset"        bigint NOT NULL,
    message_id      uuid NOT NULL,
    transaction_id  text NOT NULL,
    payload         jsonb NOT NULL,
    error           text,
    retry_count     integer NOT NULL DEFAULT 0,
    failed_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (partition_id, consumer_group, "offset")
);
CREATE INDEX log_dlq_txn_idx ON queen.log_dlq (partition_id, transaction_id);
