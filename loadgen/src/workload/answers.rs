//! The hot-path answers as the workers read them: every variant a known broker writes is read
//! as what it means, and each variant that departs from this workspace's wire (`wire.md`) is
//! tallied, so results.json tells a user how their deployment differs.
//!
//! Variants read (Queen MQ's rows engine wrote all of them; see
//! `tests/fixtures/queen/README.md`): a push answered 200 instead of 201; an empty pop answered
//! 200 with `messages: []` (with `success: false` and an `error` such as
//! `no_available_partition` when not waiting) instead of 204; popped messages without `queue` or
//! `deliveryAttempt`; queue mode's group reported as `__QUEUE_MODE__` instead of null; ack
//! answers without `noop`, `Message not found` for an unknown transactionId, and an ack
//! answer's `index` that is not the item's position in the request (Queen's server combines
//! concurrent requests into one SQL call and reports the place in that).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde_json::value::RawValue;

/// A departure from this workspace's wire that a broker's answer showed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    PushAnswered200,
    EmptyPopAnswered200,
    EmptyPopRefused,
    MessageWithoutQueue,
    MessageWithoutDeliveryAttempt,
    QueueModeGroupNamed,
    AckWithoutNoop,
    AckMessageNotFound,
    AckIndexNotPosition,
}

impl Variant {
    pub const ALL: [Variant; 9] = [
        Variant::PushAnswered200,
        Variant::EmptyPopAnswered200,
        Variant::EmptyPopRefused,
        Variant::MessageWithoutQueue,
        Variant::MessageWithoutDeliveryAttempt,
        Variant::QueueModeGroupNamed,
        Variant::AckWithoutNoop,
        Variant::AckMessageNotFound,
        Variant::AckIndexNotPosition,
    ];

    /// What the variant is, as results.json names it.
    pub fn describe(self) -> &'static str {
        match self {
            Variant::PushAnswered200 => "push answered 200 (not 201)",
            Variant::EmptyPopAnswered200 => "empty pop answered 200 with messages [] (not 204)",
            Variant::EmptyPopRefused => {
                "empty pop answered success false with an error (no_available_partition, partition_not_found)"
            }
            Variant::MessageWithoutQueue => "popped messages carry no queue",
            Variant::MessageWithoutDeliveryAttempt => "popped messages carry no deliveryAttempt",
            Variant::QueueModeGroupNamed => "queue mode reported as consumerGroup __QUEUE_MODE__ (not null)",
            Variant::AckWithoutNoop => "ack answers carry no noop",
            Variant::AckMessageNotFound => "ack of an unknown transactionId answered \"Message not found\"",
            Variant::AckIndexNotPosition => {
                "ack answers' index is not the item's position in the request (matched by transactionId)"
            }
        }
    }
}

/// How often each variant was seen (answers, not messages).
#[derive(Default)]
pub struct Variants([AtomicU64; Variant::ALL.len()]);

impl Variants {
    pub fn saw(&self, v: Variant) {
        self.0[v as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The variants seen, by description.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        Variant::ALL
            .iter()
            .map(|v| {
                (
                    v.describe().to_string(),
                    self.0[*v as usize].load(Ordering::Relaxed),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// One popped message: what the consumer needs, and the fields whose absence is a variant.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Popped<'a> {
    #[serde(borrow)]
    pub transaction_id: Cow<'a, str>,
    #[serde(borrow)]
    pub data: &'a RawValue,
    #[serde(borrow)]
    pub partition_id: Cow<'a, str>,
    #[serde(borrow, default)]
    pub lease_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub queue: Option<Cow<'a, str>>,
    #[serde(default)]
    pub delivery_attempt: Option<i32>,
}

/// A pop answered 200: messages (maybe none), and how an empty one was said.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PopAnswer<'a> {
    #[serde(default)]
    pub success: Option<bool>,
    #[serde(borrow, default)]
    pub error: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub consumer_group: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub messages: Vec<Popped<'a>>,
}

impl PopAnswer<'_> {
    /// Tallies how this answer departs from the workspace's wire (the first message speaks for
    /// the rest: one broker writes all its messages alike).
    pub fn note(&self, variants: &Variants) {
        if self.messages.is_empty() {
            variants.saw(Variant::EmptyPopAnswered200);
            if self.success == Some(false) && self.error.is_some() {
                variants.saw(Variant::EmptyPopRefused);
            }
        }
        if self.consumer_group.as_deref() == Some(ackbench_wire::QUEUE_MODE_GROUP) {
            variants.saw(Variant::QueueModeGroupNamed);
        }
        if let Some(m) = self.messages.first() {
            if m.queue.is_none() {
                variants.saw(Variant::MessageWithoutQueue);
            }
            if m.delivery_attempt.is_none() {
                variants.saw(Variant::MessageWithoutDeliveryAttempt);
            }
        }
    }
}

/// One item of an ack answer.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AckAnswer<'a> {
    pub index: usize,
    #[serde(borrow)]
    pub transaction_id: Cow<'a, str>,
    pub success: bool,
    #[serde(borrow, default)]
    pub error: Option<Cow<'a, str>>,
    #[serde(default)]
    pub dlq: bool,
    /// Absent in Queen's answers: read as false (a repeated ack is refused there instead).
    #[serde(default)]
    pub noop: Option<bool>,
}

impl AckAnswer<'_> {
    pub fn noop(&self) -> bool {
        self.noop == Some(true)
    }

    /// The error, when it says the lease is invalid or expired (either broker's wording).
    pub fn lease_refused(&self) -> bool {
        self.error
            .as_deref()
            .is_some_and(|e| e.eq_ignore_ascii_case("invalid or expired lease"))
    }
}

/// Tallies how one ack answer departs from the workspace's wire.
pub fn note_acks(answers: &[AckAnswer<'_>], variants: &Variants) {
    if answers.first().is_some_and(|a| a.noop.is_none()) {
        variants.saw(Variant::AckWithoutNoop);
    }
    if answers
        .iter()
        .any(|a| a.error.as_deref() == Some("Message not found"))
    {
        variants.saw(Variant::AckMessageNotFound);
    }
    if answers.iter().enumerate().any(|(i, a)| a.index != i) {
        variants.saw(Variant::AckIndexNotPosition);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_pop_answer_shows_no_variant() {
        let text = r#"{"success":true,"queue":"q","partition":"p-0","partitionId":"P","leaseId":"L",
            "consumerGroup":null,"partitionsClaimed":1,"messages":[{"id":"1","transactionId":"t",
            "data":{"ts":1},"createdAt":"c","queue":"q","partition":"p-0","partitionId":"P",
            "leaseId":"L","consumerGroup":null,"deliveryAttempt":1}]}"#;
        let a: PopAnswer<'_> = serde_json::from_str(text).unwrap();
        let v = Variants::default();
        a.note(&v);
        assert!(v.snapshot().is_empty(), "{:?}", v.snapshot());
        assert_eq!(a.messages[0].lease_id.as_deref(), Some("L"));
    }

    #[test]
    fn an_empty_refused_pop_is_an_empty_pop() {
        let a: PopAnswer<'_> = serde_json::from_str(
            r#"{"error":"no_available_partition","messages":[],"success":false}"#,
        )
        .unwrap();
        let v = Variants::default();
        a.note(&v);
        assert!(a.messages.is_empty());
        assert_eq!(v.snapshot().len(), 2);
    }

    #[test]
    fn an_ack_answer_without_noop_reads_as_no_noop() {
        let text = r#"[{"dlq":false,"error":"Invalid or expired lease","index":0,"leaseReleased":false,
            "partitionName":"p2","queueName":"q","success":false,"transactionId":"t"}]"#;
        let a: Vec<AckAnswer<'_>> = serde_json::from_str(text).unwrap();
        assert!(!a[0].noop() && a[0].lease_refused());
        let v = Variants::default();
        note_acks(&a, &v);
        assert_eq!(
            v.snapshot().keys().collect::<Vec<_>>(),
            ["ack answers carry no noop"]
        );
    }
}
