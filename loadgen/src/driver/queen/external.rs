//! An external Queen given by `--broker-url` (ours or Queen's own server), or added as one cell
//! among the others by `--external`: nothing is started; with its database URL, its own
//! database is measured as it is, never created or dropped (rounds are kept apart by fresh
//! queue names).

use super::QueenCell;
use crate::client::BrokerClient;
use crate::driver::system::{Installed, Pending, Site, System};
use crate::lifecycle::env::Env;
use crate::lifecycle::CellRound;
use crate::target::external_cells::ExternalCell;
use crate::target::postgres::{connect, database_name};
use crate::target::profile::Profile;

/// The broker at `url`, its own database (if given) and its profile.
pub struct ExternalQueen {
    pub url: String,
    pub database_url: Option<String>,
    pub profile: Profile,
}

impl ExternalQueen {
    /// The run's one external broker (`--broker-url`, `--database-url`).
    pub fn of_run(env: &Env, url: &str) -> ExternalQueen {
        ExternalQueen {
            url: url.to_string(),
            database_url: env.settings.database_url.clone(),
            profile: env.profile.clone(),
        }
    }

    /// The external cell `cell` (`--external`).
    pub fn of_cell(cell: &ExternalCell) -> ExternalQueen {
        ExternalQueen {
            url: cell.spec.broker_url.clone(),
            database_url: Some(cell.spec.database_url.clone()),
            profile: cell.profile.clone(),
        }
    }

    async fn connect(&self) -> Result<QueenCell, String> {
        let database = match &self.database_url {
            Some(db_url) => Some((database_name(db_url)?, connect(db_url).await?)),
            None => None,
        };
        let client =
            BrokerClient::new(&self.url).with_prometheus_path(self.profile.kind.prometheus_path());
        Ok(QueenCell {
            site: Site {
                database,
                brokers: vec![client],
                processes: Vec::new(),
                owns_database: false,
            },
            sticky: false,
            promises: self.profile.kind.promises(),
        })
    }
}

impl System for ExternalQueen {
    fn install<'a>(
        &'a self,
        _env: &'a Env,
        _cr: &'a CellRound<'a>,
        _tag: &'a str,
    ) -> Pending<'a, Result<Box<dyn Installed>, String>> {
        Box::pin(async move {
            let cell = self.connect().await?;
            Ok(Box::new(cell) as Box<dyn Installed>)
        })
    }
}
