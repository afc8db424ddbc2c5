//! Our broker, started by the load generator for each cell: a fresh database `ackbench_{tag}`
//! and as many brokers on it as the cell's topology says, each with the cell's accelerator
//! toggles and the scenario's `[broker]` settings.

use super::QueenCell;
use crate::driver::system::{Installed, Pending, Site, System};
use crate::lifecycle::env::Env;
use crate::lifecycle::CellRound;
use crate::scenario::{Cell, Routing, Topology};
use crate::target::broker::BrokerProcess;
use crate::target::postgres::connect;

/// Our broker with one cell's settings: its accelerator toggles and its topology.
pub struct OwnBroker {
    pub cell: Cell,
    pub topology: Topology,
}

impl OwnBroker {
    async fn start(&self, env: &Env, cr: &CellRound<'_>, tag: &str) -> Result<QueenCell, String> {
        let db_name = format!("ackbench_{tag}");
        let pg = env
            .postgres
            .as_ref()
            .ok_or("an embedded broker needs a database")?;
        let database_url = pg.fresh_database(&db_name).await?;
        let broker_url = pg.broker_url_of(&db_name);
        let processes = self.start_brokers(env, cr, tag, &broker_url).await?;
        let brokers = processes.iter().map(|p| env.client_of(&p.url)).collect();
        Ok(QueenCell {
            site: Site {
                database: Some((db_name, connect(&database_url).await?)),
                brokers,
                processes,
                owns_database: true,
            },
            sticky: self.topology.routing == Routing::Sticky,
            promises: env.profile.kind.promises(),
        })
    }

    /// The cell's brokers on its database, one after the other (each applies the schema
    /// migrations and procedure files at start under their advisory lock), each on its own port
    /// with its own log: `broker-{tag}.log`, and `broker-{tag}-b{i}.log` for the second and
    /// later ones.
    async fn start_brokers(
        &self,
        env: &Env,
        cr: &CellRound<'_>,
        tag: &str,
        database_url: &str,
    ) -> Result<Vec<BrokerProcess>, String> {
        let bin = env
            .broker_bin
            .as_ref()
            .ok_or("no broker: neither --broker-url nor a broker binary")?;
        let settings = self.broker_env(cr);
        let mut processes = Vec::new();
        for i in 0..self.topology.instances.max(1) {
            let log = match i {
                0 => env.out_dir.join(format!("broker-{tag}.log")),
                i => env.out_dir.join(format!("broker-{tag}-b{i}.log")),
            };
            let process = BrokerProcess::start(bin, database_url, &settings, log).await?;
            if let (Some(cpus), Some(pid)) = (&env.broker_cpus, process.pid()) {
                crate::target::affinity::confine(pid, cpus, false)?;
            }
            processes.push(process);
        }
        Ok(processes)
    }

    /// The broker's environment for this cell: the toggles, then the scenario's `[broker]`.
    fn broker_env(&self, cr: &CellRound<'_>) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .cell
            .broker_env()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if let Some(n) = cr.scenario.broker.pool_size {
            env.push(("DB_POOL_SIZE".into(), n.to_string()));
        }
        env.extend(
            cr.scenario
                .broker
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        env
    }
}

impl System for OwnBroker {
    fn install<'a>(
        &'a self,
        env: &'a Env,
        cr: &'a CellRound<'a>,
        tag: &'a str,
    ) -> Pending<'a, Result<Box<dyn Installed>, String>> {
        Box::pin(async move {
            let cell = self.start(env, cr, tag).await?;
            Ok(Box::new(cell) as Box<dyn Installed>)
        })
    }
}
