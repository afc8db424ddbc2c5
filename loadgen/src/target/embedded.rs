//! The throwaway PostgreSQL a run starts, and the faults done to it: one server, or a primary
//! and a streaming standby (`[postgres] replication`), optionally behind the relays the broker
//! reaches it through (`relay`). Owns which server is the primary (a failover swaps them), the
//! URLs the load generator and the broker use (several hosts with
//! `target_session_attrs=read-write` when there is a standby, so both follow a promotion), and
//! the standby's re-seeding before the next cell once a failover used it up.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use throwaway_pg::Cluster;

use super::relay::Relays;
use super::session::{connect, pg};
use crate::scenario::{DatabaseSide, Replication};

/// The `application_name` the broker's sessions carry (how `kill_pg_backends` finds them).
pub const BROKER_APPLICATION: &str = "ackbench-broker";

pub struct Embedded {
    /// One server, or the two of a replicated pair.
    nodes: Vec<Arc<Cluster>>,
    /// Index of the primary in `nodes`.
    primary: AtomicUsize,
    replication: Replication,
    /// A failover promoted the standby and the pair has none until `restore_standby`.
    standby_lost: AtomicBool,
    relays: Option<Relays>,
}

impl Embedded {
    /// Starts the server (with `max_connections` raised for the broker's pools), its standby
    /// when `side` asks for replication (synchronous once it streams, for `sync`), and a relay
    /// in front of each when `side` asks for one.
    pub async fn start(side: DatabaseSide) -> Result<Embedded, String> {
        let primary = blocking(|| builder().start().map_err(|e| e.to_string())).await?;
        let mut nodes = vec![Arc::new(primary)];
        if side.replication != Replication::None {
            eprintln!(
                "ackbench: starting a streaming standby ({} replication) ...",
                side.replication.name()
            );
            let first = nodes[0].clone();
            let sync = side.replication == Replication::Sync;
            let standby = blocking(move || {
                let standby = builder().start_standby_of(&first).map_err(err)?;
                first.require_sync_standby(sync).map_err(err)?;
                Ok(standby)
            })
            .await?;
            nodes.push(Arc::new(standby));
        }
        let relays = match side.relay {
            true => Some(Relays::start(&node_addresses(&nodes)).await?),
            false => None,
        };
        Ok(Embedded {
            nodes,
            primary: AtomicUsize::new(0),
            replication: side.replication,
            standby_lost: AtomicBool::new(false),
            relays,
        })
    }

    fn primary(&self) -> Arc<Cluster> {
        self.nodes[self.primary.load(Ordering::SeqCst)].clone()
    }

    fn standby(&self) -> Option<Arc<Cluster>> {
        let i = 1 - self.primary.load(Ordering::SeqCst);
        (self.nodes.len() == 2 && !self.standby_lost.load(Ordering::SeqCst))
            .then(|| self.nodes[i].clone())
    }

    /// The load generator's URL of database `name`: the primary, wherever it is.
    pub fn url(&self, name: &str) -> String {
        match self.nodes.len() {
            1 => self.nodes[0].url(name),
            _ => multi_host_url(&node_addresses(&self.nodes), name, None),
        }
    }

    /// The broker's URL of database `name`: through the relays when there are any, every server
    /// listed (it connects to whichever accepts writes), its sessions named `BROKER_APPLICATION`.
    pub fn broker_url(&self, name: &str) -> String {
        let hosts = match &self.relays {
            Some(r) => r.addresses(),
            None => node_addresses(&self.nodes),
        };
        multi_host_url(&hosts, name, Some(BROKER_APPLICATION))
    }

    /// The primary server (a sweep applies its PostgreSQL settings there).
    pub fn primary_cluster(&self) -> Arc<Cluster> {
        self.primary()
    }

    /// The primary's postmaster, from the first line of its `postmaster.pid`.
    pub fn postmaster_pid(&self) -> Option<u32> {
        let path = self.primary().data_dir().join("postmaster.pid");
        std::fs::read_to_string(path)
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }

    pub fn relays(&self) -> Option<&Relays> {
        self.relays.as_ref()
    }

    /// `pg_ctl restart -m immediate` of the primary (`restart_postgres`).
    pub async fn restart_primary(&self) -> Result<(), String> {
        let mut cmd = tokio::process::Command::from(self.primary().immediate_restart_command());
        let output = cmd
            .output()
            .await
            .map_err(|e| format!("pg_ctl restart: {e}"))?;
        match output.status.success() {
            true => Ok(()),
            false => Err(format!(
                "pg_ctl restart -m immediate failed ({}): {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )),
        }
    }

    /// SIGSTOPs every process of the primary for `length`, then SIGCONTs them
    /// (`pause_postgres`).
    pub async fn pause_primary(&self, length: Duration) -> Result<(), String> {
        let primary = self.primary();
        let stopping = primary.clone();
        let pids = blocking(move || stopping.stop_processes().map_err(err)).await?;
        tokio::time::sleep(length).await;
        blocking(move || primary.continue_processes(&pids).map_err(err)).await
    }

    /// SIGKILLs the primary's every process and promotes the standby (`failover_postgres`),
    /// after freezing the primary's WAL sender for `lag` (none for zero), so the standby lags.
    /// Returns what the failover lost, in the cell's `database`: how far the standby's WAL was
    /// behind what the primary had flushed just before the kill, and the pushes and cursor
    /// advances the primary had and the standby did not.
    pub async fn failover(&self, lag: Duration, database: Option<&str>) -> Result<String, String> {
        let standby = self
            .standby()
            .ok_or("no standby to promote: an earlier failover in this cell round used it up")?;
        let primary = self.primary();
        if !lag.is_zero() {
            freeze_wal_sender(&primary, lag).await?;
        }
        let before = LogState::read(&primary, database).await;
        let killed = primary.clone();
        blocking(move || killed.kill_processes().map_err(err)).await?;
        let after = LogState::read(&standby, database).await;
        let promoting = standby.clone();
        blocking(move || promoting.promote().map_err(err)).await?;
        self.primary.fetch_xor(1, Ordering::SeqCst);
        self.standby_lost.store(true, Ordering::SeqCst);
        Ok(self.failover_note(&before, &after))
    }

    fn failover_note(
        &self,
        before: &Result<LogState, String>,
        after: &Result<LogState, String>,
    ) -> String {
        let mode = self.replication.name();
        let (b, a) = match (before, after) {
            (Ok(b), Ok(a)) => (b, a),
            (Err(e), _) | (_, Err(e)) => {
                return format!("{mode} replication: what the standby was missing is unknown ({e})")
            }
        };
        let bytes = b.wal_bytes_past(a);
        // Commits between the primary's reading and the kill may reach the standby (it then
        // holds more than was read) or not (uncounted): hence "at least", never below zero.
        let (pushed, advanced) = (
            (b.pushed - a.pushed).max(0),
            (b.consumed - a.consumed).max(0),
        );
        if bytes == 0 && pushed == 0 && advanced == 0 {
            return format!(
                "{mode} replication: the promoted standby had everything the primary had flushed"
            );
        }
        let whose = match self.replication {
            Replication::Sync => {
                "commits the primary had not acknowledged yet (it waits for the standby)"
            }
            _ => "acknowledged or not, they are gone",
        };
        format!(
            "{mode} replication: the promoted standby lacked at least {bytes} bytes of the primary's flushed WAL, \
             {pushed} pushed messages and {advanced} messages' cursor advances (acks): {whose}"
        )
    }

    /// Before a cell round: gives the pair its standby back when a failover used it up (the
    /// crashed former primary seeded again from the new one, synchronous again for `sync`).
    pub async fn restore_standby(&self) -> Result<(), String> {
        if !self.standby_lost.load(Ordering::SeqCst) {
            return Ok(());
        }
        let primary = self.primary();
        let old = self.nodes[1 - self.primary.load(Ordering::SeqCst)].clone();
        let sync = self.replication == Replication::Sync;
        blocking(move || {
            old.seed_as_standby_of(&primary).map_err(err)?;
            primary.require_sync_standby(sync).map_err(err)
        })
        .await?;
        self.standby_lost.store(false, Ordering::SeqCst);
        Ok(())
    }
}

/// The builder of every server: `max_connections` raised for the brokers' pools.
fn builder() -> throwaway_pg::ClusterBuilder {
    Cluster::builder().setting("max_connections", "300")
}

fn node_addresses(nodes: &[Arc<Cluster>]) -> Vec<SocketAddr> {
    nodes
        .iter()
        .map(|c| SocketAddr::from(([127, 0, 0, 1], c.port())))
        .collect()
}

/// `postgres://postgres@h1:p1,h2:p2/name?target_session_attrs=read-write[&application_name=..]`
/// (one host: no session attribute needed).
fn multi_host_url(hosts: &[SocketAddr], name: &str, application: Option<&str>) -> String {
    let list: Vec<String> = hosts.iter().map(SocketAddr::to_string).collect();
    let mut params = Vec::new();
    if hosts.len() > 1 {
        params.push("target_session_attrs=read-write".to_string());
    }
    if let Some(app) = application {
        params.push(format!("application_name={app}"));
    }
    let query = match params.is_empty() {
        true => String::new(),
        false => format!("?{}", params.join("&")),
    };
    format!("postgres://postgres@{}/{name}{query}", list.join(","))
}

/// On a standby, waits (up to 10 s) until it has replayed all the WAL it received, so what it
/// reads is what a promotion would start from; a primary returns at once.
async fn wait_for_replay(client: &tokio_postgres::Client) -> Result<(), String> {
    let caught_up = "SELECT NOT pg_is_in_recovery() \
                     OR pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn()";
    for _ in 0..1000 {
        if client
            .query_one(caught_up, &[])
            .await
            .map_err(pg)?
            .get::<_, bool>(0)
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err("the standby did not replay what it received within 10 s".into())
}

/// SIGSTOPs the primary's WAL sender and waits `lag` (it stays stopped: the kill that follows
/// ends it).
async fn freeze_wal_sender(primary: &Cluster, lag: Duration) -> Result<(), String> {
    let client = connect(&primary.url("postgres")).await?;
    let row = client
        .query_one(
            "SELECT pid FROM pg_stat_replication WHERE application_name = $1",
            &[&throwaway_pg::STANDBY_NAME],
        )
        .await
        .map_err(|e| format!("the WAL sender: {}", pg(e)))?;
    let pid: i32 = row.get(0);
    let status = tokio::process::Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .await
        .map_err(|e| format!("kill -STOP {pid}: {e}"))?;
    if !status.success() {
        return Err(format!("kill -STOP {pid} (the WAL sender): {status}"));
    }
    tokio::time::sleep(lag).await;
    Ok(())
}

/// What one server holds of the cell's queue log, compared across a failover.
struct LogState {
    /// The primary's flushed WAL, or the standby's replayed WAL, as a byte position.
    wal: i64,
    /// Messages pushed, over every partition (`last_offset + 1`).
    pushed: i64,
    /// Messages past the cursors, over every partition and group (`committed + 1`).
    consumed: i64,
}

impl LogState {
    /// Reads `server`'s WAL position (a standby's: what it received, once it has replayed it)
    /// and, in `database` when it has the log engine's tables, its pushed and consumed counts
    /// (zero otherwise).
    async fn read(server: &Cluster, database: Option<&str>) -> Result<LogState, String> {
        let client = connect(&server.url(database.unwrap_or("postgres"))).await?;
        wait_for_replay(&client).await?;
        let wal = "SELECT pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() \
                   THEN pg_last_wal_receive_lsn() ELSE pg_current_wal_flush_lsn() END, '0/0')::bigint";
        let wal: i64 = client.query_one(wal, &[]).await.map_err(pg)?.get(0);
        let counts =
            "SELECT (SELECT coalesce(sum(last_offset + 1), 0)::bigint FROM queen.log_partitions), \
                      (SELECT coalesce(sum(committed + 1), 0)::bigint FROM queen.log_consumers)";
        let (pushed, consumed) = match client.query_one(counts, &[]).await {
            Ok(row) => (row.get(0), row.get(1)),
            Err(_) => (0, 0),
        };
        Ok(LogState {
            wal,
            pushed,
            consumed,
        })
    }

    fn wal_bytes_past(&self, other: &LogState) -> i64 {
        (self.wal - other.wal).max(0)
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| e.to_string())?
}

fn err(e: throwaway_pg::Error) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_list_every_host_and_name_the_broker() {
        let hosts = [
            SocketAddr::from(([127, 0, 0, 1], 5001)),
            SocketAddr::from(([127, 0, 0, 1], 5002)),
        ];
        assert_eq!(
            multi_host_url(&hosts, "db", Some(BROKER_APPLICATION)),
            "postgres://postgres@127.0.0.1:5001,127.0.0.1:5002/db?target_session_attrs=read-write&application_name=ackbench-broker"
        );
        assert_eq!(
            multi_host_url(&hosts[..1], "db", None),
            "postgres://postgres@127.0.0.1:5001/db"
        );
        let parsed: tokio_postgres::Config = multi_host_url(&hosts, "db", None).parse().unwrap();
        assert_eq!(parsed.get_ports(), [5001, 5002]);
        assert_eq!(
            parsed.get_target_session_attrs(),
            tokio_postgres::config::TargetSessionAttrs::ReadWrite
        );
    }
}
