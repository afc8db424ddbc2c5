//! Peer notifications: several brokers on one database behave as one. A broker tells the
//! others what made a partition poppable (a committed push, an ack or nack that released a
//! lease, a lease expiry it observed, a queue deleted or changed) through PostgreSQL
//! `LISTEN/NOTIFY` on the shared database, and feeds what they tell into its own readiness
//! (hotlist, pending gate, parked long-polls) exactly as a local event. `QUEEN_PEER_NOTIFY`
//! (on by default) switches it.
//!
//! - `message`: the events and their payloads (strict parsing);
//! - `outbox`: collecting, coalescing and sending them, outside any data transaction;
//! - `listener`: receiving them on a dedicated connection and applying them;
//! - `seal`: the deployment's key and the seal `Delivered` events carry;
//! - `stats`: their counters.
//!
//! A notification can only wake: it lists a partition as a candidate or wakes a parked pop,
//! whose claim PostgreSQL then decides. A lost one only delays: the periodic reseed and the
//! long-polls' re-checks find the partition anyway. The one exception, `Delivered` (a lease's
//! delivered hashes, which the receiving broker's ack registry answers that lease's ack from),
//! is sealed under the deployment's key and dropped unless the seal verifies.

pub mod listener;
pub mod message;
pub mod outbox;
pub mod seal;
pub mod stats;
