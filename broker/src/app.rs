//! The state every handler shares: configuration, the pool, counters, readiness (hotlist and
//! parked long-polls), and the accelerators' engines (ack registry, ack fusion, pop fusion, push
//! fusion). The pop domain and the push report are handed what they need from it
//! (`pop_context`, `ready`, `segments`) rather than `App`.

use std::sync::{Arc, Weak};

use deadpool_postgres::{Object, Pool};
use uuid::Uuid;

use crate::ack::fusion::AckFusion;
use crate::ack::registry::AckRegistry;
use crate::config::Config;
use crate::crypto::Sealer;
use crate::demand::Demand;
use crate::fusion;
use crate::metrics::Metrics;
use crate::peers::outbox::Outbox;
use crate::peers::stats::PeerStats;
use crate::pop::fusion::PopFusion;
use crate::pop::hotlist::{Hotlist, Release};
use crate::pop::stats::PopStats;
use crate::pop::{PartitionIds, PopContext};
use crate::push::fusion::{PushFusion, Settings as PushFusionSettings, Sink};
use crate::push::written::on_pushed;
use crate::queue_meta::QueueMetas;
use crate::readiness::Readiness;
use crate::segment_cache::SegmentCache;
use crate::storage::{DbError, Timeline};

pub struct App {
    pub config: Config,
    pub pool: Pool,
    pub metrics: Metrics,
    /// Whether consumers wait for messages (written by the pop route, read by the lanes).
    pub demand: Arc<Demand>,
    pub default_tenant: Uuid,
    /// The ack registry, when `QUEEN_ACK_REGISTRY` is on.
    pub registry: Option<AckRegistry>,
    /// Ack fusion, when `QUEEN_ACK_FUSION` is on (it fuses registry hits).
    pub fusion: Option<AckFusion>,
    /// The hotlist and the parked long-polls: what push, pop and ack notify.
    pub ready: Readiness,
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
    /// Builds the shared state; starts the fusion engines' tasks (the lanes, push fusion's
    /// shards), so call it inside the runtime. Push fusion reports committed segments to `on_pushed` through a weak handle
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
                        on_pushed(&app.ready, &app.segments, segment);
                    }
                });
                let settings = PushFusionSettings {
                    shards: app.config.push_fusion_shards,
                    bundle_max: app.config.push_bundle_max,
                    concurrency: crate::config::Config::lane_concurrency(
                        app.config.push_fusion_max_inflight,
                    ),
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
            .then(|| AckRegistry::new(config.ack_registry_mb))
            .map(|r| r.missing_every_lookup(config.test_registry_miss));
        let demand = Arc::new(Demand::default());
        let (fusion, pop_fusion) = fusion::start(&config, &pool, &demand);
        let peer_stats = Arc::new(PeerStats::default());
        let peers = config.peer_notify.then(|| {
            let hold = std::time::Duration::from_millis(config.peer_hold_ms);
            Arc::new(Outbox::new(peer_stats.clone(), hold))
        });
        let hotlist = config.hotlist.then(|| hotlist(&config, peers.as_ref()));
        App {
            registry,
            fusion,
            ready: Readiness::new(hotlist, peers, peer_stats),
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
            demand,
            default_tenant: Uuid::parse_str(ackbench_wire::DEFAULT_TENANT).expect("a valid UUID"),
        }
    }

    /// What the pop domain works with.
    pub fn pop_context(&self) -> PopContext<'_> {
        PopContext {
            pool: &self.pool,
            config: &self.config,
            ready: &self.ready,
            partition_ids: &self.partition_ids,
            pop_fusion: &self.pop_fusion,
            pop_stats: &self.pop_stats,
            segments: &self.segments,
            sealer: &self.sealer,
            timeline: &self.timeline,
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

/// The hotlist; with peer notifications, the lease expiries it observes are told to the other
/// brokers (the partition is poppable again for them too).
fn hotlist(config: &Config, peers: Option<&Arc<Outbox>>) -> Hotlist {
    let hot = Hotlist::new(std::time::Duration::from_millis(config.hotlist_reseed_ms));
    let Some(outbox) = peers.cloned() else {
        return hot;
    };
    hot.reporting_expiries(Box::new(move |pid, group| {
        // An expiry redelivers the span; nothing else of it is known.
        outbox.publish(Release::default().event(pid, group));
    }))
}
