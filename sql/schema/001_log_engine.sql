-- 001_log_engine.sql: the tables of the log engine (schema `queen`), their indexes and storage
-- settings, and the one function an index is built on. Procedures live in sql/procedures/.
--
-- This file is an immutable schema migration: it is applied once and its checksum recorded in
-- queen.schema_migrations; never edit it, add the next numbered file instead (sql/README.md).
-- It folds the DDL of the numbered layout of commit 4fa2920 (001_schema.sql and the table
-- changes of its files 010, 012, 014, 015 and 017, in their column order): a database migrated
-- by that layout is recorded at this version without running it (sql/README.md).
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

-- Queen's whole queue option set (wire.md "Queues"). Every option has the default wire.md gives.
-- Where each acts: delayed_processing and window_buffer in the pop paths (a partition is not
-- deliverable until then); max_size in the push path (unconsumed messages per queue, 0 = no
-- limit); priority in discovery pops (higher first); encryption_enabled: frames of this queue
-- hold AES-256-GCM ciphertext; retention_enabled, ttl, retry_delay and max_wait_time_seconds are
-- accepted and echoed only (Queen's rows engine used them).
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
    delayed_processing          integer NOT NULL DEFAULT 0,
    window_buffer               integer NOT NULL DEFAULT 0,
    max_size                    bigint  NOT NULL DEFAULT 0,
    priority                    integer NOT NULL DEFAULT 0,
    encryption_enabled          boolean NOT NULL DEFAULT false,
    retention_enabled           boolean NOT NULL DEFAULT false,
    ttl                         integer NOT NULL DEFAULT 3600,
    retry_delay                 integer NOT NULL DEFAULT 1000,
    max_wait_time_seconds       integer NOT NULL DEFAULT 0,
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

-- `deduped`: only rows pushed while their queue deduplicates are indexed for the dedup probe: a
-- push of 100 frames to a queue with deduplication off would otherwise pay 100 index entries
-- for nothing (measured: batch-100 pushes at half the rate). A queue that turns deduplication on
-- later is checked against what it pushed from then on.
CREATE TABLE queen.log_txns (
    partition_id uuid NOT NULL,
    base_offset  bigint NOT NULL,
    end_offset   bigint NOT NULL,             -- inclusive
    created_at   timestamptz NOT NULL DEFAULT now(),
    hashes       bytea NOT NULL,              -- 16 bytes per frame, hash k belongs to base_offset + k
    deduped      boolean NOT NULL DEFAULT true,
    PRIMARY KEY (partition_id, base_offset)
);
ALTER TABLE queen.log_txns ALTER COLUMN hashes SET STORAGE EXTERNAL;
-- The sidecar purge selects a partition's rows by age.
CREATE INDEX log_txns_age_idx ON queen.log_txns (partition_id, created_at);

-- The dedup probe's access path (log_dedup_probe_v1, procedures/push.sql): a GIN index over one
-- 16-byte key per frame, so the probe finds the few sidecar rows that can hold an incoming hash
-- in O(log n) per hash and explodes only those; its cost does not grow with the dedup window.
-- The sidecar remains the authority: the index only names candidate rows. Its key function is
-- defined here, with the index, and not among the repeatable procedures: an index expression
-- must not change under an existing index (that needs a new function, a new index and a new
-- numbered migration).
-- queen.log_dedup_keys_v1(partition id, hashes) -> uuid[]: the index keys of a sidecar row
-- Contract: one 16-byte key per frame, in frame order: the first 8 bytes of the frame's hash
-- followed by the last 8 bytes of the partition id (random in a v4 uuid). Mixing in the
-- partition keeps one transactionId pushed to many partitions (or repeated in a queue with
-- dedup off) from making every other partition's probe visit those rows. Keys are hints:
-- equal keys do not mean equal hashes, the probe compares the full hash. IMMUTABLE (it is an
-- index expression): it depends on its arguments only.
-- Locks: none.
CREATE FUNCTION queen.log_dedup_keys_v1(p_pid uuid, p_hashes bytea)
RETURNS uuid[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    v_tail bytea := substring(uuid_send(p_pid) FROM 9 FOR 8);
    v_keys uuid[] := '{}';
BEGIN
    -- plpgsql, not a SQL function: the index evaluates this once per inserted row, and a
    -- non-inlinable SQL function is planned again on every call (measured ~110 us vs ~13 us).
    FOR k IN 0 .. length(p_hashes) / 16 - 1 LOOP
        v_keys := v_keys
                  || encode(substring(p_hashes FROM k * 16 + 1 FOR 8) || v_tail, 'hex')::uuid;
    END LOOP;
    RETURN v_keys;
END;
$$;

-- Pushes insert one entry per frame; `fastupdate = off` keeps them out of a pending list, so a
-- probe never has to scan one (the probe runs on every push, right after other pushes).
CREATE INDEX log_txns_dedup_idx ON queen.log_txns
    USING gin (queen.log_dedup_keys_v1(partition_id, hashes)) WITH (fastupdate = off)
    WHERE deduped;

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
-- `payload` is `json`, not `jsonb`: it keeps the payload's text as sent (number digits, key
-- order, whitespace, escapes) and accepts a `\u0000` escape inside a string, which `jsonb`
-- refuses. `sealed`: the payload of a row filed from an encrypted queue is kept sealed (a JSON
-- string holding the base64 of nonce || ciphertext || tag); only the broker opens it.
CREATE TABLE queen.log_dlq (
    id              bigserial PRIMARY KEY,
    partition_id    uuid NOT NULL,
    consumer_group  text NOT NULL,
    "offset"        bigint NOT NULL,
    message_id      uuid NOT NULL,
    transaction_id  text NOT NULL,
    payload         json NOT NULL,
    error           text,
    retry_count     integer NOT NULL DEFAULT 0,
    failed_at       timestamptz NOT NULL DEFAULT now(),
    sealed          boolean NOT NULL DEFAULT false,
    UNIQUE (partition_id, consumer_group, "offset")
);
-- A hash index: a transactionId may be up to 65535 incompressible bytes, which a btree cannot
-- hold; the hash index stores 4 bytes whatever the key. Lookups still filter by partition.
CREATE INDEX log_dlq_txn_idx ON queen.log_dlq USING hash (transaction_id);

-- A group subscribed with `new` (or `from`) on a queue: partitions that had no cursor row for it
-- when this row was written have been seeded; partitions created later start at their beginning.
CREATE TABLE queen.log_groups (
    queue_id       uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    consumer_group text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, consumer_group)
);
