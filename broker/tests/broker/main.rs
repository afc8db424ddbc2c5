//! The broker's integration suites, one binary: each module is one former test file, all on
//! one throwaway PostgreSQL cluster and the helpers of `tests/common`.

#[path = "../common/mod.rs"]
#[macro_use]
mod common;

mod accelerators;
mod ack_concurrency;
mod ack_contract;
mod ack_model;
mod ack_multi;
mod bad_input;
mod encryption;
mod failover;
mod http_properties;
mod lease_dlq;
mod lifecycle;
mod max_size;
mod outage;
mod peer_notify;
mod pop_claim;
mod pop_engine;
mod pop_options;
mod push_fusion;
mod push_pop;
mod queue_options;
mod queue_resources;
mod read_timeouts;
mod refusals;
mod reliability;
mod schema_upgrade;
mod tenancy;
mod transaction;
