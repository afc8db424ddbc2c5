//! An external Queen given by `--broker-url` (ours or Queen's own server): nothing is started;
//! with `--database-url`, its own database is measured as it is, never created or dropped
//! (rounds are kept apart by fresh queue names).

use super::QueenCell;
use crate::driver::system::{Installed, Pending, Site, System};
use crate::lifecycle::env::Env;
use crate::lifecycle::CellRound;
use crate::target::postgres::{connect, database_name};

/// The broker at `url`.
pub struct ExternalQueen {
    pub url: String,
}

impl ExternalQueen {
    async fn connect(&self, env: &Env) -> Result<QueenCell, String> {
        let database = match &env.settings.database_url {
            Some(db_url) => Some((database_name(db_url)?, connect(db_url).await?)),
            None => None,
        };
        Ok(QueenCell {
            site: Site {
                database,
                brokers: vec![env.client_of(&self.url)],
                processes: Vec::new(),
                owns_database: false,
            },
            sticky: false,
            promises: env.profile.kind.promises(),
        })
    }
}

impl System for ExternalQueen {
    fn install<'a>(
        &'a self,
        env: &'a Env,
        _cr: &'a CellRound<'a>,
        _tag: &'a str,
    ) -> Pending<'a, Result<Box<dyn Installed>, String>> {
        Box::pin(async move {
            let cell = self.connect(env).await?;
            Ok(Box::new(cell) as Box<dyn Installed>)
        })
    }
}
