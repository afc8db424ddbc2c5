-- peers.sql: what brokers sharing one database agree on between themselves.

-- queen.peer_secret_v1(candidate) -> secret
-- Contract: the deployment's peer-notification key. The first call stores `candidate` (32 or
-- more random bytes the broker drew) and every call, that one included, returns the one stored
-- key, so brokers starting at once end with the same key. A candidate shorter than 32 bytes
-- violates the table's check (the broker always draws 32).
-- Locks: the one row of queen.peer_secret (INSERT .. ON CONFLICT DO NOTHING).
CREATE OR REPLACE FUNCTION queen.peer_secret_v1(p_candidate bytea)
RETURNS bytea
LANGUAGE sql AS $$
    INSERT INTO queen.peer_secret (id, secret) VALUES (1, p_candidate)
        ON CONFLICT (id) DO NOTHING;
    SELECT secret FROM queen.peer_secret WHERE id = 1;
$$;
