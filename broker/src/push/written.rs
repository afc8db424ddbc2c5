//! What the push path reports after a segment commits: `on_pushed`, called once per written
//! segment (fused or not), from the code that saw the commit.
//!
//! It lists the partition in the pop hotlist, keeps the segment decoded in the segment cache
//! (write-through: a pop of these frames then needs no blob from PostgreSQL), and only then
//! wakes the long-polls parked on the queue, so a woken pop finds the partition listed; last,
//! it tells the other brokers (`peers`), whose own hotlists and long-polls take it the same way.
//! Everything a consumer may need is in `WrittenSegment`, borrowed for the duration of the call
//! (copy what you keep).

use std::sync::Arc;
use std::time::SystemTime;

use uuid::Uuid;

use crate::peers::message::Event;
use crate::readiness::Readiness;
use crate::segment::FrameRef;
use crate::segment_cache::{DecodedSegment, SegmentCache};

/// One committed segment of one partition.
pub struct WrittenSegment<'a> {
    pub tenant: Uuid,
    pub queue: &'a str,
    pub partition: &'a str,
    pub partition_id: Uuid,
    /// First and last (inclusive) offsets of the segment.
    pub base_offset: i64,
    pub end_offset: i64,
    /// The segment row's `created_at`, when the procedure returned it (the fused path does;
    /// `log_push_v2` does not).
    pub created_at: Option<SystemTime>,
    /// The frames in offset order: frame k is at `base_offset + k`.
    pub frames: &'a [FrameRef<'a>],
}

/// Called after `segment` committed (the caller has not answered its client yet).
pub fn on_pushed(ready: &Readiness, segments: &SegmentCache, segment: &WrittenSegment<'_>) {
    ready.list_pushed(
        segment.tenant,
        segment.queue,
        segment.partition_id,
        segment.end_offset,
    );
    if segments.enabled() {
        // The row's own created_at when the procedure returned it; the commit's moment else.
        let created = segment.created_at.unwrap_or_else(SystemTime::now);
        let raw = crate::segment::pack_raw(segment.frames);
        match DecodedSegment::from_raw(segment.base_offset, created, raw) {
            Ok(decoded) => segments.insert(segment.partition_id, Arc::new(decoded)),
            Err(e) => {
                tracing::error!(partition_id = %segment.partition_id, error = %e, "a pushed segment cannot be indexed; pops will read it from PostgreSQL")
            }
        }
    }
    let woken = ready.long_poll.pushed(
        segment.tenant,
        segment.queue,
        Some(segment.partition),
        segment.frames.len(),
    );
    let event = Event::Pushed {
        tenant: segment.tenant,
        queue: segment.queue.to_string(),
        partition: segment.partition.to_string(),
        pid: segment.partition_id,
        end: segment.end_offset,
        messages: u32::try_from(segment.frames.len()).unwrap_or(u32::MAX),
    };
    ready.publish_after_wake(event, woken > 0);
}
