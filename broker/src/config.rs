//! The broker's configuration, read from the environment (`wire.md`, "Configuration").
//!
//! Every variable is parsed strictly: a value that is present but not a number, or out of
//! range, stops the broker at start with a message naming the variable. A bad value is never
//! silently replaced by the default.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use crate::lanes::control::{ConcurrencyMode, Linger};

/// The most flushes adaptive lanes run at once (the seed's shard count, sized for Queen's
/// 32-vCPU hosts); they start at one and go up only on a measured gain.
pub const ADAPTIVE_MAX_FLUSHES: usize = 8;

/// Everything the broker reads at start.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub database: tokio_postgres::Config,
    pub pool_size: usize,
    /// `DB_POOL_TIMEOUT_MS`: the longest a request waits for a database connection (a free one,
    /// or a new one being opened) before it is answered 503 with `Retry-After`, so a database
    /// that stops answering (frozen, cut off) never holds requests that have not reached it.
    pub pool_timeout_ms: u64,
    /// `QUEEN_WORKER_THREADS`: the broker's runtime threads (1: a single-threaded runtime).
    pub worker_threads: usize,
    pub ack_registry: bool,
    pub ack_registry_mb: usize,
    pub ack_fusion: bool,
    /// `QUEEN_ACK_FUSION_SHARDS`: how many flushes the (ack or joint) lanes run at once; 0, the
    /// default, lets the lanes decide from what they measure (`lanes/control.rs`).
    pub ack_fusion_shards: usize,
    /// `QUEEN_ACK_FUSION_HOLD_MS`: the hold bound, the longest an adaptive linger holds a first
    /// arrival at an idle (ack or joint) lane.
    pub ack_fusion_hold_ms: u64,
    /// Rows one fusion flush may carry. Unbounded normally; `QUEEN_TEST_ACK_FUSION_MAX_ROWS=1`
    /// deliberately breaks fusion (one commit per ack) so tests can prove the gates catch it.
    pub ack_fusion_max_rows: usize,
    /// Test only, off by default: `QUEEN_TEST_REGISTRY_MISS=1` makes the ack registry miss
    /// every lookup (every ack takes the hash path, as with a registry that stopped working),
    /// so calibration can prove the registry's gates catch it.
    pub test_registry_miss: bool,
    /// Test only, 0 (off) by default: `QUEEN_TEST_ACK_EXTRA_COST_US` adds this many
    /// microseconds to every ack request before it is processed, a fixed extra cost on the ack
    /// path, so calibration can prove the latency gates catch it.
    pub test_ack_extra_cost_us: u64,
    /// Push fusion (`QUEEN_PUSH_FUSION`): concurrent pushes commit together through
    /// `log_push_multi_v2`; off, every request is one `log_push_v2` call.
    pub push_fusion: bool,
    pub push_fusion_shards: usize,
    /// Ready partitions one push flush may bundle into one call.
    pub push_bundle_max: usize,
    /// Push flushes in flight per shard (`QUEEN_PUSH_FUSION_MAX_INFLIGHT`); 0, the default:
    /// decided at run time, as the lanes' (`lane_concurrency`).
    pub push_fusion_max_inflight: usize,
    pub push_fusion_hold_ms: u64,
    pub tenancy_header: bool,
    pub retention_interval_ms: u64,
    pub txns_min_retention_seconds: u64,
    pub max_body_bytes: usize,
    /// `QUEEN_HEADER_READ_TIMEOUT_MS`: the longest a connection may take to send a request's
    /// head (request line and headers), counted from the end of the previous answer, so it also
    /// bounds how long a keep-alive connection may idle; the connection is then closed.
    pub header_read_timeout_ms: u64,
    /// `QUEEN_BODY_READ_TIMEOUT_MS`: the longest a request's body may go without a byte arriving;
    /// a stalled one is answered 408 and its connection closed.
    pub body_read_timeout_ms: u64,
    /// How often a parked long-poll re-checks the database without a wake-up (pushes through
    /// another broker, lease expiries). Not an environment variable: a fixed liveness bound.
    pub long_poll_recheck_ms: u64,
    /// `QUEEN_HOTLIST`: wildcard pops claim from broker-side candidate lists.
    pub hotlist: bool,
    /// `QUEEN_HOTLIST_RESEED_MS`: how often a candidate list is reseeded from PostgreSQL.
    pub hotlist_reseed_ms: u64,
    /// `QUEEN_POP_PENDING_GATE`: a long-poll with no candidate parks without database work.
    pub pop_pending_gate: bool,
    /// `QUEEN_PEER_NOTIFY`: brokers sharing the database tell each other, through PostgreSQL
    /// `LISTEN/NOTIFY`, what made a partition poppable (`peers`).
    pub peer_notify: bool,
    /// How long a push or release that woke a pop parked here waits for that pop's lease
    /// before the other brokers hear of it (`peers::outbox`). Not an environment variable: a
    /// pop's claim takes one flush, and tests lengthen it so that a slow machine cannot
    /// outlast it.
    pub peer_hold_ms: u64,
    /// `QUEEN_POP_FUSION`: concurrent pops claim in one transaction.
    pub pop_fusion: bool,
    /// `QUEEN_POP_FUSION_SHARDS`: as `ack_fusion_shards`, for pop lanes of their own (joint
    /// lanes follow `QUEEN_ACK_FUSION_SHARDS`); 0, the default, is adaptive.
    pub pop_fusion_shards: usize,
    /// `QUEEN_FUSION_JOINT`: with ack and pop fusion both on, the acks and pops waiting in a
    /// lane commit in one transaction (the lanes take ack fusion's shards and hold).
    pub fusion_joint: bool,
    /// `QUEEN_ACK_HANDOFF`: with joint lanes and the hotlist, a full-batch ack lists its
    /// partition as it enqueues (when more follows the span) and wakes a parked pop, whose
    /// claim then rides the ack's flush, after the ack, instead of waiting for its commit.
    pub ack_handoff: bool,
    /// `QUEEN_FUSION_LINGER_MS`: a fixed linger, how long an idle lane waits after a first
    /// arrival before it flushes. 0, the default: adaptive, growing with the arrival rate up to
    /// the hold bound (`lanes/control.rs`).
    pub fusion_linger_ms: u64,
    /// `QUEEN_FUSION_LINGER_MIN_RATE`: with a fixed linger, a lane lingers only while its
    /// smoothed arrival rate (acks and pops per second) is at least this (0: always).
    pub fusion_linger_min_rate: u64,
    pub pop_fusion_hold_ms: u64,
    /// `QUEEN_SEGMENT_CACHE_MB`: decoded segments held for pops (0 turns the cache off).
    pub segment_cache_mb: usize,
    /// `QUEEN_ENCRYPTION_KEY`: the AES-256-GCM key of queues with `encryptionEnabled` (64 hex
    /// characters). Without it such queues cannot be configured.
    pub encryption_key: Option<[u8; 32]>,
}

/// A configuration variable that could not be used, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub variable: String,
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "configuration variable {}: {}",
            self.variable, self.problem
        )
    }
}

impl std::error::Error for ConfigError {}

fn bad(variable: &str, problem: impl Into<String>) -> ConfigError {
    ConfigError {
        variable: variable.to_string(),
        problem: problem.into(),
    }
}

/// The default pool: enough connections to keep PostgreSQL's cores busy through commit waits,
/// without swamping a small machine.
pub fn default_pool_size() -> usize {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    (cores * 4).clamp(8, 64)
}

/// One per core (tokio's own default). Measured on 2 cores: a single-threaded runtime cut
/// cross-thread wake-ups but serialised the fusion flushes behind request handling, and the
/// pops-of-1 drain fell from ~3 300 to ~1 900 msg/s at more CPU per request.
pub fn default_worker_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `lookup` (the environment, or a test's map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let vars = Vars(&lookup);
        let listen = match vars.get("QUEEN_LISTEN") {
            Some(addr) => addr.parse().map_err(|_| {
                bad(
                    "QUEEN_LISTEN",
                    format!("`{addr}` is not an address like 0.0.0.0:6632"),
                )
            })?,
            None => SocketAddr::from(([0, 0, 0, 0], vars.number("PORT", 6632u16, 0, u16::MAX)?)),
        };
        Ok(Config {
            listen,
            database: database_config(&vars)?,
            pool_size: vars.number("DB_POOL_SIZE", default_pool_size(), 1, 1000)?,
            pool_timeout_ms: vars.number("DB_POOL_TIMEOUT_MS", 5_000u64, 1, 600_000)?,
            worker_threads: vars.number(
                "QUEEN_WORKER_THREADS",
                default_worker_threads(),
                1,
                1024,
            )?,
            ack_registry: vars.flag("QUEEN_ACK_REGISTRY", true)?,
            ack_registry_mb: vars.number("QUEEN_ACK_REGISTRY_MB", 64, 0, 1 << 20)?,
            ack_fusion: vars.flag("QUEEN_ACK_FUSION", true)?,
            ack_fusion_shards: vars.number("QUEEN_ACK_FUSION_SHARDS", 0, 0, 1024)?,
            ack_fusion_hold_ms: vars.number("QUEEN_ACK_FUSION_HOLD_MS", 5, 1, 60_000)?,
            ack_fusion_max_rows: vars.number(
                "QUEEN_TEST_ACK_FUSION_MAX_ROWS",
                usize::MAX,
                1,
                usize::MAX,
            )?,
            test_registry_miss: vars.flag("QUEEN_TEST_REGISTRY_MISS", false)?,
            test_ack_extra_cost_us: vars.number(
                "QUEEN_TEST_ACK_EXTRA_COST_US",
                0u64,
                0,
                10_000_000,
            )?,
            push_fusion: vars.flag("QUEEN_PUSH_FUSION", true)?,
            push_fusion_shards: vars.number("QUEEN_PUSH_FUSION_SHARDS", 1, 1, 1024)?,
            push_bundle_max: vars.number("QUEEN_PUSH_BUNDLE_MAX", 16, 1, 1024)?,
            push_fusion_max_inflight: vars.number("QUEEN_PUSH_FUSION_MAX_INFLIGHT", 0, 0, 1024)?,
            push_fusion_hold_ms: vars.number("QUEEN_PUSH_FUSION_HOLD_MS", 3, 1, 60_000)?,
            tenancy_header: vars.flag("QUEEN_TENANCY_HEADER", false)?,
            retention_interval_ms: vars.number(
                "QUEEN_RETENTION_INTERVAL_MS",
                5000,
                10,
                86_400_000,
            )?,
            txns_min_retention_seconds: vars.number(
                "QUEEN_TXNS_MIN_RETENTION_SECONDS",
                900,
                0,
                10 * 365 * 86_400,
            )?,
            max_body_bytes: vars.number("QUEEN_MAX_BODY_BYTES", 16 << 20, 1024, 1 << 30)?,
            header_read_timeout_ms: vars.number(
                "QUEEN_HEADER_READ_TIMEOUT_MS",
                30_000,
                10,
                3_600_000,
            )?,
            body_read_timeout_ms: vars.number(
                "QUEEN_BODY_READ_TIMEOUT_MS",
                30_000,
                10,
                3_600_000,
            )?,
            long_poll_recheck_ms: 500,
            hotlist: vars.flag("QUEEN_HOTLIST", true)?,
            hotlist_reseed_ms: vars.number("QUEEN_HOTLIST_RESEED_MS", 30_000, 100, 86_400_000)?,
            pop_pending_gate: vars.flag("QUEEN_POP_PENDING_GATE", true)?,
            peer_notify: vars.flag("QUEEN_PEER_NOTIFY", true)?,
            peer_hold_ms: 5,
            pop_fusion: vars.flag("QUEEN_POP_FUSION", true)?,
            pop_fusion_shards: vars.number("QUEEN_POP_FUSION_SHARDS", 0, 0, 1024)?,
            pop_fusion_hold_ms: vars.number("QUEEN_POP_FUSION_HOLD_MS", 3, 1, 60_000)?,
            fusion_joint: vars.flag("QUEEN_FUSION_JOINT", true)?,
            ack_handoff: vars.flag("QUEEN_ACK_HANDOFF", true)?,
            fusion_linger_ms: vars.number("QUEEN_FUSION_LINGER_MS", 0, 0, 1000)?,
            fusion_linger_min_rate: vars.number(
                "QUEEN_FUSION_LINGER_MIN_RATE",
                0,
                0,
                10_000_000,
            )?,
            segment_cache_mb: vars.number("QUEEN_SEGMENT_CACHE_MB", 256, 0, 1 << 20)?,
            encryption_key: encryption_key(&vars)?,
        })
    }

    /// The lanes' flush concurrency for a `*_SHARDS` value (0: adaptive).
    pub fn lane_concurrency(shards: usize) -> ConcurrencyMode {
        match shards {
            0 => ConcurrencyMode::Adaptive {
                max: ADAPTIVE_MAX_FLUSHES,
            },
            n => ConcurrencyMode::Fixed(n),
        }
    }

    /// The lanes' linger: fixed by `QUEEN_FUSION_LINGER_MS`, or adaptive up to `hold_ms`.
    pub fn lane_linger(&self, hold_ms: u64) -> Linger {
        match self.fusion_linger_ms {
            0 => Linger::Adaptive {
                hold: Duration::from_millis(hold_ms),
            },
            ms => Linger::Fixed {
                linger: Duration::from_millis(ms),
                min_rate: self.fusion_linger_min_rate,
            },
        }
    }

    /// A configuration for `database` with every other value at its default (tests, loadgen).
    pub fn for_database(database: tokio_postgres::Config) -> Config {
        let mut config = Config::from_lookup(|_| None).expect("the defaults are valid");
        config.database = database;
        config.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        config
    }
}

struct Vars<'a, F: Fn(&str) -> Option<String>>(&'a F);

impl<F: Fn(&str) -> Option<String>> Vars<'_, F> {
    fn get(&self, name: &str) -> Option<String> {
        (self.0)(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    fn number<T>(&self, name: &str, default: T, min: T, max: T) -> Result<T, ConfigError>
    where
        T: std::str::FromStr + PartialOrd + fmt::Display + Copy,
    {
        let Some(raw) = self.get(name) else {
            return Ok(default);
        };
        let value: T = raw
            .parse()
            .map_err(|_| bad(name, format!("`{raw}` is not a whole number")))?;
        if value < min || value > max {
            return Err(bad(name, format!("{value} is out of range {min}..={max}")));
        }
        Ok(value)
    }

    fn flag(&self, name: &str, default: bool) -> Result<bool, ConfigError> {
        match self.get(name).as_deref() {
            None => Ok(default),
            Some("1" | "true" | "on" | "yes") => Ok(true),
            Some("0" | "false" | "off" | "no") => Ok(false),
            Some(other) => Err(bad(name, format!("`{other}` is not 0 or 1"))),
        }
    }
}

/// `QUEEN_ENCRYPTION_KEY`, when set: exactly 64 hex characters, the 32 bytes of the key.
fn encryption_key<F: Fn(&str) -> Option<String>>(
    vars: &Vars<'_, F>,
) -> Result<Option<[u8; 32]>, ConfigError> {
    const NAME: &str = "QUEEN_ENCRYPTION_KEY";
    let Some(hex) = vars.get(NAME) else {
        return Ok(None);
    };
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad(
            NAME,
            format!(
                "must be 64 hex characters (a 32-byte AES-256 key), got {} characters",
                hex.len()
            ),
        ));
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("checked hex digits");
    }
    Ok(Some(key))
}

fn database_config<F: Fn(&str) -> Option<String>>(
    vars: &Vars<'_, F>,
) -> Result<tokio_postgres::Config, ConfigError> {
    if let Some(url) = vars.get("DATABASE_URL") {
        return url.parse().map_err(|e| {
            bad(
                "DATABASE_URL",
                format!("not a PostgreSQL connection string: {e}"),
            )
        });
    }
    let mut config = tokio_postgres::Config::new();
    config.host(vars.get("PG_HOST").unwrap_or_else(|| "localhost".into()));
    config.port(vars.number("PG_PORT", 5432u16, 1, u16::MAX)?);
    config.user(vars.get("PG_USER").unwrap_or_else(|| "postgres".into()));
    if let Some(password) = vars.get("PG_PASSWORD") {
        config.password(password);
    }
    config.dbname(vars.get("PG_DB").unwrap_or_else(|| "postgres".into()));
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn defaults_match_the_wire_table() {
        let c = with(&[]).unwrap();
        assert_eq!(c.listen.port(), 6632);
        assert!(c.ack_registry && c.ack_fusion && !c.tenancy_header);
        assert!(c.peer_notify, "peer notifications are on by default");
        assert_eq!(c.ack_registry_mb, 64);
        assert_eq!(
            (c.ack_fusion_shards, c.pop_fusion_shards),
            (0, 0),
            "adaptive"
        );
        assert_eq!(
            (c.fusion_linger_ms, c.fusion_linger_min_rate),
            (0, 0),
            "adaptive"
        );
        assert_eq!(c.ack_fusion_hold_ms, 5);
        assert_eq!(
            Config::lane_concurrency(c.ack_fusion_shards),
            ConcurrencyMode::Adaptive { max: 8 }
        );
        assert_eq!(
            c.lane_linger(c.ack_fusion_hold_ms),
            Linger::Adaptive {
                hold: Duration::from_millis(5)
            }
        );
        assert_eq!(c.retention_interval_ms, 5000);
        assert_eq!(c.txns_min_retention_seconds, 900);
        assert_eq!(c.max_body_bytes, 16 << 20);
        assert!(c.push_fusion);
        assert_eq!(
            (
                c.push_fusion_shards,
                c.push_bundle_max,
                c.push_fusion_max_inflight,
                c.push_fusion_hold_ms
            ),
            (1, 16, 0, 3)
        );
        assert_eq!(
            Config::lane_concurrency(c.push_fusion_max_inflight),
            ConcurrencyMode::Adaptive {
                max: ADAPTIVE_MAX_FLUSHES
            },
            "push fusion's calls in flight are decided at run time"
        );
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (name, value) in [
            ("PORT", "http"),
            ("DB_POOL_SIZE", "0"),
            ("QUEEN_ACK_REGISTRY", "maybe"),
            ("QUEEN_ACK_FUSION_SHARDS", "-2"),
            ("QUEEN_ACK_FUSION_SHARDS", "1025"),
            ("QUEEN_MAX_BODY_BYTES", "12x"),
            ("DATABASE_URL", "postgres://db.example:notaport/x"),
            ("PG_PORT", "70000"),
            ("QUEEN_LISTEN", "nowhere"),
            ("QUEEN_PUSH_FUSION", "2"),
            ("QUEEN_PEER_NOTIFY", "sometimes"),
            ("QUEEN_PUSH_FUSION_SHARDS", "0"),
            ("QUEEN_PUSH_BUNDLE_MAX", "many"),
            ("QUEEN_PUSH_FUSION_MAX_INFLIGHT", "-1"),
            ("QUEEN_PUSH_FUSION_HOLD_MS", "0"),
            ("QUEEN_FUSION_LINGER_MIN_RATE", "fast"),
            ("QUEEN_ENCRYPTION_KEY", "abc"),
            ("QUEEN_ENCRYPTION_KEY", &"g".repeat(64)),
        ] {
            let err = with(&[(name, value)]).unwrap_err();
            assert_eq!(err.variable, name, "{err}");
            assert!(err.to_string().contains(name));
        }
    }

    #[test]
    fn test_only_regressions_are_off_unless_set() {
        let c = with(&[]).unwrap();
        assert!(!c.test_registry_miss && c.test_ack_extra_cost_us == 0);
        assert_eq!(c.ack_fusion_max_rows, usize::MAX);
        let c = with(&[
            ("QUEEN_TEST_REGISTRY_MISS", "1"),
            ("QUEEN_TEST_ACK_EXTRA_COST_US", "2000"),
        ])
        .unwrap();
        assert!(c.test_registry_miss && c.test_ack_extra_cost_us == 2000);
        let e = with(&[("QUEEN_TEST_ACK_EXTRA_COST_US", "-1")]).unwrap_err();
        assert_eq!(e.variable, "QUEEN_TEST_ACK_EXTRA_COST_US");
    }

    #[test]
    fn an_encryption_key_is_read_as_32_bytes() {
        assert_eq!(with(&[]).unwrap().encryption_key, None);
        let hex = "00ff".repeat(16);
        let key = with(&[("QUEEN_ENCRYPTION_KEY", &hex)])
            .unwrap()
            .encryption_key
            .unwrap();
        assert_eq!((key[0], key[1], key[31]), (0x00, 0xff, 0xff));
    }

    #[test]
    fn toggles_and_listen_address() {
        let c = with(&[
            ("QUEEN_ACK_REGISTRY", "0"),
            ("QUEEN_ACK_FUSION", "0"),
            ("QUEEN_PUSH_FUSION", "off"),
            ("QUEEN_PEER_NOTIFY", "off"),
            ("QUEEN_LISTEN", "127.0.0.1:7000"),
        ])
        .unwrap();
        assert!(!c.ack_registry && !c.ack_fusion && !c.push_fusion && !c.peer_notify);
        assert!(!with(&[("QUEEN_PEER_NOTIFY", "0")]).unwrap().peer_notify);
        assert_eq!(c.listen, "127.0.0.1:7000".parse().unwrap());
    }
}
