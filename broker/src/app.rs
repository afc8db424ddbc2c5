//! The state every handler shares: configuration, the pool, counters, parked long-polls.

use deadpool_postgres::{Object, Pool};
use uuid::Uuid;

use crate::config::Config;
use crate::longpoll::LongPoll;
use crate::metrics::Metrics;
use crate::storage::DbError;

pub struct App {
    pub config: Config,
    pub pool: Pool,
    pub metrics: Metrics,
    pub long_poll: LongPoll,
    pub default_tenant: Uuid,
}

impl App {
    pub fn new(config: Config, pool: Pool) -> App {
        App {
            config,
            pool,
            metrics: Metrics::default(),
            long_poll: LongPoll::default(),
            default_tenant: Uuid::parse_str(ackbench_wire::DEFAULT_TENANT).expect("a valid UUID"),
        }
    }

    /// A pooled connection, held only for the statement(s) at hand.
    pub async fn db(&self, context: &'static str) -> Result<Object, DbError> {
        self.pool
            .get()
            .await
            .map_err(|e| DbError::from_pool(context, e))
    }
}
