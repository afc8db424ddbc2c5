//! What brokers tell each other, and how it travels as a `NOTIFY` payload: a versioned JSON
//! envelope naming the sending broker and carrying a batch of events, each of which says a
//! partition (or a queue) may have become poppable. Parsing is strict (unknown fields, kinds or
//! versions are refused) and never panics; an event only ever names what a re-check in
//! PostgreSQL decides, so nothing here can grant a delivery.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The envelope's version; any other is refused.
pub const VERSION: u32 = 1;

/// The longest payload sent: PostgreSQL refuses `NOTIFY` payloads of 8 000 bytes or more.
pub const MAX_PAYLOAD: usize = 7_900;

/// One thing a broker saw that may make a partition poppable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// A push committed offsets up to `end` of `partition` (`pid`) of `queue`; `messages` were
    /// written by the pushes this event stands for.
    Pushed {
        tenant: Uuid,
        queue: String,
        partition: String,
        pid: Uuid,
        end: i64,
        messages: u32,
    },
    /// `group`'s lease on `pid` ended: an ack or nack released it (`completed` when the whole
    /// span was committed; `end`, when known, the released span's last offset), or it expired.
    Released {
        pid: Uuid,
        group: String,
        completed: bool,
        end: Option<i64>,
        /// The released lease's id, when known (an ack names it; an expiry does not).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease: Option<String>,
        /// The group's cursor after the release, when known (the hash path answers it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        committed: Option<i64>,
    },
    /// A pop through the sender leased `group` the span of `pid` up to offset `end`, for
    /// `lease_ms`: the partition is not poppable for the group until the lease ends (a
    /// `Released` follows), so the receiver takes it off the group's candidates.
    Leased {
        tenant: Uuid,
        queue: String,
        pid: Uuid,
        group: String,
        /// The lease's id: its release names it, whichever broker the ack went through.
        lease: String,
        end: i64,
        lease_ms: u64,
    },
    /// A pop through the sender delivered `frames` of `pid` (queue `queue`, partition
    /// `partition`) to `group` under `lease`, through offset `end`, for `lease_ms`: the
    /// receiver's ack registry takes them as if the pop had been its own, so the batch's ack
    /// commits positionally wherever it lands. Unlike the other events this one is trusted
    /// beyond a hint (a positional ack commits what the frames say the batch was), so it is
    /// sealed under the deployment's key (`seal`) and dropped unless the seal verifies.
    Delivered {
        tenant: Uuid,
        queue: String,
        partition: String,
        pid: Uuid,
        group: String,
        lease: String,
        end: i64,
        lease_ms: u64,
        /// Each delivered frame: its transactionId's xxh3_128 (32 hex digits) and its offset.
        frames: Vec<(String, i64)>,
        /// `PeerKey::seal` of the event serialized with an empty seal.
        seal: String,
    },
    /// The queue was deleted.
    QueueDeleted { tenant: Uuid, queue: String },
    /// The queue changed in a way not named partition by partition (configured, or written
    /// through the transaction wire): candidate lists are reseeded.
    QueueChanged { tenant: Uuid, queue: String },
    /// The sender is here and listening (a heartbeat): a broker sends events only while it has
    /// heard another broker recently, so a broker alone adds no `NOTIFY` commits.
    Present,
}

/// One notification: who sent it and what it carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    pub v: u32,
    /// The sending broker's instance id (a broker ignores its own notifications).
    pub from: Uuid,
    pub events: Vec<Event>,
}

impl Event {
    /// The bytes a `Delivered` event's seal covers: the event serialized with its seal empty
    /// (serialization is deterministic, so the receiver computes the same bytes from what it
    /// parsed). `None` for every other kind.
    pub fn sealed_body(&self) -> Option<Vec<u8>> {
        let Event::Delivered { .. } = self else {
            return None;
        };
        let mut unsealed = self.clone();
        if let Event::Delivered { seal, .. } = &mut unsealed {
            seal.clear();
        }
        Some(serde_json::to_vec(&unsealed).expect("events serialize"))
    }
}

/// Why a payload was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    TooLong(usize),
    Malformed(String),
    Version(u32),
    Empty,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::TooLong(n) => write!(f, "payload of {n} bytes exceeds {MAX_PAYLOAD}"),
            Refused::Malformed(e) => write!(f, "malformed payload: {e}"),
            Refused::Version(v) => write!(f, "unknown version {v}"),
            Refused::Empty => write!(f, "no events"),
        }
    }
}

/// Parses one payload strictly.
pub fn parse(payload: &str) -> Result<Envelope, Refused> {
    if payload.len() > MAX_PAYLOAD {
        return Err(Refused::TooLong(payload.len()));
    }
    let envelope: Envelope =
        serde_json::from_str(payload).map_err(|e| Refused::Malformed(e.to_string()))?;
    if envelope.v != VERSION {
        return Err(Refused::Version(envelope.v));
    }
    if envelope.events.is_empty() {
        return Err(Refused::Empty);
    }
    Ok(envelope)
}

/// Packs `events` from `from` into as few payloads as fit `MAX_PAYLOAD`, in order, each with
/// the number of events it carries. An event too large for a payload of its own (names of
/// several kilobytes) is left out; the second value counts those.
pub fn pack(from: Uuid, events: &[Event]) -> (Vec<(String, usize)>, usize) {
    let head = format!("{{\"v\":{VERSION},\"from\":\"{from}\",\"events\":[");
    let tail = "]}";
    let room = MAX_PAYLOAD - head.len() - tail.len();
    let (mut payloads, mut oversized) = (Vec::new(), 0);
    let (mut body, mut in_body) = (String::new(), 0);
    for event in events {
        let one = serde_json::to_string(event).expect("events serialize");
        if one.len() > room {
            oversized += 1;
            continue;
        }
        let extra = one.len() + usize::from(!body.is_empty());
        if body.len() + extra > room {
            payloads.push((format!("{head}{body}{tail}"), in_body));
            (body, in_body) = (String::new(), 0);
        }
        if !body.is_empty() {
            body.push(',');
        }
        body.push_str(&one);
        in_body += 1;
    }
    if !body.is_empty() {
        payloads.push((format!("{head}{body}{tail}"), in_body));
    }
    (payloads, oversized)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pushed(queue: &str) -> Event {
        Event::Pushed {
            tenant: Uuid::nil(),
            queue: queue.into(),
            partition: "Default".into(),
            pid: Uuid::now_v7(),
            end: 41,
            messages: 2,
        }
    }

    #[test]
    fn packed_events_parse_back_in_order() {
        let from = Uuid::now_v7();
        let events = vec![
            pushed("q"),
            Event::Released {
                pid: Uuid::now_v7(),
                group: "g".into(),
                completed: true,
                end: None,
                lease: Some("L".into()),
                committed: Some(40),
            },
            Event::QueueDeleted {
                tenant: Uuid::nil(),
                queue: "q\"\\é".into(),
            },
            Event::Leased {
                tenant: Uuid::nil(),
                queue: "q".into(),
                pid: Uuid::now_v7(),
                group: "__QUEUE_MODE__".into(),
                lease: "0193a8c4-0000-7000-8000-000000000001".into(),
                end: 41,
                lease_ms: 30_000,
            },
        ];
        let (payloads, oversized) = pack(from, &events);
        assert_eq!((payloads.len(), oversized), (1, 0));
        assert_eq!(payloads[0].1, 4);
        let back = parse(&payloads[0].0).expect("parses");
        assert_eq!(back.from, from);
        assert_eq!(back.events, events);
    }

    #[test]
    fn a_large_batch_splits_into_payloads_that_each_fit() {
        let events: Vec<Event> = (0..500).map(|i| pushed(&format!("queue-{i}"))).collect();
        let (payloads, _) = pack(Uuid::nil(), &events);
        assert!(payloads.len() > 1);
        let mut back = Vec::new();
        for (p, n) in &payloads {
            assert!(p.len() <= MAX_PAYLOAD, "{}", p.len());
            let events = parse(p).expect("parses").events;
            assert_eq!(events.len(), *n);
            back.extend(events);
        }
        assert_eq!(back, events);
        let huge = pushed(&"x".repeat(MAX_PAYLOAD));
        assert_eq!(pack(Uuid::nil(), &[huge]), (Vec::new(), 1));
    }

    #[test]
    fn garbage_unknown_fields_kinds_and_versions_are_refused() {
        let from = Uuid::nil();
        for bad in [
            "",
            "hello",
            "{}",
            "[1,2]",
            &format!("{{\"v\":2,\"from\":\"{from}\",\"events\":[{{\"kind\":\"queue_deleted\",\"tenant\":\"{from}\",\"queue\":\"q\"}}]}}"),
            &format!("{{\"v\":1,\"from\":\"{from}\",\"events\":[]}}"),
            &format!("{{\"v\":1,\"from\":\"{from}\",\"events\":[{{\"kind\":\"grant\",\"pid\":\"{from}\"}}]}}"),
            &format!("{{\"v\":1,\"from\":\"{from}\",\"events\":[{{\"kind\":\"queue_deleted\",\"tenant\":\"{from}\",\"queue\":\"q\",\"extra\":1}}]}}"),
            &format!("{{\"v\":1,\"from\":\"{from}\",\"extra\":0,\"events\":[{{\"kind\":\"queue_deleted\",\"tenant\":\"{from}\",\"queue\":\"q\"}}]}}"),
            &format!("{{\"v\":1,\"from\":\"not-a-uuid\",\"events\":[{{\"kind\":\"queue_deleted\",\"tenant\":\"{from}\",\"queue\":\"q\"}}]}}"),
            &"x".repeat(MAX_PAYLOAD + 1),
        ] {
            assert!(parse(bad).is_err(), "accepted: {bad:.80}");
        }
    }
}
