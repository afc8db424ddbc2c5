//! The sections of a scenario file as serde reads them, with their defaults. Every section
//! refuses unknown keys; values are range-checked afterwards by `validate`.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::figure::{Direction, Figure};
use crate::driver::peer::{Peer, PeerId};

/// One setting of the accelerators (each cell runs against a broker started with its toggles),
/// or a peer queue driven over SQL on the same PostgreSQL (`pgmq`, `pgq`: every peer of the
/// registry `driver::peer::PEERS` is a cell of its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cell {
    /// Ack registry and ack fusion both on.
    RegistryFusion,
    /// Ack registry on, fusion off.
    Registry,
    /// Ack fusion on, registry off.
    Fusion,
    /// Both off: the plain hash path, one commit per ack.
    None,
    /// A peer, by its place in the registry.
    Peer(PeerId),
    /// A running broker added with `--external`, by its place among them (named in output by
    /// its `--external` name; never in a scenario file).
    External(u8),
}

impl Cell {
    /// Every broker cell, in the default run order.
    pub const ALL: [Cell; 4] = [
        Cell::RegistryFusion,
        Cell::Registry,
        Cell::Fusion,
        Cell::None,
    ];

    /// The peer cells, in the registry's order.
    pub fn peers() -> impl Iterator<Item = Cell> {
        PeerId::all().map(Cell::Peer)
    }

    /// The cell's name in scenario files, flags and results.
    pub fn name(self) -> &'static str {
        match self {
            Cell::RegistryFusion => "registry+fusion",
            Cell::Registry => "registry",
            Cell::Fusion => "fusion",
            Cell::None => "none",
            Cell::Peer(id) => id.peer().name(),
            Cell::External(_) => "external",
        }
    }

    /// The peer this cell runs, if it is a peer cell.
    pub fn peer(self) -> Option<&'static dyn Peer> {
        match self {
            Cell::Peer(id) => Some(id.peer()),
            _ => None,
        }
    }

    /// The `--external` this cell runs, by its place among them, if it is an external cell.
    pub fn external(self) -> Option<usize> {
        match self {
            Cell::External(i) => Some(i as usize),
            _ => None,
        }
    }

    /// Whether the ack registry is on in this cell.
    pub fn registry(self) -> bool {
        matches!(self, Cell::RegistryFusion | Cell::Registry)
    }

    /// Whether ack fusion is on in this cell.
    pub fn fusion(self) -> bool {
        matches!(self, Cell::RegistryFusion | Cell::Fusion)
    }

    /// The broker environment that selects this cell (`QUEEN_ACK_REGISTRY`, `QUEEN_ACK_FUSION`).
    pub fn broker_env(self) -> [(&'static str, &'static str); 2] {
        let flag = |on: bool| if on { "1" } else { "0" };
        [
            ("QUEEN_ACK_REGISTRY", flag(self.registry())),
            ("QUEEN_ACK_FUSION", flag(self.fusion())),
        ]
    }

    /// Every cell, broker cells first.
    fn every() -> impl Iterator<Item = Cell> {
        Cell::ALL.into_iter().chain(Cell::peers())
    }

    /// Every cell's name, in order (what serde lists when a name is unknown).
    fn names() -> &'static [&'static str] {
        static NAMES: std::sync::LazyLock<Vec<&'static str>> =
            std::sync::LazyLock::new(|| Cell::every().map(Cell::name).collect());
        &NAMES
    }

    /// The accepted names, for error messages.
    pub fn accepted_names() -> String {
        let names: Vec<String> = Cell::names().iter().map(|n| format!("`{n}`")).collect();
        names.join(", ")
    }
}

impl FromStr for Cell {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Cell::every().find(|c| c.name() == text).ok_or_else(|| {
            format!(
                "unknown cell `{text}` (expected one of: {})",
                Cell::accepted_names()
            )
        })
    }
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Cell {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A cell is written by its name, read as serde reads a unit variant of an enum whose variants
/// are every cell's name (an unknown name is refused listing them all).
impl<'de> Deserialize<'de> for Cell {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Cell, D::Error> {
        d.deserialize_enum("Cell", Cell::names(), CellVisitor)
    }
}

struct CellVisitor;

impl<'de> Visitor<'de> for CellVisitor {
    type Value = Cell;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("enum Cell")
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Cell, A::Error> {
        let (CellName(cell), variant) = data.variant()?;
        de::VariantAccess::unit_variant(variant)?;
        Ok(cell)
    }
}

/// A cell's name as an enum's variant identifier.
struct CellName(Cell);

impl<'de> Deserialize<'de> for CellName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CellName, D::Error> {
        d.deserialize_identifier(CellNameVisitor)
    }
}

struct CellNameVisitor;

impl Visitor<'_> for CellNameVisitor {
    type Value = CellName;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("variant identifier")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<CellName, E> {
        Cell::every()
            .find(|c| c.name() == text)
            .map(CellName)
            .ok_or_else(|| E::unknown_variant(text, Cell::names()))
    }
}

/// `[queue]`: the queue under test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Queue {
    /// Queue name (default `ackbench`).
    pub name: String,
    /// Number of partitions, named `p-0` .. `p-{n-1}` (default 1).
    pub partitions: u32,
    /// `[queue.options]`, sent with `POST /api/v1/configure`.
    pub options: QueueOptions,
}

impl Default for Queue {
    fn default() -> Self {
        Self {
            name: "ackbench".into(),
            partitions: 1,
            options: QueueOptions::default(),
        }
    }
}

/// `[queue.options]`: the queue options of `wire.md`, snake_case; defaults are the wire's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueOptions {
    /// `leaseTime`, seconds (default 300).
    pub lease_time: u32,
    /// `retryLimit` (default 3).
    pub retry_limit: u32,
    /// `deadLetterQueue` (default true).
    pub dead_letter_queue: bool,
    /// `dlqAfterMaxRetries` (default true).
    pub dlq_after_max_retries: bool,
    /// `dedupWindowSeconds`, 0 = no deduplication (default 3600).
    pub dedup_window_seconds: u32,
    /// `completedRetentionSeconds`, 0 = kept (default 0).
    pub completed_retention_seconds: u32,
    /// `retentionSeconds`, 0 = kept (default 0).
    pub retention_seconds: u32,
    /// `delayedProcessing`, seconds before a pushed message may be delivered (default 0).
    pub delayed_processing: u32,
    /// `windowBuffer`, seconds a partition is held back after its newest push (default 0).
    pub window_buffer: u32,
    /// `maxSize`, most unconsumed messages the queue may hold, 0 = no limit (default 0).
    pub max_size: u64,
    /// `priority`, preferred by discovery pops (default 0).
    pub priority: i32,
    /// `encryptionEnabled`: payloads stored AES-256-GCM encrypted (default false). The broker
    /// needs `QUEEN_ENCRYPTION_KEY`; the load generator sets one for the brokers it starts.
    pub encryption_enabled: bool,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            lease_time: 300,
            retry_limit: 3,
            dead_letter_queue: true,
            dlq_after_max_retries: true,
            dedup_window_seconds: 3600,
            completed_retention_seconds: 0,
            retention_seconds: 0,
            delayed_processing: 0,
            window_buffer: 0,
            max_size: 0,
            priority: 0,
            encryption_enabled: false,
        }
    }
}

impl QueueOptions {
    /// Whether failed heads go to the DLQ (either DLQ flag on, as `wire.md` says).
    pub fn dlq_enabled(&self) -> bool {
        self.dead_letter_queue || self.dlq_after_max_retries
    }

    /// The options as the wire type (camelCase on the wire). Ranges were checked at parse time.
    pub fn to_wire(&self) -> ackbench_wire::QueueOptions {
        let int = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        ackbench_wire::QueueOptions {
            lease_time: int(self.lease_time),
            retry_limit: int(self.retry_limit),
            dead_letter_queue: self.dead_letter_queue,
            dlq_after_max_retries: self.dlq_after_max_retries,
            dedup_window_seconds: int(self.dedup_window_seconds),
            completed_retention_seconds: int(self.completed_retention_seconds),
            retention_seconds: int(self.retention_seconds),
            delayed_processing: int(self.delayed_processing),
            window_buffer: int(self.window_buffer),
            max_size: i64::try_from(self.max_size).unwrap_or(i64::MAX),
            priority: self.priority,
            encryption_enabled: self.encryption_enabled,
            retention_enabled: false,
            ttl: 3600,
            retry_delay: 1000,
            max_wait_time_seconds: 0,
        }
    }
}

/// `[prefill]`: a backlog pushed into every partition before the cell starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Prefill {
    /// Messages per partition, 0 = no prefill (default 0).
    pub messages_per_partition: u64,
    /// Messages per push request (default 1000).
    pub batch: u32,
    /// Payload size in bytes (default 256).
    pub payload_bytes: u32,
    /// Push requests in flight at once while prefilling (default 4).
    pub concurrency: u32,
}

impl Default for Prefill {
    fn default() -> Self {
        Self {
            messages_per_partition: 0,
            batch: 1000,
            payload_bytes: 256,
            concurrency: 4,
        }
    }
}

/// Open loop (a fixed offered rate) or closed loop (send again when answered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopMode {
    /// Push at `rate` messages/s in total, whatever the answers take; latency counts from the
    /// intended send time.
    Open,
    /// Each producer pushes its next batch as soon as the previous one is answered.
    Closed,
}

/// How a producer picks the partition of each push.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Partitioning {
    /// Partitions in turn, in one rotation the producers share: push `seq` of producer `i` of
    /// `n` goes to partition `(seq × n + i) mod partitions`.
    RoundRobin,
    /// A partition drawn uniformly (seeded) per push.
    Random,
}

/// `[producers]`: the push load during the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Producers {
    /// Concurrent producers; 0 = no pushes during the run (default 1).
    pub count: u32,
    /// Messages per push request, all to one partition (default 1).
    pub batch: u32,
    /// Payload size in bytes (default 256).
    pub payload_bytes: u32,
    /// `open` or `closed` (default `closed`).
    pub mode: LoopMode,
    /// Offered messages/s across all producers; required for `open`, refused for `closed`.
    pub rate: Option<f64>,
    /// `round_robin` or `random` (default `round_robin`).
    pub partitioning: Partitioning,
}

impl Default for Producers {
    fn default() -> Self {
        Self {
            count: 1,
            batch: 1,
            payload_bytes: 256,
            mode: LoopMode::Closed,
            rate: None,
            partitioning: Partitioning::RoundRobin,
        }
    }
}

impl Producers {
    /// The offered rate in messages/s for an open loop, `None` for a closed loop.
    pub fn open_rate(&self) -> Option<f64> {
        match self.mode {
            LoopMode::Open => self.rate,
            LoopMode::Closed => None,
        }
    }
}

/// Which pop route consumers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PopRoute {
    /// `GET /pop/queue/:queue`: any partition with messages and no live lease.
    Wildcard,
    /// `GET /pop/queue/:queue/partition/:p`: each consumer cycles over its share of partitions
    /// (every `count`-th from its own index; see `lifecycle::workers::partition_share`).
    Partition,
}

/// How a consumer answers a popped batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AckMode {
    /// One `POST /ack/batch` per pop, carrying every message of the batch.
    Batch,
    /// One `POST /ack` per message.
    PerMessage,
}

/// `[consumers.outcomes]`: the answer drawn (seeded) for each delivered message. Shares are
/// fractions summing to 1 or percentages summing to 100; after parsing they are fractions.
/// When `completed` is left out it takes what the others leave of 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Outcomes {
    /// Share answered `completed` (default: the rest, so 1 when nothing else is given).
    pub completed: f64,
    /// Share answered `failed` (spends the retry budget; default 0).
    pub failed: f64,
    /// Share answered `retry` (budget-free redelivery; default 0).
    pub retry: f64,
    /// Share answered `dlq` (straight to the dead-letter queue; default 0).
    pub dlq: f64,
}

impl Default for Outcomes {
    fn default() -> Self {
        Self {
            completed: 1.0,
            failed: 0.0,
            retry: 0.0,
            dlq: 0.0,
        }
    }
}

impl Outcomes {
    /// The four shares with their status names, in wire order.
    pub fn shares(&self) -> [(&'static str, f64); 4] {
        [
            ("completed", self.completed),
            ("failed", self.failed),
            ("retry", self.retry),
            ("dlq", self.dlq),
        ]
    }
}

/// `[consumers]`: how messages are popped and answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Consumers {
    /// Consumers per consumer group (in queue mode: in total) (default 1).
    pub count: u32,
    /// Consumer group name; absent = queue mode. With `groups` it is the prefix of the names.
    pub group: Option<String>,
    /// Number of consumer groups, named `{group}-0` .. (prefix `group` when `group` is absent);
    /// each group consumes every message. Absent = one group (or queue mode).
    pub groups: Option<u32>,
    /// `wildcard` or `partition` (default `wildcard`).
    pub pop_route: PopRoute,
    /// `batch` of the pop, most messages returned (default 200, the wire's).
    pub pop_batch: u32,
    /// `partitions` of a wildcard pop (default 1).
    pub partitions_per_pop: u32,
    /// `wait=true` on pops (default false).
    pub long_poll: bool,
    /// `timeout` of a long-poll in ms (default 5000; used only with `long_poll`).
    pub long_poll_timeout_ms: u64,
    /// `leaseSeconds` of each pop; absent = the queue's `lease_time`.
    pub lease_seconds: Option<u32>,
    /// Simulated work per popped batch before answering, in ms (default 0).
    pub processing_ms: u64,
    /// Pause after an empty pop without long-poll, in ms (default 10).
    pub empty_backoff_ms: u64,
    /// `batch` or `per_message` (default `batch`).
    pub ack_mode: AckMode,
    /// Share of ack requests sent without a `leaseId`, 0..1 (default 0).
    pub lease_less: f64,
    /// Share of popped batches held past their lease before being acked, 0..1 (default 0).
    /// The late ack is still sent and is expected to be refused.
    pub stall: f64,
    /// How long past the lease a stalled batch is held, in ms (default 1000).
    pub stall_extra_ms: u64,
    /// `[consumers.outcomes]`.
    pub outcomes: Outcomes,
}

impl Default for Consumers {
    fn default() -> Self {
        Self {
            count: 1,
            group: None,
            groups: None,
            pop_route: PopRoute::Wildcard,
            pop_batch: 200,
            partitions_per_pop: 1,
            long_poll: false,
            long_poll_timeout_ms: 5000,
            lease_seconds: None,
            processing_ms: 0,
            empty_backoff_ms: 10,
            ack_mode: AckMode::Batch,
            lease_less: 0.0,
            stall: 0.0,
            stall_extra_ms: 1000,
            outcomes: Outcomes::default(),
        }
    }
}

impl Consumers {
    /// The consumer groups, `None` standing for queue mode.
    pub fn group_names(&self) -> Vec<Option<String>> {
        match (self.groups, &self.group) {
            (None, group) => vec![group.clone()],
            (Some(n), group) => {
                let prefix = group.as_deref().unwrap_or("group");
                (0..n).map(|i| Some(format!("{prefix}-{i}"))).collect()
            }
        }
    }

    /// Consumers across every group.
    pub fn total(&self) -> u32 {
        self.count.saturating_mul(self.groups.unwrap_or(1))
    }
}

/// `[run]`: timing, cells and rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Run {
    /// Warm-up before the measured window, excluded from every figure (default 5).
    pub warmup_secs: f64,
    /// The measured window per cell and round (default 30).
    pub duration_secs: f64,
    /// Longest wait for a cell to drain before the audit (default 60).
    pub drain_timeout_secs: f64,
    /// Interleaved rounds of all cells (default 3).
    pub rounds: u32,
    /// Cells to run, in this order each round (default all four broker cells).
    pub cells: Vec<Cell>,
    /// Peer queues run beside the cells, after them in every round (`pgmq`, `pgq`; default
    /// none). Folded into `cells` once the scenario is validated.
    pub peers: Vec<Cell>,
    /// Seed of every random choice; absent = chosen at start and recorded.
    pub seed: Option<u64>,
    /// Most extra rounds of a gate's cells while its interval straddles its bound (what
    /// `--confirm N` sets; the flag wins). Default 0.
    pub confirm: u32,
}

impl Default for Run {
    fn default() -> Self {
        Self {
            warmup_secs: 5.0,
            duration_secs: 30.0,
            drain_timeout_secs: 60.0,
            rounds: 3,
            cells: Cell::ALL.to_vec(),
            peers: Vec::new(),
            seed: None,
            confirm: 0,
        }
    }
}

/// How the clients spread their requests over a cell's brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// Every request goes to the next broker in turn, whoever sends it (a plain load
    /// balancer): a pop and the ack of its batch usually land on different brokers.
    #[default]
    RoundRobin,
    /// Each worker keeps to one broker (session affinity): worker `i` talks to broker
    /// `i mod instances`.
    Sticky,
}

/// How many brokers a cell starts on its one database, and how clients reach them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Brokers per cell, each on its own port (default 1).
    #[serde(default = "one")]
    pub instances: u32,
    /// `round_robin` or `sticky` (default `round_robin`; meaningless with one broker).
    #[serde(default)]
    pub routing: Routing,
}

fn one() -> u32 {
    1
}

impl Default for Topology {
    fn default() -> Self {
        Self {
            instances: 1,
            routing: Routing::RoundRobin,
        }
    }
}

impl Topology {
    /// The short name a cell carries after `@` when a scenario runs several topologies:
    /// `1` (one broker), `3rr` (three, round robin), `3sticky`.
    pub fn label(&self) -> String {
        match (self.instances, self.routing) {
            (1, _) => "1".into(),
            (n, Routing::RoundRobin) => format!("{n}rr"),
            (n, Routing::Sticky) => format!("{n}sticky"),
        }
    }

    /// The routing in words, as results and reports name it (`round_robin`, `sticky`, or
    /// `single` for one broker).
    pub fn routing_name(&self) -> &'static str {
        match (self.instances, self.routing) {
            (1, _) => "single",
            (_, Routing::RoundRobin) => "round_robin",
            (_, Routing::Sticky) => "sticky",
        }
    }
}

/// `[broker]`: how the broker under test is started (ignored with `--broker-url`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Broker {
    /// `DB_POOL_SIZE`; absent = the broker's default.
    pub pool_size: Option<u32>,
    /// Brokers per cell on the cell's one database (default 1).
    pub instances: u32,
    /// How clients spread requests over them: `round_robin` or `sticky` (default
    /// `round_robin`).
    pub routing: Routing,
    /// Several topologies in one run: every cell runs once per topology, named
    /// `<cell>@<label>` (`registry+fusion@3rr`). Refused beside `instances` or `routing`.
    /// Default: none (the one topology of `instances` and `routing`).
    pub topologies: Vec<Topology>,
    /// `[broker.env]`: extra environment, e.g. `QUEEN_ACK_FUSION_SHARDS = 8`. Strings, integers,
    /// floats and booleans are accepted and passed as text.
    #[serde(deserialize_with = "env_map")]
    pub env: BTreeMap<String, String>,
}

impl Default for Broker {
    fn default() -> Self {
        Self {
            pool_size: None,
            instances: 1,
            routing: Routing::RoundRobin,
            topologies: Vec::new(),
            env: BTreeMap::new(),
        }
    }
}

impl Broker {
    /// The topologies every cell runs in, in order: `topologies`, or the one of `instances`
    /// and `routing`.
    pub fn topologies(&self) -> Vec<Topology> {
        match self.topologies.is_empty() {
            true => vec![Topology {
                instances: self.instances,
                routing: self.routing,
            }],
            false => self.topologies.clone(),
        }
    }

    /// Whether cells carry their topology in their names (several topologies run).
    pub fn names_topologies(&self) -> bool {
        self.topologies().len() > 1
    }
}

/// Reads `[broker.env]`, turning scalar values into their text.
fn env_map<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let raw: BTreeMap<String, EnvValue> = BTreeMap::deserialize(d)?;
    Ok(raw.into_iter().map(|(k, v)| (k, v.0)).collect())
}

/// A `[broker.env]` value: any TOML scalar, kept as text.
struct EnvValue(String);

impl<'de> Deserialize<'de> for EnvValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(EnvVisitor)
    }
}

struct EnvVisitor;

impl Visitor<'_> for EnvVisitor {
    type Value = EnvValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, number or boolean")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<EnvValue, E> {
        Ok(EnvValue(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<EnvValue, E> {
        Ok(EnvValue(v.to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<EnvValue, E> {
        Ok(EnvValue(v.to_string()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<EnvValue, E> {
        Ok(EnvValue(v.to_string()))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<EnvValue, E> {
        Ok(EnvValue(if v { "1" } else { "0" }.to_string()))
    }
}

/// The kind of a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum GateKind {
    Ratio,
    Baseline,
}

/// One `[[gates]]` entry as written; `validate` turns it into a `Gate`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GateFile {
    pub name: Option<String>,
    pub kind: GateKind,
    pub figure: Figure,
    pub numerator: Option<Cell>,
    pub denominator: Option<Cell>,
    pub max: Option<f64>,
    pub min: Option<f64>,
    pub cell: Option<Cell>,
    pub tolerance: Option<f64>,
    pub direction: Option<Direction>,
}

/// `[capacity]`: what `ackbench capacity` judges this scenario by.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CapacitySetup {
    /// The latency target (ack and end-to-end p99, ms) a step must meet; `--slo-p99-ms`
    /// overrides it. Default: none (then 50 ms).
    pub slo_p99_ms: Option<f64>,
}

/// The whole file as serde reads it, before validation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScenarioFile {
    pub name: Option<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub queue: Queue,
    #[serde(default)]
    pub prefill: Prefill,
    #[serde(default)]
    pub producers: Producers,
    #[serde(default)]
    pub consumers: Consumers,
    #[serde(default)]
    pub run: Run,
    #[serde(default)]
    pub broker: Broker,
    #[serde(default)]
    pub postgres: super::fault::PostgresSetup,
    #[serde(default)]
    pub gates: Vec<GateFile>,
    #[serde(default)]
    pub faults: Vec<super::fault::FaultFile>,
    #[serde(default)]
    pub capacity: CapacitySetup,
    /// `[sweep]`: checked by `sweep::from_file`.
    #[serde(default)]
    pub sweep: Option<toml::Table>,
}
