-- ack.sql: the ack path (see shared spec ack-internals.md, "The authoritative decision
-- procedure", and storage.md): the hash-resolved ack, the positional ack, ack fusion's batched
-- advance, and THE cursor advance.
--
-- An ack is a cursor commit on one queen.log_consumers row: the only lock the ack path ever
-- takes. No procedure here locks a log_partitions row (acks never queue behind, nor form a cycle
-- with, the push serializer); partition rows are read from the statement's snapshot.
--
-- Terms used below, for one (partition, group) consumer row `c`:
--   * leased call: p_worker is non-empty. The lease is valid when c.worker_id = p_worker and
--     lease_live_v1(c.batch_end, c.lease_expires_at). An invalid lease refuses the whole call
--     with ok = false, error = 'invalid or expired lease', and changes nothing.
--   * lease-less call: p_worker is '' (or null). No validation; the call acts on the cursor
--     exactly like a leased one, with two differences: its ackable span reaches the partition's
--     last_offset instead of a batch_end, and "the batch" it can complete is the row's current
--     lease span when there is one (even another worker's). Where a branch releases the lease,
--     a lease-less call clears whatever lease the row holds (an explicit nack is authoritative:
--     the batch redelivers now, and the old holder's later acks are refused for their lease).
--     A lease-less call for a (partition, group) without a consumer row creates the row with
--     the cursor at log_start - 1 (subscription `all`), as a first pop would.
--   * release: batch_end, worker_id, lease_expires_at := null.
--   * reset: batch_retry_count := 0, attempt_count := 0, attempt_from := null (the next pop is
--     attempt 1 with a fresh retry budget).
--   * every cursor advance adds (new committed - old committed) to total_consumed, so
--     total_consumed always equals the offsets committed through acks.

-- queen.log_cursor_advances_v1(partition ids[], groups[], new committed[], release[]) -> void
-- Contract: THE cursor advance, for every (pids[i], groups[i]) at once: moves the group's
-- `committed` to GREATEST(committed, news[i]) (never backward) and adds the distance moved to
-- total_consumed; with releases[i] it also ends the lease (batch_end, worker_id,
-- lease_expires_at := null) and resets the retry and attempt state of the batch. Each
-- (partition, group) appears at most once. Validation (lease, bounds) is the caller's.
-- Plan: force_generic_plan (the UPDATE is keyed by the consumer rows' primary key whatever the
-- values).
-- Locks: the consumer rows (the callers already hold them FOR UPDATE).
CREATE OR REPLACE FUNCTION queen.log_cursor_advances_v1(p_pids uuid[], p_groups text[],
                                                        p_news bigint[], p_releases boolean[])
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    UPDATE queen.log_consumers lc SET
        committed = GREATEST(lc.committed, u.new_at),
        batch_end = CASE WHEN u.release THEN NULL ELSE lc.batch_end END,
        worker_id = CASE WHEN u.release THEN NULL ELSE lc.worker_id END,
        lease_expires_at = CASE WHEN u.release THEN NULL ELSE lc.lease_expires_at END,
        batch_retry_count = CASE WHEN u.release THEN 0 ELSE lc.batch_retry_count END,
        attempt_count = CASE WHEN u.release THEN 0 ELSE lc.attempt_count END,
        attempt_from = CASE WHEN u.release THEN NULL ELSE lc.attempt_from END,
        total_consumed = lc.total_consumed + (GREATEST(lc.committed, u.new_at) - lc.committed)
    FROM unnest(p_pids, p_groups, p_news, p_releases) AS u(pid, grp, new_at, release)
    WHERE lc.partition_id = u.pid AND lc.consumer_group = u.grp;
END;
$$;

-- queen.log_cursor_advance_v1(partition id, group, new committed, release) -> void
-- Contract: log_cursor_advances_v1 for one row (the form the positional ack, DLQ and
-- transaction procedures call): the same transition, column by column, written as a one-row
-- UPDATE keyed by the primary key. Calling the set form with one-element arrays costs a quarter
-- of a positional ack more (an extra PL/pgSQL call, its plan_cache_mode save and restore, four
-- arrays and an unnest join: about 115 000 more instructions per call under callgrind); a
-- one-row UPDATE plans generic on its own. The two statements are held to each other by the
-- seeded differential test of log_ack_multi_v1 against log_ack_at_v1 (tests/broker/ack_multi.rs),
-- which compares every column of every consumer row: change one, change both.
-- PL/pgSQL rather than SQL: an SQL function whose body is an UPDATE is never inlined and is
-- planned again on every call.
-- Locks: the consumer row (the callers already hold it FOR UPDATE).
CREATE OR REPLACE FUNCTION queen.log_cursor_advance_v1(p_pid uuid, p_group text, p_new bigint,
                                                       p_release boolean)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE queen.log_consumers lc SET
        committed = GREATEST(lc.committed, p_new),
        batch_end = CASE WHEN p_release THEN NULL ELSE lc.batch_end END,
        worker_id = CASE WHEN p_release THEN NULL ELSE lc.worker_id END,
        lease_expires_at = CASE WHEN p_release THEN NULL ELSE lc.lease_expires_at END,
        batch_retry_count = CASE WHEN p_release THEN 0 ELSE lc.batch_retry_count END,
        attempt_count = CASE WHEN p_release THEN 0 ELSE lc.attempt_count END,
        attempt_from = CASE WHEN p_release THEN NULL ELSE lc.attempt_from END,
        total_consumed = lc.total_consumed + (GREATEST(lc.committed, p_new) - lc.committed)
    WHERE lc.partition_id = p_pid AND lc.consumer_group = p_group;
END;
$$;

-- queen.log_hash_index_v1(hashes, hash, from, to) -> k
-- Contract: the lowest frame index k in [from, to] (clamped to the blob) whose 16-byte hash in
-- `hashes` (16 bytes per frame) equals `hash`; null when none. A byte match that is not aligned
-- on a frame boundary is skipped, so the answer is exact.
-- Locks: none (immutable).
CREATE OR REPLACE FUNCTION queen.log_hash_index_v1(p_hashes bytea, p_hash bytea, p_from integer,
                                                   p_to integer)
RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    v_from integer := GREATEST(p_from, 0);
    v_to integer := LEAST(p_to, length(p_hashes) / 16 - 1);
    v_window bytea;
    v_at integer := 0;
    v_pos integer;
BEGIN
    IF v_to < v_from THEN
        RETURN NULL;
    END IF;
    v_window := substring(p_hashes FROM v_from * 16 + 1 FOR (v_to - v_from + 1) * 16);
    LOOP
        v_pos := position(p_hash IN substring(v_window FROM v_at + 1));
        IF v_pos = 0 THEN
            RETURN NULL;
        END IF;
        v_at := v_at + v_pos - 1;            -- 0-based byte index of the match
        IF v_at % 16 = 0 THEN
            RETURN v_from + v_at / 16;
        END IF;
        v_at := v_at + 1;                    -- misaligned: search on past it
    END LOOP;
END;
$$;

-- queen.log_ack_refused_v1(error) -> the answer of a refused call (nothing changed)
CREATE OR REPLACE FUNCTION queen.log_ack_refused_v1(p_error text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('ok', false, 'error', p_error, 'acked', 0, 'committed', NULL,
                              'lease_released', false, 'dlq', false, 'dlq_offset', NULL,
                              'signal', NULL, 'signal_offset', NULL, 'branch', 'refused',
                              'noopHashes', '[]'::jsonb, 'staleHashes', '[]'::jsonb,
                              'unresolvedHashes', '[]'::jsonb, 'offsets', '[]'::jsonb)
$$;

-- queen.log_ack_consumer_v1(partition id, group, leased) -> the locked consumer row, or null
-- Contract: locks (FOR UPDATE) the consumer row of (partition, group) and returns it. For a
-- lease-less caller (`leased` false) a missing row of an existing partition is created first
-- with the cursor at log_start - 1. Null when there is no row (leased caller) or no partition.
-- Locks: the consumer row, FOR UPDATE (waits for a concurrent ack or pop holding it).
CREATE OR REPLACE FUNCTION queen.log_ack_consumer_v1(p_partition_id uuid, p_group text,
                                                     p_leased boolean)
RETURNS queen.log_consumers
LANGUAGE plpgsql AS $$
DECLARE
    c queen.log_consumers;
BEGIN
    SELECT * INTO c FROM queen.log_consumers lc
    WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group
    FOR UPDATE;
    IF FOUND OR p_leased THEN
        RETURN CASE WHEN FOUND THEN c END;
    END IF;
    INSERT INTO queen.log_consumers (partition_id, consumer_group, committed)
    SELECT p.id, p_group, p.log_start - 1 FROM queen.log_partitions p WHERE p.id = p_partition_id
    ON CONFLICT DO NOTHING;
    SELECT * INTO c FROM queen.log_consumers lc
    WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group
    FOR UPDATE;
    RETURN CASE WHEN FOUND THEN c END;
END;
$$;

-- queen.log_ack_by_hash_v1(partition id, group, worker, hashes[], statuses[]) -> jsonb
-- Contract: THE authoritative ack. hashes[i] is the 16-byte big-endian xxh3_128 of the i-th
-- acked transactionId, statuses[i] one of completed | failed | retry | dlq (anything else, a
-- hash that is not 16 bytes, or arrays of different lengths raise QACK: the broker validates).
--
-- Resolution (one statement; `resolved` is materialised once, every decision after it is a
-- scalar aggregate):
--   input    the hashes unnested once with their status and array position;
--   occ      the occurrences (hash, offset) of the sidecar rows overlapping the ackable span
--            [lo, hi], lo = GREATEST(committed + 1, txns_start), hi = batch_end under a lease,
--            the partition's last_offset without one. Rows are bounded on the log_txns primary
--            key from BOTH sides: base_offset in [base of the row holding lo, hi]. An ack at the
--            head of a deep partition explodes only the leased batch's blobs: neither the
--            backlog above batch_end nor the retained history below the cursor.
--            Without a lease, hi is the log end, so occ is read in two parts: `near` up to the
--            row's (possibly expired) lease end or lo + 1023, whichever is further, and `far`
--            beyond it only for the hashes `near` did not hold (gated off entirely when it held
--            them all; with at most 16 such hashes a far row is exploded only if position()
--            finds one of them in its blob). Every far offset is above every near one, so MIN
--            is unchanged: the split is result-preserving and a lease-less ack of a just
--            delivered batch no longer explodes the whole backlog.
--   resolved per input: eff = MIN offset of the hash in [lo, hi] (MIN prefers the in-span
--            copy, so a re-push never shadows the copy being acked), and below = whether the
--            hash occurs at or below committed. `below` is needed only to classify an input
--            that did not resolve in the span, so it is evaluated only for those (a CASE
--            short-circuits the sub-plan), by a probe of the sidecar rows at or below the cursor
--            that filters each row's blob with position() (C memmem, no explosion) and confirms
--            the frame-aligned index with log_hash_index_v1. The probe is exact, so the honesty
--            lists are exactly the spec's; it costs a scan of the retained sidecar below the
--            cursor, paid only by acks that carry below-cursor or unknown transactionIds.
--   sig      the lowest eff among failed | dlq | retry inputs, ties broken dlq > failed > retry.
--
-- Cursor: new = GREATEST(old, LEAST(max completed eff, sig - 1)) (old when nothing completed
-- resolved in the span): the maximum acked-ok offset clamped below the head signal. Silent gaps
-- below that offset are implicitly completed; completed positions above the signal redeliver.
-- acked = new - old.
--
-- Branches (retry budget exhausted <=> batch_retry_count >= queues.retry_limit before this
-- call, i.e. the call's charge would exceed the limit: with retryLimit N, N failed nacks
-- redeliver and the (N+1)-th dead-letters or drops; DLQ enabled <=> dead_letter_queue OR
-- dlq_after_max_retries, which gates only the exhausted `failed` case: an explicit `dlq`
-- signal always hands off):
--   dlq                          advance the prefix, keep the lease, dlq = true, dlq_offset = sig
--   failed, budget remains       advance the prefix, release, batch_retry_count + 1 (once)
--   failed, exhausted, DLQ on    advance the prefix, keep the lease, dlq = true, dlq_offset = sig
--   failed, exhausted, DLQ off   drop the poison: committed = GREATEST(old, sig), release, reset
--   retry                        advance the prefix, release, no charge
--   no signal, batch completed   advance, release, reset. "Completed" means new >= batch_end of
--                                the row's lease; for a lease-less call on a row without a
--                                lease it means the cursor moved (new > old).
--   no signal, partial           advance, keep the lease, retry/attempt state untouched
-- With dlq = true the broker files the DLQ row through log_dlq_head_v3 under the same worker.
-- (Filing commits through the poison offset, so silent positions between the prefix and the
-- poison are implicitly completed, like any gap below a committed offset.)
-- An unknown partition: a leased call is refused for its lease; a lease-less one answers
-- ok = true with every hash unresolved and changes nothing.
--
-- Returns jsonb: ok, error (null | 'invalid or expired lease'), acked, committed (new),
-- lease_released (a lease was actually cleared by this call), dlq, dlq_offset, signal
-- (status of the head signal or null), signal_offset, branch (refused | dlq | failed |
-- failed_dlq | failed_drop | retry | completed | partial), noopHashes (below-cursor, acked
-- completed: a harmless duplicate), staleHashes (below-cursor, acked failed | dlq | retry:
-- rejected "already committed"), unresolvedHashes (no occurrence at or below hi: "unresolvable";
-- under a lease that includes transactionIds of offsets above batch_end), each a list of
-- 32-char lowercase hex tokens in input order, and offsets (eff per input, null when it did not
-- resolve in the span). A refused call changes nothing and lists nothing.
-- The lease is validated with lease_live_v1 and a worker match. The cursor UPDATE is this
-- procedure's own: unlike log_cursor_advance_v1 it charges the retry budget (failed) and resets
-- attempts independently of releasing the lease.
-- Locks: the consumer row, FOR UPDATE (log_ack_consumer_v1). Never a log_partitions row.
CREATE OR REPLACE FUNCTION queen.log_ack_by_hash_v1(p_partition_id uuid, p_group text,
                                                    p_worker text, p_hashes bytea[],
                                                    p_statuses text[])
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_leased boolean := COALESCE(p_worker, '') <> '';
    c queen.log_consumers;
    v_last bigint;
    v_txns_start bigint;
    v_retry_limit integer;
    v_dlq_enabled boolean;
    v_lo bigint;
    v_hi bigint;
    v_lo_row bigint;
    v_near bigint;
    v_far_row bigint;
    v_max_ok bigint;
    v_sig bigint;
    v_sig_status text;
    v_noop text[];
    v_stale text[];
    v_unresolved text[];
    v_offsets bigint[];
    v_old bigint;
    v_new bigint;
    v_branch text;
    v_release boolean := false;
    v_reset boolean := false;
    v_charge boolean := false;
    v_dlq boolean := false;
BEGIN
    IF COALESCE(array_length(p_hashes, 1), 0) <> COALESCE(array_length(p_statuses, 1), 0) THEN
        RAISE EXCEPTION 'QACK hashes and statuses differ in length';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_statuses) AS s
               WHERE s IS NULL OR s NOT IN ('completed', 'failed', 'retry', 'dlq'))
       OR EXISTS (SELECT 1 FROM unnest(p_hashes) AS h WHERE h IS NULL OR length(h) <> 16) THEN
        RAISE EXCEPTION 'QACK a status is not completed/failed/retry/dlq or a hash is not 16 bytes';
    END IF;

    c := queen.log_ack_consumer_v1(p_partition_id, p_group, v_leased);
    IF c.partition_id IS NULL THEN
        IF v_leased THEN
            RETURN queen.log_ack_refused_v1('invalid or expired lease');
        END IF;
        -- No such partition: nothing can resolve.
        RETURN queen.log_ack_refused_v1(NULL) || jsonb_build_object(
            'ok', true, 'branch', 'partial',
            'unresolvedHashes', to_jsonb(ARRAY(SELECT encode(h, 'hex') FROM unnest(p_hashes) AS h)),
            'offsets', to_jsonb(ARRAY(SELECT NULL::bigint FROM unnest(p_hashes))));
    END IF;
    IF v_leased AND NOT (c.worker_id IS NOT DISTINCT FROM p_worker
                         AND queen.lease_live_v1(c.batch_end, c.lease_expires_at)) THEN
        RETURN queen.log_ack_refused_v1('invalid or expired lease');
    END IF;

    SELECT p.last_offset, p.txns_start, q.retry_limit, q.dead_letter_queue OR q.dlq_after_max_retries
    INTO v_last, v_txns_start, v_retry_limit, v_dlq_enabled
    FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
    WHERE p.id = p_partition_id;

    v_old := c.committed;
    v_lo := GREATEST(c.committed + 1, v_txns_start);
    v_hi := CASE WHEN v_leased THEN c.batch_end ELSE v_last END;
    v_lo_row := COALESCE((SELECT max(t.base_offset) FROM queen.log_txns t
                          WHERE t.partition_id = p_partition_id AND t.base_offset <= v_lo), v_lo);
    -- The near part of the span. Under a lease it is the whole span. Without one it is the
    -- row's (possibly expired) lease span, or at least 1024 offsets: where a lease-less ack's
    -- transactionIds almost always are. The far part is read only for hashes not found nearer.
    v_near := CASE WHEN v_leased THEN v_hi
                   ELSE LEAST(v_hi, GREATEST(COALESCE(c.batch_end, v_lo - 1), v_lo + 1023)) END;
    IF v_near < v_hi THEN
        v_far_row := COALESCE((SELECT max(t.base_offset) FROM queen.log_txns t
                               WHERE t.partition_id = p_partition_id
                                 AND t.base_offset <= v_near + 1), v_near + 1);
    END IF;

    WITH input AS MATERIALIZED (
        SELECT i.ord, i.hash, i.status
        FROM unnest(p_hashes, p_statuses) WITH ORDINALITY AS i(hash, status, ord)
    ), near AS MATERIALIZED (
        SELECT substring(t.hashes FROM k * 16 + 1 FOR 16) AS hash, t.base_offset + k AS off
        FROM queen.log_txns t
        CROSS JOIN LATERAL generate_series(GREATEST(v_lo - t.base_offset, 0)::integer,
                                           (LEAST(t.end_offset, v_near) - t.base_offset)::integer)
                           AS k
        WHERE t.partition_id = p_partition_id
          AND t.base_offset >= v_lo_row AND t.base_offset <= v_near
          AND t.end_offset >= v_lo
    ), missing AS MATERIALIZED (
        SELECT DISTINCT i.hash FROM input i
        WHERE NOT EXISTS (SELECT 1 FROM near n WHERE n.hash = i.hash)
    ), far AS (
        -- Lease-less only, and only when some hash was not found nearer (the uncorrelated
        -- EXISTS gates the whole scan). With few such hashes, a row's blob is exploded only
        -- when position() finds one of them in it.
        SELECT substring(t.hashes FROM k * 16 + 1 FOR 16) AS hash, t.base_offset + k AS off
        FROM queen.log_txns t
        CROSS JOIN LATERAL generate_series(GREATEST(v_near + 1 - t.base_offset, 0)::integer,
                                           (LEAST(t.end_offset, v_hi) - t.base_offset)::integer)
                           AS k
        WHERE v_near < v_hi AND EXISTS (SELECT 1 FROM missing)
          AND t.partition_id = p_partition_id
          AND t.base_offset >= v_far_row AND t.base_offset <= v_hi
          AND t.end_offset > v_near
          AND ((SELECT count(*) FROM missing) > 16
               OR EXISTS (SELECT 1 FROM missing m WHERE position(m.hash IN t.hashes) > 0))
    ), occ AS (
        SELECT hash, off FROM near
        UNION ALL
        SELECT hash, off FROM far
    ), hit AS (
        SELECT o.hash, min(o.off) AS eff
        FROM occ o
        WHERE o.hash IN (SELECT hash FROM input)
        GROUP BY o.hash
    ), resolved AS MATERIALIZED (
        SELECT i.ord, i.hash, i.status, h.eff,
               CASE WHEN h.eff IS NOT NULL THEN false
                    ELSE EXISTS (
                        SELECT 1 FROM queen.log_txns t
                        WHERE t.partition_id = p_partition_id
                          AND t.base_offset >= v_txns_start AND t.base_offset <= c.committed
                          AND position(i.hash IN t.hashes) > 0
                          AND queen.log_hash_index_v1(
                                  t.hashes, i.hash, 0,
                                  (LEAST(t.end_offset, c.committed) - t.base_offset)::integer)
                              IS NOT NULL)
               END AS below
        FROM input i LEFT JOIN hit h USING (hash)
    ), sig AS (
        SELECT r.eff, r.status
        FROM resolved r
        WHERE r.status <> 'completed' AND r.eff IS NOT NULL
        ORDER BY r.eff, CASE r.status WHEN 'dlq' THEN 0 WHEN 'failed' THEN 1 ELSE 2 END
        LIMIT 1
    )
    SELECT (SELECT max(r.eff) FROM resolved r WHERE r.status = 'completed'),
           (SELECT s.eff FROM sig s),
           (SELECT s.status FROM sig s),
           ARRAY(SELECT encode(r.hash, 'hex') FROM resolved r
                 WHERE r.eff IS NULL AND r.below AND r.status = 'completed' ORDER BY r.ord),
           ARRAY(SELECT encode(r.hash, 'hex') FROM resolved r
                 WHERE r.eff IS NULL AND r.below AND r.status <> 'completed' ORDER BY r.ord),
           ARRAY(SELECT encode(r.hash, 'hex') FROM resolved r
                 WHERE r.eff IS NULL AND NOT r.below ORDER BY r.ord),
           ARRAY(SELECT r.eff FROM resolved r ORDER BY r.ord)
    INTO v_max_ok, v_sig, v_sig_status, v_noop, v_stale, v_unresolved, v_offsets;

    -- The maximum acked-ok offset, clamped below the head signal; never backward.
    v_new := COALESCE(v_max_ok, v_old);
    IF v_sig IS NOT NULL THEN
        v_new := LEAST(v_new, v_sig - 1);
    END IF;
    v_new := GREATEST(v_new, v_old);

    IF v_sig IS NULL THEN
        IF (c.batch_end IS NOT NULL AND v_new >= c.batch_end)
           OR (c.batch_end IS NULL AND v_new > v_old) THEN
            v_branch := 'completed'; v_release := true; v_reset := true;
        ELSE
            v_branch := 'partial';
        END IF;
    ELSIF v_sig_status = 'dlq' THEN
        v_branch := 'dlq'; v_dlq := true;
    ELSIF v_sig_status = 'retry' THEN
        v_branch := 'retry'; v_release := true;
    ELSIF c.batch_retry_count < v_retry_limit THEN
        v_branch := 'failed'; v_release := true; v_charge := true;
    ELSIF v_dlq_enabled THEN
        v_branch := 'failed_dlq'; v_dlq := true;
    ELSE
        v_branch := 'failed_drop'; v_release := true; v_reset := true;
        v_new := GREATEST(v_old, v_sig);
    END IF;

    IF v_new <> v_old OR v_release OR v_reset OR v_charge THEN
        UPDATE queen.log_consumers lc SET
            committed = v_new,
            batch_end = CASE WHEN v_release THEN NULL ELSE lc.batch_end END,
            worker_id = CASE WHEN v_release THEN NULL ELSE lc.worker_id END,
            lease_expires_at = CASE WHEN v_release THEN NULL ELSE lc.lease_expires_at END,
            batch_retry_count = CASE WHEN v_reset THEN 0
                                     WHEN v_charge THEN lc.batch_retry_count + 1
                                     ELSE lc.batch_retry_count END,
            attempt_count = CASE WHEN v_reset THEN 0 ELSE lc.attempt_count END,
            attempt_from = CASE WHEN v_reset THEN NULL ELSE lc.attempt_from END,
            total_consumed = lc.total_consumed + (v_new - v_old)
        WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group;
    END IF;

    RETURN jsonb_build_object(
        'ok', true, 'error', NULL, 'acked', v_new - v_old, 'committed', v_new,
        'lease_released', v_release AND c.batch_end IS NOT NULL,
        'dlq', v_dlq, 'dlq_offset', CASE WHEN v_dlq THEN v_sig END,
        'signal', v_sig_status, 'signal_offset', v_sig, 'branch', v_branch,
        'noopHashes', to_jsonb(v_noop), 'staleHashes', to_jsonb(v_stale),
        'unresolvedHashes', to_jsonb(v_unresolved), 'offsets', to_jsonb(v_offsets));
END;
$$;

-- queen.log_ack_at_v1(partition id, group, worker, upto, ok, count) -> jsonb
-- Contract: the positional ack (registry fast path): no hash resolution.
--   ok = true: commit through `upto`: committed := GREATEST(committed, upto), never backward.
--     Under a lease `upto` must lie inside the leased batch: upto > batch_end is refused with
--     'beyond the leased batch' (the leased batch_end is the clamp; nothing is committed beyond
--     it, and a caller whose idea of the batch differs from PostgreSQL's must take the hash
--     path rather than be half-acked silently). A lease-less call may commit up to the
--     partition's last_offset; beyond it is refused with 'beyond the log end'. When the cursor
--     reaches the lease's batch_end (or, lease-less on a row without a lease, moves at all) the
--     lease is released and retry/attempt state reset; otherwise the lease is kept (partial).
--   ok = false: a positional nack: release the lease without advancing the cursor and without
--     charging the retry budget (the batch redelivers as after `retry`; attempt_count keeps
--     counting). `upto` is not used.
--   count: with count > 0 on a leased call, the caller asserts the cursor still sits where its
--     pop left it: committed = upto - count (the registry's view of the batch). A cursor that
--     moved since (a lease-less ack in between) refuses the call with 'cursor moved since the
--     pop', so the caller takes the hash path, whose noop/stale answers are then exact. count
--     <= 0 asserts nothing. acked and total_consumed are cursor arithmetic (new - old), so a
--     folded or repeated ack never double-counts.
-- A leased call with an invalid or expired lease (lease_live_v1 and a worker match) is refused
-- ('invalid or expired lease') and changes nothing. The advance is log_cursor_advance_v1.
-- Returns jsonb {ok, error, acked, committed, lease_released}.
-- Locks: the consumer row, FOR UPDATE (log_ack_consumer_v1). Never a log_partitions row.
CREATE OR REPLACE FUNCTION queen.log_ack_at_v1(p_partition_id uuid, p_group text, p_worker text,
                                               p_upto bigint, p_ok boolean, p_count integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_leased boolean := COALESCE(p_worker, '') <> '';
    c queen.log_consumers;
    v_last bigint;
    v_new bigint;
    v_release boolean;
BEGIN
    c := queen.log_ack_consumer_v1(p_partition_id, p_group, v_leased);
    IF c.partition_id IS NULL THEN
        RETURN jsonb_build_object('ok', false, 'acked', 0, 'committed', NULL,
                                  'lease_released', false,
                                  'error', CASE WHEN v_leased THEN 'invalid or expired lease'
                                                ELSE 'unknown partition' END);
    END IF;
    IF v_leased AND NOT (c.worker_id IS NOT DISTINCT FROM p_worker
                         AND queen.lease_live_v1(c.batch_end, c.lease_expires_at)) THEN
        RETURN jsonb_build_object('ok', false, 'error', 'invalid or expired lease', 'acked', 0,
                                  'committed', c.committed, 'lease_released', false);
    END IF;

    IF NOT COALESCE(p_ok, false) THEN
        -- A release without advance: the batch's retry and attempt state stay.
        v_new := c.committed;
        v_release := c.batch_end IS NOT NULL;
        IF v_release THEN
            UPDATE queen.log_consumers lc SET
                batch_end = NULL, worker_id = NULL, lease_expires_at = NULL
            WHERE lc.partition_id = p_partition_id AND lc.consumer_group = p_group;
        END IF;
    ELSE
        IF v_leased AND p_upto > c.batch_end THEN
            RETURN jsonb_build_object('ok', false, 'error', 'beyond the leased batch', 'acked', 0,
                                      'committed', c.committed, 'lease_released', false);
        END IF;
        IF v_leased AND COALESCE(p_count, 0) > 0 AND c.committed <> p_upto - p_count THEN
            RETURN jsonb_build_object('ok', false, 'error', 'cursor moved since the pop', 'acked', 0,
                                      'committed', c.committed, 'lease_released', false);
        END IF;
        IF NOT v_leased THEN
            SELECT p.last_offset INTO v_last FROM queen.log_partitions p WHERE p.id = p_partition_id;
            IF p_upto > v_last THEN
                RETURN jsonb_build_object('ok', false, 'error', 'beyond the log end', 'acked', 0,
                                          'committed', c.committed, 'lease_released', false);
            END IF;
        END IF;
        v_new := GREATEST(c.committed, p_upto);
        v_release := (c.batch_end IS NOT NULL AND v_new >= c.batch_end)
                     OR (c.batch_end IS NULL AND v_new > c.committed);
        IF v_new <> c.committed OR v_release THEN
            PERFORM queen.log_cursor_advance_v1(p_partition_id, p_group, v_new, v_release);
        END IF;
    END IF;
    RETURN jsonb_build_object('ok', true, 'error', NULL, 'acked', v_new - c.committed,
                              'committed', v_new,
                              'lease_released', v_release AND c.batch_end IS NOT NULL);
END;
$$;

-- queen.log_ack_v1(tenant, queue, partition, group, worker, upto, ok, count) -> jsonb
-- Contract: log_ack_at_v1 with the partition addressed by (tenant, queue name, partition name)
-- (the transaction wire's positional form). A queue or partition the tenant does not have is
-- refused: {ok: false, error: 'unknown partition'} (a foreign tenant's is the same: unknown).
-- Locks: as log_ack_at_v1 (the consumer row only).
CREATE OR REPLACE FUNCTION queen.log_ack_v1(p_tenant uuid, p_queue text, p_partition text,
                                            p_group text, p_worker text, p_upto bigint,
                                            p_ok boolean, p_count integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_pid uuid;
BEGIN
    SELECT p.id INTO v_pid
    FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
    WHERE q.tenant_id = p_tenant AND q.name = p_queue AND p.name = p_partition;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('ok', false, 'error', 'unknown partition', 'acked', 0,
                                  'committed', NULL, 'lease_released', false);
    END IF;
    RETURN queen.log_ack_at_v1(v_pid, p_group, p_worker, p_upto, p_ok, p_count);
END;
$$;

-- queen.log_ack_multi_v1(pids[], groups[], ends[], workers[], counts[]) -> one row per input
-- Contract: row i gets the verdict of the positional advance log_ack_at_v1(pids[i], groups[i],
-- workers[i], ends[i], true, counts[i]), run over the rows in (partition, group, ordinal) order:
-- validate worker and lease when the worker is non-empty, clamp to the leased batch_end,
-- advance `committed` (never backward), release the lease when the cursor reaches batch_end,
-- bump total_consumed. There is no nack, retry or DLQ branch: the fusion path only carries
-- full-batch completed acks. Verdicts come back by INPUT ORDINAL (`ordinal` = i), whatever
-- order the rows were executed in: ok = true is Committed, ok = false is Rejected (with the
-- reason), and the whole call commits either way. Two rows on one (partition, group) with
-- different workers stay separate and are each validated on their own.
-- Two ways to the same answers: when every row carries a worker and no (partition, group)
-- appears twice (every flush the broker sends in practice), one statement locks and judges all
-- rows and one call of log_cursor_advances_v1 advances the accepted ones, applying
-- log_ack_at_v1's leased branch as written there: a missing row or a lease that is not this
-- worker's and live is 'invalid or expired lease' (committed null for a missing row); past
-- batch_end is 'beyond the leased batch'; a count whose span does not start right after the
-- cursor is 'cursor moved since the pop'; otherwise the cursor goes to GREATEST(committed,
-- end), the lease is released once it reaches batch_end, and a row that neither moves nor
-- releases is not written. Any other call runs log_ack_at_v1 row by row: a row without a
-- worker may create its consumer row and checks the log end instead of a lease, and two rows
-- of one (partition, group) must see each other's advance, which only the sequential loop
-- gives.
-- Plan: force_generic_plan (its ordering statements were planned on every call; they are keyed
-- by the input arrays, so the generic plan is the custom one).
-- Locks: consumer rows FOR UPDATE, in (partition_id, consumer_group) order (then ordinal), the
-- total order every batched procedure uses, so flushes cannot deadlock with each other, with
-- the transaction wire or with pops.
CREATE OR REPLACE FUNCTION queen.log_ack_multi_v1(p_pids uuid[], p_groups text[],
                                                  p_ends bigint[], p_workers text[],
                                                  p_counts integer[])
RETURNS TABLE (ordinal integer, ok boolean, error text, acked bigint, committed bigint,
               lease_released boolean)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    n integer := coalesce(array_length(p_pids, 1), 0);
    i integer;
    v jsonb;
    v_o integer[];
    v_refusal text[];
    v_was bigint[];
    v_new bigint[];
    v_released boolean[];
    v_moved_pids uuid[];
    v_moved_groups text[];
    v_moved_news bigint[];
    v_moved_releases boolean[];
BEGIN
    IF n <> coalesce(array_length(p_groups, 1), 0) OR n <> coalesce(array_length(p_ends, 1), 0)
       OR n <> coalesce(array_length(p_workers, 1), 0) OR n <> coalesce(array_length(p_counts, 1), 0) THEN
        RAISE EXCEPTION 'QARG log_ack_multi_v1: the five arrays must have one length';
    END IF;
    IF array_position(p_workers, '') IS NOT NULL OR array_position(p_workers, NULL) IS NOT NULL
       OR EXISTS (SELECT 1 FROM unnest(p_pids, p_groups) AS u(pid, grp)
                  GROUP BY u.pid, u.grp HAVING count(*) > 1) THEN
        -- The general case, row by row (008).
        FOR i IN SELECT o FROM generate_series(1, n) AS o ORDER BY p_pids[o], p_groups[o], o LOOP
            v := queen.log_ack_at_v1(p_pids[i], p_groups[i], p_workers[i], p_ends[i], true,
                                     p_counts[i]);
            ordinal := i;
            ok := (v ->> 'ok')::boolean;
            error := v ->> 'error';
            acked := COALESCE((v ->> 'acked')::bigint, 0);
            committed := (v ->> 'committed')::bigint;
            lease_released := COALESCE((v ->> 'lease_released')::boolean, false);
            RETURN NEXT;
        END LOOP;
        RETURN;
    END IF;

    -- Every row leased, each on its own (partition, group): lock in order and judge at once.
    WITH judged AS (
        SELECT i.o::integer AS o, i.pid, i.grp, l.was, l.batch_end,
               CASE WHEN l.was IS NULL
                         OR NOT (l.worker_id IS NOT DISTINCT FROM i.worker
                                 AND queen.lease_live_v1(l.batch_end, l.lease_expires_at))
                    THEN 'invalid or expired lease'
                    WHEN i.upto > l.batch_end THEN 'beyond the leased batch'
                    WHEN COALESCE(i.cnt, 0) > 0 AND l.was <> i.upto - i.cnt
                    THEN 'cursor moved since the pop'
               END AS refusal,
               GREATEST(l.was, i.upto) AS new_at
        FROM (SELECT * FROM unnest(p_pids, p_groups, p_ends, p_workers, p_counts)
                            WITH ORDINALITY AS u(pid, grp, upto, worker, cnt, o)
              ORDER BY u.pid, u.grp) i
        LEFT JOIN LATERAL (
            SELECT lc.committed AS was, lc.batch_end, lc.worker_id, lc.lease_expires_at
            FROM queen.log_consumers lc
            WHERE lc.partition_id = i.pid AND lc.consumer_group = i.grp
            FOR UPDATE) l ON true
    ), moving AS (
        SELECT j.*, j.refusal IS NULL AND j.new_at >= j.batch_end AS releases,
               j.refusal IS NULL AND (j.new_at <> j.was OR j.new_at >= j.batch_end) AS writes
        FROM judged j
    )
    SELECT array_agg(m.o), array_agg(m.refusal), array_agg(m.was), array_agg(m.new_at),
           array_agg(m.releases),
           array_agg(m.pid) FILTER (WHERE m.writes), array_agg(m.grp) FILTER (WHERE m.writes),
           array_agg(m.new_at) FILTER (WHERE m.writes),
           array_agg(m.releases) FILTER (WHERE m.writes)
    INTO v_o, v_refusal, v_was, v_new, v_released,
         v_moved_pids, v_moved_groups, v_moved_news, v_moved_releases
    FROM moving m;
    IF v_moved_pids IS NOT NULL THEN
        PERFORM queen.log_cursor_advances_v1(v_moved_pids, v_moved_groups, v_moved_news,
                                             v_moved_releases);
    END IF;
    RETURN QUERY
    SELECT x.o, x.refusal IS NULL, x.refusal,
           CASE WHEN x.refusal IS NULL THEN x.new_at - x.was ELSE 0 END,
           CASE WHEN x.refusal IS NULL THEN x.new_at ELSE x.was END,
           x.released
    FROM unnest(v_o, v_refusal, v_was, v_new, v_released) AS x(o, refusal, was, new_at, released)
    ORDER BY x.o;
END;
$$;
