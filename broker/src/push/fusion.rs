//! Push fusion: the frames of concurrent pushes commit together, many partitions' segments in
//! one `log_push_multi_v2` transaction (one commit, one fsync).
//!
//! - Sharded by a hash of (tenant, queue, partition): every push to a partition lands in one
//!   shard, so per-partition order and "one flush in flight per partition" are intra-shard.
//! - Fire-on-idle per partition: a partition with frames and no flush in flight is ready; a
//!   dispatch takes every pending frame of up to `bundle_max` ready partitions as one segment
//!   each, in one call. Frames arriving during a flush wait for the partition's next one, so
//!   segment size is emergent. How many calls a shard has in flight is fixed
//!   (`QUEEN_PUSH_FUSION_MAX_INFLIGHT`) or, by default, decided at run time by the lanes'
//!   flush-concurrency controller (`lanes::control::Concurrency`): one call at first, one more
//!   only while a measured probe shows concurrent calls complete more frames. Where commits
//!   serialise (a 2-core host), pushes that arrive during a call then share the next one
//!   instead of each paying a commit. `hold` is only a backstop tick while work waits (a
//!   liveness bound, not a latency floor).
//! - The procedure answers per segment. A segment with duplicates was not written: its
//!   duplicate frames are settled (the stored original's id, read back in the flush, or the
//!   earlier equal frame of the segment, whatever becomes of it) and the rest go back to the
//!   front of the partition's queue for the next flush. The other segments committed.
//! - A job (one request's frames for one partition) is answered once all its frames are
//!   settled, i.e. after the commit of the segment that wrote them. Waiters hold no pooled
//!   connection: only a flush takes one, for the duration of its call.
//! - After a segment commits, the flush hands it to the sink (`push::written::on_pushed`)
//!   before any waiter is answered.
//! - A segment is packed sealed when a member job's queue is encrypted (`PushJob::sealed`). A
//!   segment the procedure refused for its queue's maxSize was not written: its jobs are
//!   answered `FrameFate::Full` (the route sends limited queues through `log_push_v2`, so this
//!   only happens when its hint of a queue's options was stale).
//!
//! PostgreSQL stays the authority: provisioning, the dedup verdicts and the offsets all come
//! from the procedure under the partition row locks; several brokers may share a database.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::{Object, Pool};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;
use xxhash_rust::xxh3::xxh3_64;

use crate::crypto::Sealer;
use crate::fasthash::FastMap;
use crate::lanes::control::{Concurrency, ConcurrencyMode, Meter};
use crate::push::written::WrittenSegment;
use crate::segment::{self, FrameRef};
use crate::storage::procs;

/// One message to push: its frame and the 16-byte hash of its transactionId.
pub struct PushFrame {
    pub message_id: Uuid,
    pub transaction_id: String,
    pub payload: Vec<u8>,
    pub hash: [u8; 16],
}

/// One request's frames for one partition.
pub struct PushJob {
    pub tenant: Uuid,
    pub queue: String,
    pub partition: String,
    /// The queue is encrypted: the frames' payloads are stored sealed.
    pub sealed: bool,
    pub frames: Vec<PushFrame>,
}

/// What became of one frame of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameFate {
    /// Committed at this offset.
    Written { offset: i64 },
    /// Not written: its queue would exceed its maxSize (the facts of the refusal).
    Full(ackbench_wire::QueueFull),
    /// A duplicate; the original's message id (`None` when its segment is gone).
    Duplicate { original: Option<Uuid> },
}

/// A job's answer: its frames' fates, in its frame order.
#[derive(Debug)]
pub struct JobDone {
    pub partition_id: Uuid,
    pub fates: Vec<FrameFate>,
}

/// `Err` when the flush that carried the job failed (nothing of the job was written).
pub type JobResult = Result<JobDone, String>;

/// Receives every committed segment, from the flush that committed it.
pub type Sink = Arc<dyn Fn(&WrittenSegment<'_>) + Send + Sync>;

/// The knobs of `QUEEN_PUSH_FUSION_*` / `QUEEN_PUSH_BUNDLE_MAX`.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub shards: usize,
    pub bundle_max: usize,
    /// Calls in flight per shard.
    pub concurrency: ConcurrencyMode,
    pub hold: Duration,
}

/// Counters of the fusion path.
#[derive(Default)]
pub struct PushFusionStats {
    pub jobs: AtomicU64,
    pub flushes: AtomicU64,
    pub segments: AtomicU64,
    pub frames_written: AtomicU64,
    pub resubmits: AtomicU64,
    pub flush_errors: AtomicU64,
    /// Calls allowed in flight now, summed over the shards.
    pub limit: AtomicU64,
}

impl PushFusionStats {
    /// The counters and the calls allowed in flight, in the Prometheus text exposition (written
    /// here, not through `metrics`, which renders this: no import circle).
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        for (name, help, value) in [
            (
                "queen_push_fusion_flushes_total",
                "Push fusion's calls of log_push_multi_v2.",
                &self.flushes,
            ),
            (
                "queen_push_fusion_segments_total",
                "Segments those calls carried (one per partition per call).",
                &self.segments,
            ),
        ] {
            let value = value.load(Relaxed);
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP queen_push_fusion_flush_limit Calls push fusion may have in flight now, over \
             its shards (adaptive unless QUEEN_PUSH_FUSION_MAX_INFLIGHT is set).\n\
             # TYPE queen_push_fusion_flush_limit gauge\nqueen_push_fusion_flush_limit {}",
            self.limit.load(Relaxed)
        );
    }
}

type Submitted = (PushJob, oneshot::Sender<JobResult>);

pub struct PushFusion {
    shards: Vec<mpsc::UnboundedSender<Submitted>>,
    pub stats: Arc<PushFusionStats>,
}

impl PushFusion {
    /// Starts the shard tasks (call inside the runtime).
    pub fn start(
        pool: Pool,
        settings: Settings,
        sink: Sink,
        sealer: Option<Arc<Sealer>>,
    ) -> PushFusion {
        let settings = Settings {
            shards: settings.shards.max(1),
            bundle_max: settings.bundle_max.max(1),
            concurrency: settings.concurrency,
            hold: settings.hold,
        };
        let stats = Arc::new(PushFusionStats::default());
        let shards = (0..settings.shards)
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                let (done_tx, done_rx) = mpsc::unbounded_channel();
                let shard = Shard {
                    pool: pool.clone(),
                    sealer: sealer.clone(),
                    sink: sink.clone(),
                    stats: stats.clone(),
                    settings,
                    jobs: FastMap::default(),
                    parts: FastMap::default(),
                    ready: VecDeque::new(),
                    inflight: 0,
                    control: Concurrency::new(settings.concurrency),
                    meter: Meter::new(Instant::now()),
                    next_job: 0,
                    done_tx,
                };
                stats.limit.fetch_add(shard.control.limit() as u64, Relaxed);
                tokio::spawn(shard.run(rx, done_rx));
                tx
            })
            .collect();
        PushFusion { shards, stats }
    }

    /// Enqueues a job at once; the returned future resolves after the commit of its frames.
    pub fn submit(&self, job: PushJob) -> impl Future<Output = JobResult> {
        let mut key = Vec::with_capacity(18 + job.queue.len() + job.partition.len());
        key.extend_from_slice(job.tenant.as_bytes());
        key.extend_from_slice(job.queue.as_bytes());
        key.push(0);
        key.extend_from_slice(job.partition.as_bytes());
        let shard = (xxh3_64(&key) % self.shards.len() as u64) as usize;
        let (tx, rx) = oneshot::channel();
        self.stats.jobs.fetch_add(1, Relaxed);
        let _ = self.shards[shard].send((job, tx));
        async move {
            rx.await
                .unwrap_or_else(|_| Err("push fusion is shut down".into()))
        }
    }
}

/// (tenant, queue, partition).
type PartKey = (Uuid, String, String);
/// (job id, frame index within the job).
type FrameId = (u64, usize);

/// The state of one frame inside the shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Pending,
    Written(i64),
    Original(Option<Uuid>),
    /// A duplicate of an earlier frame of its segment: it shares that frame's outcome.
    SameAs(FrameId),
    /// Its earlier twin's job failed: the job cannot be answered truthfully.
    Lost,
}

struct Job {
    sealed: bool,
    frames: Vec<Arc<PushFrame>>,
    fates: Vec<Fate>,
    partition_id: Option<Uuid>,
    waiter: oneshot::Sender<JobResult>,
}

#[derive(Default)]
struct Part {
    /// Frames waiting for the partition's next flush, in offset order to be.
    pending: VecDeque<FrameId>,
    in_flight: bool,
    /// Queued in `Shard::ready`.
    ready: bool,
    /// Jobs of this partition not answered yet.
    open: Vec<u64>,
}

/// One segment of a flush.
struct SegmentIn {
    key: PartKey,
    /// Some member job's queue is encrypted: the segment is stored sealed.
    sealed: bool,
    members: Vec<FrameId>,
    frames: Vec<Arc<PushFrame>>,
}

enum Dup {
    /// The stored original's message id, when its segment still exists.
    Stored(Option<Uuid>),
    /// The index (in the segment) of an earlier equal frame.
    Earlier(usize),
}

enum SegmentOut {
    Written {
        partition_id: Uuid,
        base_offset: i64,
    },
    Duplicates {
        partition_id: Uuid,
        dups: Vec<(usize, Dup)>,
    },
    /// Not written: its queue would exceed its maxSize.
    Full {
        partition_id: Uuid,
        refusal: ackbench_wire::QueueFull,
    },
    Failed(String),
}

struct FlushDone {
    segments: Vec<SegmentIn>,
    result: Result<Vec<SegmentOut>, String>,
}

struct Shard {
    pool: Pool,
    sealer: Option<Arc<Sealer>>,
    sink: Sink,
    stats: Arc<PushFusionStats>,
    settings: Settings,
    jobs: FastMap<u64, Job>,
    parts: FastMap<PartKey, Part>,
    ready: VecDeque<PartKey>,
    inflight: usize,
    control: Concurrency,
    meter: Meter,
    next_job: u64,
    done_tx: mpsc::UnboundedSender<FlushDone>,
}

impl Shard {
    async fn run(
        mut self,
        mut inbox: mpsc::UnboundedReceiver<Submitted>,
        mut done: mpsc::UnboundedReceiver<FlushDone>,
    ) {
        let mut open = true;
        loop {
            if !open && self.inflight == 0 {
                return; // shut down; any job still here is answered by its dropped sender
            }
            let waiting = !self.ready.is_empty();
            tokio::select! {
                biased;
                d = done.recv() => {
                    if let Some(d) = d {
                        self.finish(d);
                    }
                }
                s = inbox.recv(), if open => match s {
                    Some(s) => self.accept(s),
                    None => open = false,
                },
                // The backstop tick, only while work waits for a free flush slot.
                _ = tokio::time::sleep(self.settings.hold), if waiting => {}
            }
            while let Ok(d) = done.try_recv() {
                self.finish(d);
            }
            while let Ok(s) = inbox.try_recv() {
                self.accept(s);
            }
            self.dispatch();
        }
    }

    fn accept(&mut self, (job, waiter): Submitted) {
        if job.frames.is_empty() {
            let _ = waiter.send(Ok(JobDone {
                partition_id: Uuid::nil(),
                fates: vec![],
            }));
            return;
        }
        let id = self.next_job;
        self.next_job += 1;
        let n = job.frames.len();
        let sealed = job.sealed;
        let key = (job.tenant, job.queue, job.partition);
        let part = self.parts.entry(key.clone()).or_default();
        part.pending.extend((0..n).map(|k| (id, k)));
        part.open.push(id);
        if !part.in_flight && !part.ready {
            part.ready = true;
            self.ready.push_back(key);
        }
        self.jobs.insert(
            id,
            Job {
                sealed,
                frames: job.frames.into_iter().map(Arc::new).collect(),
                fates: vec![Fate::Pending; n],
                partition_id: None,
                waiter,
            },
        );
    }

    /// Starts flushes while slots are free and partitions are ready.
    fn dispatch(&mut self) {
        self.account(Instant::now());
        while self.inflight < self.control.limit() && !self.ready.is_empty() {
            let mut bundle = Vec::new();
            while bundle.len() < self.settings.bundle_max {
                let Some(key) = self.ready.pop_front() else {
                    break;
                };
                let Some(part) = self.parts.get_mut(&key) else {
                    continue;
                };
                part.ready = false;
                if part.in_flight || part.pending.is_empty() {
                    continue;
                }
                let members: Vec<FrameId> = part
                    .pending
                    .drain(..)
                    .filter(|(j, _)| self.jobs.contains_key(j))
                    .collect();
                if members.is_empty() {
                    continue;
                }
                part.in_flight = true;
                let frames = members
                    .iter()
                    .map(|(j, k)| self.jobs[j].frames[*k].clone())
                    .collect();
                let sealed = members.iter().any(|(j, _)| self.jobs[j].sealed);
                bundle.push(SegmentIn {
                    key,
                    sealed,
                    members,
                    frames,
                });
            }
            if bundle.is_empty() {
                break;
            }
            self.inflight += 1;
            self.meter.inflight = self.inflight;
            let sealer = self.sealer.clone();
            let (pool, sink, stats, done) = (
                self.pool.clone(),
                self.sink.clone(),
                self.stats.clone(),
                self.done_tx.clone(),
            );
            tokio::spawn(async move {
                stats.flushes.fetch_add(1, Relaxed);
                stats.segments.fetch_add(bundle.len() as u64, Relaxed);
                let sealer = sealer.as_deref();
                let result = call_multi(&pool, &sink, &stats, &bundle, sealer).await;
                if let Err(e) = &result {
                    stats.flush_errors.fetch_add(1, Relaxed);
                    tracing::error!(target: "push-fusion", segments = bundle.len(), error = %e, "push flush failed; its requests get an error");
                }
                let _ = done.send(FlushDone {
                    segments: bundle,
                    result,
                });
            });
        }
    }

    /// Advances the epoch meter to `now` (work waited on the limit since the last event when a
    /// partition is ready and every slot is taken) and lets the controller judge an epoch
    /// that ended.
    fn account(&mut self, now: Instant) {
        let saturated = !self.ready.is_empty() && self.inflight >= self.control.limit();
        self.meter.advance(now, saturated);
        if let Some(epoch) = self.meter.end_epoch(now) {
            let before = self.control.limit() as u64;
            self.control.end_epoch(now, epoch);
            let after = self.control.limit() as u64;
            if after != before {
                self.stats
                    .limit
                    .fetch_add(after.wrapping_sub(before), Relaxed);
            }
        }
    }

    fn finish(&mut self, done: FlushDone) {
        self.account(Instant::now());
        self.inflight -= 1;
        self.meter.inflight = self.inflight;
        self.meter.items += done
            .segments
            .iter()
            .map(|s| s.frames.len() as u64)
            .sum::<u64>();
        let outs: Vec<SegmentOut> = match done.result {
            Ok(outs) => outs,
            Err(e) => done
                .segments
                .iter()
                .map(|_| SegmentOut::Failed(e.clone()))
                .collect(),
        };
        for (seg, out) in done.segments.into_iter().zip(outs) {
            self.settle(seg, out);
        }
    }

    /// Applies one segment's answer to its frames, then answers the jobs it completed.
    fn settle(&mut self, seg: SegmentIn, out: SegmentOut) {
        let SegmentIn { key, members, .. } = seg;
        let mut requeue = Vec::new();
        match out {
            SegmentOut::Written {
                partition_id,
                base_offset,
            } => {
                for (i, (j, k)) in members.iter().enumerate() {
                    if let Some(job) = self.jobs.get_mut(j) {
                        job.fates[*k] = Fate::Written(base_offset + i as i64);
                        job.partition_id = Some(partition_id);
                    }
                }
            }
            SegmentOut::Duplicates { partition_id, dups } => {
                self.stats.resubmits.fetch_add(1, Relaxed);
                let mut dropped = vec![false; members.len()];
                for (i, dup) in dups {
                    let Some(&(j, k)) = members.get(i) else {
                        continue;
                    };
                    dropped[i] = true;
                    let fate = match dup {
                        Dup::Stored(original) => Fate::Original(original),
                        Dup::Earlier(first) => members
                            .get(first)
                            .map_or(Fate::Lost, |&first| Fate::SameAs(first)),
                    };
                    if let Some(job) = self.jobs.get_mut(&j) {
                        job.fates[k] = fate;
                        job.partition_id = Some(partition_id);
                    }
                }
                requeue = members
                    .iter()
                    .zip(&dropped)
                    .filter(|(_, d)| !**d)
                    .map(|(m, _)| *m)
                    .collect();
            }
            SegmentOut::Full {
                partition_id,
                refusal,
            } => {
                for (j, _) in &members {
                    if let Some(job) = self.jobs.remove(j) {
                        let fates = vec![FrameFate::Full(refusal.clone()); job.fates.len()];
                        let _ = job.waiter.send(Ok(JobDone {
                            partition_id,
                            fates,
                        }));
                    }
                }
            }
            SegmentOut::Failed(e) => {
                for (j, _) in &members {
                    if let Some(job) = self.jobs.remove(j) {
                        let _ = job.waiter.send(Err(e.clone()));
                    }
                }
            }
        }
        let part = self.parts.entry(key.clone()).or_default();
        part.in_flight = false;
        // The survivors go back in front of what arrived meanwhile, in their order.
        for m in requeue.into_iter().rev() {
            part.pending.push_front(m);
        }
        if !part.pending.is_empty() && !part.ready {
            part.ready = true;
            self.ready.push_back(key.clone());
        }
        self.answer_settled(&key);
    }

    /// Resolves `SameAs` links and answers every job of the partition whose frames all settled.
    fn answer_settled(&mut self, key: &PartKey) {
        let Some(part) = self.parts.get_mut(key) else {
            return;
        };
        let open = std::mem::take(&mut part.open);
        loop {
            let mut changed = false;
            for id in &open {
                let Some(n) = self.jobs.get(id).map(|j| j.fates.len()) else {
                    continue;
                };
                for k in 0..n {
                    let Fate::SameAs((tj, tk)) = self.jobs[id].fates[k] else {
                        continue;
                    };
                    let next = match self.jobs.get(&tj) {
                        None => Some(Fate::Lost),
                        Some(t) => match t.fates[tk] {
                            Fate::Written(_) => Some(Fate::Original(Some(t.frames[tk].message_id))),
                            Fate::Original(x) => Some(Fate::Original(x)),
                            Fate::Lost => Some(Fate::Lost),
                            Fate::Pending | Fate::SameAs(_) => None,
                        },
                    };
                    if let Some(f) = next {
                        self.jobs.get_mut(id).expect("present").fates[k] = f;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let mut still_open = Vec::new();
        for id in open {
            let Some(job) = self.jobs.get(&id) else {
                continue;
            };
            if job.fates.contains(&Fate::Lost) {
                let job = self.jobs.remove(&id).expect("present");
                let _ = job.waiter.send(Err(
                    "the earlier copy of a duplicate in this flush was not written".into(),
                ));
            } else if job
                .fates
                .iter()
                .all(|f| matches!(f, Fate::Written(_) | Fate::Original(_)))
            {
                let job = self.jobs.remove(&id).expect("present");
                let fates = job
                    .fates
                    .iter()
                    .map(|f| match f {
                        Fate::Written(offset) => FrameFate::Written { offset: *offset },
                        Fate::Original(original) => FrameFate::Duplicate {
                            original: *original,
                        },
                        _ => unreachable!("checked above"),
                    })
                    .collect();
                let _ = job.waiter.send(Ok(JobDone {
                    partition_id: job.partition_id.unwrap_or_default(),
                    fates,
                }));
            } else {
                still_open.push(id);
            }
        }
        let jobs = &self.jobs;
        let part = self.parts.get_mut(key).expect("present");
        part.open = still_open;
        part.pending.retain(|(j, _)| jobs.contains_key(j));
        if part.open.is_empty() && part.pending.is_empty() && !part.in_flight && !part.ready {
            self.parts.remove(key);
        }
    }
}

/// One `log_push_multi_v2` call; answers realigned to the segments by input ordinal. A written
/// segment is handed to the sink as soon as the call returned (the commit).
async fn call_multi(
    pool: &Pool,
    sink: &Sink,
    stats: &PushFusionStats,
    segments: &[SegmentIn],
    sealer: Option<&Sealer>,
) -> Result<Vec<SegmentOut>, String> {
    let db = pool
        .get()
        .await
        .map_err(|e| format!("no database connection: {e}"))?;
    let refs: Vec<Vec<FrameRef<'_>>> = segments
        .iter()
        .map(|s| {
            s.frames
                .iter()
                .map(|f| FrameRef {
                    message_id: f.message_id,
                    transaction_id: &f.transaction_id,
                    payload: &f.payload,
                })
                .collect()
        })
        .collect();
    let tenants: Vec<Uuid> = segments.iter().map(|s| s.key.0).collect();
    let queues: Vec<&str> = segments.iter().map(|s| s.key.1.as_str()).collect();
    let partitions: Vec<&str> = segments.iter().map(|s| s.key.2.as_str()).collect();
    let hashes: Vec<Vec<u8>> = segments
        .iter()
        .map(|s| s.frames.iter().flat_map(|f| f.hash).collect())
        .collect();
    let blobs = segments
        .iter()
        .zip(&refs)
        .map(|(s, r)| seal_for(s, sealer).map(|sealer| segment::pack_with(r, sealer)))
        .collect::<Result<Vec<Vec<u8>>, String>>()?;
    let columns = procs::push::PushMulti {
        tenants: &tenants,
        queues: &queues,
        partitions: &partitions,
        hashes: &hashes,
        blobs: &blobs,
    };
    let rows = procs::push::push_multi(&db, &columns)
        .await
        .map_err(|e| e.to_string())?;
    let mut outs: Vec<Option<SegmentOut>> = segments.iter().map(|_| None).collect();
    for row in rows {
        let i = row.ordinal as usize - 1;
        let (Some(seg), Some(frames)) = (segments.get(i), refs.get(i)) else {
            return Err(format!("log_push_multi_v2 answered ordinal {}", i + 1));
        };
        let partition_id = row.partition_id;
        if row.written {
            let base_offset = row.base_offset.unwrap_or_default();
            let created_at = row.created_at;
            stats.frames_written.fetch_add(frames.len() as u64, Relaxed);
            sink(&WrittenSegment {
                tenant: seg.key.0,
                queue: &seg.key.1,
                partition: &seg.key.2,
                partition_id,
                base_offset,
                end_offset: base_offset + frames.len() as i64 - 1,
                created_at,
                frames,
            });
            outs[i] = Some(SegmentOut::Written {
                partition_id,
                base_offset,
            });
            continue;
        }
        if let Some(full) = row.full_refusal {
            let refusal = serde_json::from_value(full).map_err(|e| {
                format!("log_push_multi_v2 answered a maxSize refusal of another shape: {e}")
            })?;
            outs[i] = Some(SegmentOut::Full {
                partition_id,
                refusal,
            });
            continue;
        }
        let found = &row.duplicates;
        let mut dups = Vec::with_capacity(found.index.len());
        let mut failed = None;
        for ((k, off), first) in found.index.iter().zip(&found.offset).zip(&found.first) {
            let dup = if *off >= 0 {
                match message_id_at(&db, partition_id, *off).await {
                    Ok(original) => Dup::Stored(original),
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            } else {
                Dup::Earlier(*first as usize)
            };
            dups.push((*k as usize, dup));
        }
        outs[i] = Some(match failed {
            // The segment was not written; only its own jobs fail.
            Some(e) => SegmentOut::Failed(e),
            None => SegmentOut::Duplicates { partition_id, dups },
        });
    }
    Ok(outs
        .into_iter()
        .map(|o| o.unwrap_or_else(|| SegmentOut::Failed("no answer for this segment".into())))
        .collect())
}

/// The sealer a segment is packed with: `None` for a queue that is not encrypted; an error for
/// an encrypted queue when the broker has no key (its payloads are never stored in clear).
fn seal_for<'a>(seg: &SegmentIn, sealer: Option<&'a Sealer>) -> Result<Option<&'a Sealer>, String> {
    match (seg.sealed, sealer) {
        (false, _) => Ok(None),
        (true, Some(s)) => Ok(Some(s)),
        (true, None) => Err(format!(
            "queue `{}` is encrypted and this broker has no QUEEN_ENCRYPTION_KEY",
            seg.key.1
        )),
    }
}

/// The message id stored at (partition, offset); `None` when retention removed its segment.
pub async fn message_id_at(
    db: &Object,
    partition_id: Uuid,
    offset: i64,
) -> Result<Option<Uuid>, String> {
    let frame = procs::push::frame_at(db, partition_id, offset)
        .await
        .map_err(|e| e.to_string())?;
    Ok(frame.map(|f| f.message_id))
}
