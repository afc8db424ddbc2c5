//! The state every handler shares: configuration, the pool, counters, parked long-polls, and
//! the accelerators' engines (ack registry, ack fusion, push fusion).

use std::sync::{Arc, Weak};

use deadpool_postgres::{Object, Pool};
use uuid::Uuid;

use crate::ack::fusion::AckFusion;
use crate::ack::registry::AckRegistry;
use crate::config::Config;
use crate::crypto::Sealer;
use crate::demand::Demand;
use crate::lanes::{LaneSettings, Lanes};
use crate::longpoll::LongPoll;
use crate::metrics::Metrics;
use crate::pop::fusion::PopFusion;
use crate::pop::hotlist::Hotlist;
use crate::pop::stats::PopStats;
use crate::pop::PartitionIds;
use crate::push::fusion::{PushFusion, Settings as PushFusionSettings, Sink};
use crate::push::written::on_pushed;
use crate::queue_meta::QueueMetas;
use crate::segment_cache::SegmentCache;
use crate::storage::{DbError, Timeline};

pub struct App {
    pub config: Config,
    pub pool: Pool,
    pub metrics: Metrics,
    pub long_poll: LongPoll,
    /// Whether consumers wait for messages (written by the pop route, read by the lanes).
    pub demand: Arc<Demand>,
    pub default_tenant: Uuid,
    /// The ack registry, when `QUEEN_ACK_REGISTRY` is on.
    pub registry: Option<AckRegistry>,
    /// Ack fusion, when `QUEEN_ACK_FUSION` is on (it fuses registry hits).
    pub fusion: Option<AckFusion>,
    /// Candidate partitions per (queue, group), when `QUEEN_HOTLIST` is on.
    pub hotlist: Option<Hotlist>,
    /// Pop fusion, when `QUEEN_POP_FUSION` is on.
    pub pop_fusion: Option<PopFusion>,
    /// Decoded segments shared by push (write-through) and pop (`QUEEN_SEGMENT_CACHE_MB`).
    pub segments: SegmentCache,
    /// Named partitions' ids, resolved once.
    pub partition_ids: PartitionIds,
    pub pop_stats: PopStats,
    /// Push fusion, when `QUEEN_PUSH_FUSION` is on.
    pub push_fusion: Option<PushFusion>,
    /// Seals and opens the payloads of encrypted queues, when `QUEEN_ENCRYPTION_KEY` is set.
    pub sealer: Option<Arc<Sealer>>,
    /// Queues' push-relevant options (maxSize, encryption), held briefly.
    pub queue_metas: QueueMetas,
    /// The database history the pool's connections reach; a failover to another one drops
    /// the segment cache (`storage::timeline`).
    pub timeline: Arc<Timeline>,
}

impl App {
    /// Builds the shared state; starts the fusion engines' shard tasks (so call it inside the
    /// runtime). Push fusion reports committed segments to `on_pushed` through a weak handle
    /// on the state, so its tasks never keep the state alive.
    pub fn start(config: Config, pool: Pool, timeline: Arc<Timeline>) -> Arc<App> {
        Arc::new_cyclic(|me: &Weak<App>| {
            let mut app = App::new(config, pool, timeline);
            let forget = me.clone();
            app.timeline.on_change(move || {
                if let Some(app) = forget.upgrade() {
                    app.segments.clear();
                }
            });
            if app.config.push_fusion {
                let me = me.clone();
                let sink: Sink = Arc::new(move |segment| {
                    if let Some(app) = me.upgrade() {
                        on_pushed(&app, segment);
                    }
                });
                let settings = PushFusionSettings {
                    shards: app.config.push_fusion_shards,
                    bundle_max: app.config.push_bundle_max,
                    max_inflight: app.config.push_fusion_max_inflight,
                    hold: std::time::Duration::from_millis(app.config.push_fusion_hold_ms),
                };
                let (pool, sealer) = (app.pool.clone(), app.sealer.clone());
                app.push_fusion = Some(PushFusion::start(pool, settings, sink, sealer));
            }
            app
        })
    }

    /// The shared state without push fusion's engine (`start` adds it).
    fn new(config: Config, pool: Pool, timeline: Arc<Timeline>) -> App {
        let registry = config
            .ack_registry
            .then(|| AckRegistry::new(config.ack_registry_mb));
        let demand = Arc::new(Demand::default());
        let (fusion, pop_fusion) = fusions(&config, &pool, &demand);
        let hotlist = config
            .hotlist
            .then(|| Hotlist::new(std::time::Duration::from_millis(config.hotlist_reseed_ms)));
        App {
            registry,
            fusion,
            hotlist,
            pop_fusion,
            segments: SegmentCache::new(config.segment_cache_mb),
            partition_ids: PartitionIds::default(),
            pop_stats: PopStats::default(),
            push_fusion: None,
            sealer: config
                .encryption_key
                .as_ref()
                .map(|k| Arc::new(Sealer::new(k))),
            queue_metas: QueueMetas::default(),
            timeline,
            config,
            pool,
            metrics: Metrics::default(),
            long_poll: LongPoll::default(),
            demand,
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

/// Ack fusion and pop fusion, each on lanes of its own, or, both on with `QUEEN_FUSION_JOINT`,
/// sharing one set of lanes so acks and pops waiting together commit together (the lanes then
/// follow ack fusion's settings).
fn fusions(
    config: &Config,
    pool: &Pool,
    demand: &Arc<Demand>,
) -> (Option<AckFusion>, Option<PopFusion>) {
    let ack_concurrency = Config::lane_concurrency(config.ack_fusion_shards);
    let ack_linger = config.lane_linger(config.ack_fusion_hold_ms);
    if config.ack_fusion && config.pop_fusion && config.fusion_joint {
        let (ack_stats, pop_stats) = (Arc::default(), Arc::default());
        let settings = LaneSettings {
            concurrency: ack_concurrency,
            linger: ack_linger,
            max_ack_rows: config.ack_fusion_max_rows,
            demand: Arc::clone(demand),
            ack_stats: Arc::clone(&ack_stats),
            pop_stats: Arc::clone(&pop_stats),
        };
        let lanes = Lanes::start(pool.clone(), settings);
        return (
            Some(AckFusion::on(lanes.clone(), ack_stats).sharing_lanes_with_pops()),
            Some(PopFusion::on(lanes, pop_stats)),
        );
    }
    let fusion = config.ack_fusion.then(|| {
        AckFusion::start(
            pool.clone(),
            ack_concurrency,
            ack_linger,
            config.ack_fusion_max_rows,
            Arc::clone(demand),
        )
    });
    let pop_fusion = config.pop_fusion.then(|| {
        PopFusion::start(
            pool.clone(),
            Config::lane_concurrency(config.pop_fusion_shards),
            config.lane_linger(config.pop_fusion_hold_ms),
            Arc::clone(demand),
        )
    });
    (fusion, pop_fusion)
}
