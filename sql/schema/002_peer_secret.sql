-- 002_peer_secret.sql: the key brokers sharing a database sign their peer notifications with.
--
-- This file is an immutable schema migration: it is applied once and its checksum recorded in
-- queen.schema_migrations; never edit it, add the next numbered file instead (sql/README.md).
--
-- Anyone who may connect to the database may NOTIFY on any channel, so a notification proves
-- nothing about its sender. The brokers of one deployment share this row instead (whoever can
-- read it can already write the queue's tables): a notification that hands another broker
-- what the ack registry trusts (a lease's delivered hashes) carries an HMAC under this key, and
-- one that does not verify is dropped (engine.md, "Several brokers on one database").
-- One row, written once by the first broker that starts (queen.peer_secret_v1).
CREATE TABLE queen.peer_secret (
    id         smallint    PRIMARY KEY CHECK (id = 1),
    secret     bytea       NOT NULL CHECK (length(secret) >= 32),
    created_at timestamptz NOT NULL DEFAULT now()
);
