//! What kind of broker a run drives and what that kind means: the target profile. Each kind
//! says where its Prometheus text lives, which `queen` procedures do its push, pop, ack and DLQ
//! work (what the PostgreSQL figures fold by), whether it has the accelerator toggles the cells
//! divide, and what its cell is called. A running broker's kind is detected from its `/health`
//! answer and the procedures in its `queen` schema, or named with `--target-kind`.

use std::fmt;
use std::str::FromStr;

use ackbench_reports::results::Promises;
use serde_json::Value;

use crate::client::BrokerClient;
use crate::target::postgres::pg;

/// A kind of broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// `ackbench-broker`, this workspace's broker (Queen's log engine contract, accelerators).
    Ackbench,
    /// Queen MQ's server on its log engine (`queen.log_*` procedures).
    QueenLog,
    /// Queen MQ's server on its older rows engine (`queen.messages`, `push_messages_v3`, ...).
    QueenRows,
}

/// The `queen` procedures (named without the schema) doing each kind of work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Procedures {
    pub push: &'static [&'static str],
    pub pop: &'static [&'static str],
    /// Every top-level call of these is one of the ack path's commits (DLQ hand-off included).
    pub ack: &'static [&'static str],
    /// Listing and handling the dead-letter queue outside the ack path.
    pub dlq: &'static [&'static str],
}

const LOG_ENGINE: Procedures = Procedures {
    // Queen's log engine's names first, then this broker's later versions (sql/procedures/).
    push: &[
        "log_push_v1",
        "log_push_multi_v1",
        "log_push_v2",
        "log_push_multi_v2",
    ],
    pop: &[
        "log_pop_v1",
        "log_pop_wildcard_v1",
        "log_pop_wildcard_v2",
        "log_pop_multi_v1",
        "log_pop_claim_v1",
        "log_pop_wildcard_v3",
        "log_pop_multi_v2",
        "log_pop_multi_v3",
    ],
    ack: &[
        "log_ack_by_hash_v1",
        "log_ack_at_v1",
        "log_ack_multi_v1",
        "log_ack_v1",
        "log_dlq_head_v1",
        "log_dlq_head_v3",
    ],
    dlq: &[
        "log_dlq_list_v1",
        "log_dlq_fetch_v1",
        "log_dlq_list_v2",
        "log_dlq_fetch_v2",
    ],
};

/// Queen's rows engine (read from `hot-path-statements.json` of the recorded fixtures): the
/// DLQ hand-off happens inside `ack_messages_v2`.
const ROWS_ENGINE: Procedures = Procedures {
    push: &["push_messages_v3"],
    pop: &["pop_unified_batch_v4"],
    ack: &["ack_messages_v2"],
    dlq: &["get_dlq_messages_v1"],
};

impl TargetKind {
    pub const ALL: [TargetKind; 3] = [
        TargetKind::Ackbench,
        TargetKind::QueenLog,
        TargetKind::QueenRows,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Ackbench => "ackbench",
            TargetKind::QueenLog => "queen-log",
            TargetKind::QueenRows => "queen-rows",
        }
    }

    pub fn procedures(self) -> Procedures {
        match self {
            TargetKind::Ackbench | TargetKind::QueenLog => LOG_ENGINE,
            TargetKind::QueenRows => ROWS_ENGINE,
        }
    }

    /// The route serving the Prometheus text (Queen's `/metrics` is JSON).
    pub fn prometheus_path(self) -> &'static str {
        match self {
            TargetKind::Ackbench => "/metrics",
            TargetKind::QueenLog | TargetKind::QueenRows => "/metrics/prometheus",
        }
    }

    /// The guarantees this kind of broker promises beyond at-least-once delivery (Queen's
    /// contract: partition leases with fencing, per-partition order, durable acks). The peers
    /// say their own (`driver::peer::Peer::promises`).
    pub fn promises(self) -> Promises {
        match self {
            TargetKind::Ackbench | TargetKind::QueenLog | TargetKind::QueenRows => Promises::ALL,
        }
    }

    /// Whether the broker has the ack registry and ack fusion toggles the accelerator cells
    /// divide (only this workspace's broker started per cell can switch them).
    pub fn has_accelerator_toggles(self) -> bool {
        self == TargetKind::Ackbench
    }
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TargetKind {
    type Err = String;

    fn from_str(s: &str) -> Result<TargetKind, String> {
        TargetKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!("`{s}` is not a target kind (one of ackbench, queen-log, queen-rows)")
            })
    }
}

/// A running broker's profile: its kind, the version it reports and how the kind was learnt.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub kind: TargetKind,
    /// The `version` of `/health` (`unknown` when it has none).
    pub version: String,
    /// How the kind was learnt, for the results' notes.
    pub detected: String,
}

impl Profile {
    /// The profile of the broker this run starts itself.
    pub fn own_broker() -> Profile {
        Profile {
            kind: TargetKind::Ackbench,
            version: env!("CARGO_PKG_VERSION").to_string(),
            detected: "the workspace's broker, started per cell".into(),
        }
    }

    /// The one cell of a run against an external broker, named after it: `queen-rows-1.0.0`.
    pub fn cell_name(&self) -> String {
        format!("{}-{}", self.kind.name(), self.version)
    }
}

/// What `/health` says about the broker: Queen's server names itself in `server`, ours does not.
#[derive(Debug, PartialEq)]
pub struct Health {
    pub queen: bool,
    pub version: String,
}

impl Health {
    pub fn read(body: &[u8]) -> Health {
        let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let server = v.get("server").and_then(Value::as_str).unwrap_or("");
        Health {
            queen: server.to_ascii_lowercase().contains("queen"),
            version: v
                .get("version")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_string(),
        }
    }
}

/// The engine a Queen database holds, from the procedures present in its `queen` schema;
/// `None` when it holds neither engine's push procedure.
pub fn engine_of(procedures: &[String]) -> Option<TargetKind> {
    let has = |p: &str| procedures.iter().any(|x| x == p);
    if has("log_push_v1") {
        Some(TargetKind::QueenLog)
    } else if has("push_messages_v3") {
        Some(TargetKind::QueenRows)
    } else {
        None
    }
}

/// Learns the profile of the broker at `client`: `named` when given (`--target-kind`), else
/// from `/health` and, for Queen, the procedures of `database` (the broker's own database).
pub async fn detect(
    client: &BrokerClient,
    database: Option<&tokio_postgres::Client>,
    named: Option<TargetKind>,
) -> Result<Profile, String> {
    let body = client
        .health_body()
        .await
        .map_err(|e| format!("--broker-url {}: {e}", client.base()))?;
    let health = Health::read(&body);
    if let Some(kind) = named {
        return Ok(Profile {
            kind,
            version: health.version,
            detected: format!("named with --target-kind {kind}"),
        });
    }
    if !health.queen {
        return Ok(Profile {
            kind: TargetKind::Ackbench,
            version: health.version,
            detected: "/health names no Queen server: ackbench-broker".into(),
        });
    }
    let Some(db) = database else {
        return Err(format!(
            "{} is a Queen server, but which engine it runs shows only in its database: give \
             --database-url (its own database) or --target-kind queen-rows|queen-log",
            client.base()
        ));
    };
    let procedures = queen_procedures(db).await?;
    let kind = engine_of(&procedures).ok_or_else(|| {
        format!(
            "{} is a Queen server, but the database of --database-url has neither \
             queen.push_messages_v3 (rows engine) nor queen.log_push_v1 (log engine): is it the \
             server's own database? ({} procedures in schema queen)",
            client.base(),
            procedures.len()
        )
    })?;
    Ok(Profile {
        kind,
        version: health.version,
        detected: format!(
            "/health names a Queen server; its database holds queen.{}",
            kind.procedures().push[0]
        ),
    })
}

/// The procedure names of the `queen` schema.
async fn queen_procedures(db: &tokio_postgres::Client) -> Result<Vec<String>, String> {
    let rows = db
        .query(
            "SELECT proname::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
             WHERE n.nspname = 'queen'",
            &[],
        )
        .await
        .map_err(pg)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_by_name_and_refuse_others() {
        for k in TargetKind::ALL {
            assert_eq!(k.name().parse::<TargetKind>(), Ok(k));
        }
        let e = "queen".parse::<TargetKind>().unwrap_err();
        assert!(e.contains("`queen` is not a target kind"), "{e}");
    }

    #[test]
    fn health_tells_queen_from_ours() {
        let queen = Health::read(br#"{"server":"C++ Queen Server (libqueen)","version":"1.0.0"}"#);
        assert_eq!(
            queen,
            Health {
                queen: true,
                version: "1.0.0".into()
            }
        );
        let ours = Health::read(br#"{"status":"healthy"}"#);
        assert_eq!(
            ours,
            Health {
                queen: false,
                version: "unknown".into()
            }
        );
    }

    #[test]
    fn the_engine_shows_in_the_procedures() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            engine_of(&names(&["ack_messages_v2", "push_messages_v3"])),
            Some(TargetKind::QueenRows)
        );
        assert_eq!(
            engine_of(&names(&["log_push_v1", "log_ack_v1"])),
            Some(TargetKind::QueenLog)
        );
        assert_eq!(engine_of(&names(&["configure_queue_v1"])), None);
    }

    #[test]
    fn each_kind_names_its_metrics_route_and_ack_procedures() {
        assert_eq!(TargetKind::Ackbench.prometheus_path(), "/metrics");
        assert_eq!(
            TargetKind::QueenRows.prometheus_path(),
            "/metrics/prometheus"
        );
        assert_eq!(TargetKind::QueenRows.procedures().ack, ["ack_messages_v2"]);
        assert!(TargetKind::QueenLog
            .procedures()
            .ack
            .contains(&"log_ack_by_hash_v1"));
        let p = Profile {
            kind: TargetKind::QueenRows,
            version: "1.0.0".into(),
            detected: String::new(),
        };
        assert_eq!(p.cell_name(), "queen-rows-1.0.0");
    }
}
