//! What the push path reports after a segment commits: `on_pushed`, called once per written
//! segment (fused or not), from the code that saw the commit.
//!
//! Today it wakes the long-polls parked on the queue. It is the one place where pop-side
//! consumers of fresh segments (hotlist, caches) hook in; everything a consumer may need is in
//! `WrittenSegment`, borrowed for the duration of the call (copy what you keep).

use std::time::SystemTime;

use uuid::Uuid;

use crate::app::App;
use crate::segment::FrameRef;

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
    /// `log_push_v1` does not).
    pub created_at: Option<SystemTime>,
    /// The frames in offset order: frame k is at `base_offset + k`.
    pub frames: &'a [FrameRef<'a>],
}

/// Called after `segment` committed (the caller has not answered its client yet).
pub fn on_pushed(app: &App, segment: &WrittenSegment<'_>) {
    app.long_poll
        .pushed(segment.tenant, segment.queue, segment.frames.len());
}
