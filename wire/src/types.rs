//! Answer bodies of every route, in the field names the wire uses; and borrowed twins of the
//! answers a client parses on its hot path.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::Value;

/// `{"error": "..."}`: every 4xx answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub invalid: Option<String>,
    /// A push refused for a queue's `maxSize` (409): the queue, limit, depth and push size.
    #[serde(flatten, skip_serializing_if = "Option::is_none", default)]
    pub queue_full: Option<QueueFull>,
}

/// One element of the push answer (ids are snake_case on this route, as in Queen).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PushResult {
    pub index: usize,
    pub message_id: Option<String>,
    pub transaction_id: String,
    #[serde(rename = "queueName")]
    pub queue_name: String,
    /// `queued` or `duplicate`.
    pub status: String,
}

/// A delivered message.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: String,
    pub transaction_id: String,
    pub data: Value,
    pub created_at: String,
    pub queue: String,
    pub partition: String,
    pub partition_id: String,
    pub lease_id: String,
    pub consumer_group: Option<String>,
    pub delivery_attempt: i32,
}

/// The 200 answer of every pop route; the top-level partition fields describe the first
/// partition leased.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PopResponse {
    pub success: bool,
    pub queue: String,
    pub partition: String,
    pub partition_id: String,
    pub lease_id: String,
    pub consumer_group: Option<String>,
    pub partitions_claimed: usize,
    pub messages: Vec<Message>,
}

/// One element of the ack answer, in request order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AckResult {
    pub index: usize,
    pub transaction_id: String,
    pub success: bool,
    pub error: Option<String>,
    pub lease_released: bool,
    pub dlq: bool,
    pub noop: bool,
}

/// The answer of `POST /api/v1/lease/:leaseId/extend`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LeaseExtendResponse {
    pub lease_id: String,
    pub success: bool,
    pub renewed: i64,
    pub expires_at: Option<String>,
}

/// Effective options of a queue, as `configure` answers them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct QueueOptions {
    pub lease_time: i32,
    pub retry_limit: i32,
    pub dead_letter_queue: bool,
    pub dlq_after_max_retries: bool,
    pub dedup_window_seconds: i32,
    pub completed_retention_seconds: i32,
    pub retention_seconds: i32,
    pub delayed_processing: i32,
    pub window_buffer: i32,
    pub max_size: i64,
    pub priority: i32,
    pub encryption_enabled: bool,
    pub retention_enabled: bool,
    pub ttl: i32,
    pub retry_delay: i32,
    pub max_wait_time_seconds: i32,
}

/// The answer of `POST /api/v1/configure`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigureResponse {
    pub configured: bool,
    pub queue_id: String,
    pub queue: String,
    pub namespace: String,
    pub task: String,
    pub options: QueueOptions,
    /// Options of the request this broker does not know: accepted without effect, as Queen does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
}

/// One queue as `GET /api/v1/resources/queues` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct QueueSummary {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub task: String,
    pub options: QueueOptions,
    pub partitions: i64,
    /// Unconsumed messages in queue mode.
    pub depth: i64,
    pub created_at: String,
}

/// The answer of `GET /api/v1/resources/queues`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct QueueList {
    pub queues: Vec<QueueSummary>,
}

/// One consumer group's cursor on a partition.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GroupCursor {
    /// `null` in queue mode.
    pub consumer_group: Option<String>,
    /// The last committed offset (-1 = none).
    pub committed: i64,
    /// A lease is live on the partition for this group.
    pub leased: bool,
}

/// One partition of `GET /api/v1/resources/queues/:queue`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PartitionDetail {
    pub name: String,
    pub id: String,
    /// The last offset written (-1 = none).
    pub last_offset: i64,
    /// Unconsumed messages in queue mode.
    pub depth: i64,
    pub consumers: Vec<GroupCursor>,
}

/// The answer of `GET /api/v1/resources/queues/:queue`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct QueueDetail {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub task: String,
    pub options: QueueOptions,
    /// Unconsumed messages in queue mode.
    pub depth: i64,
    pub created_at: String,
    pub partitions: Vec<PartitionDetail>,
}

/// The answer of `DELETE /api/v1/resources/queues/:queue`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct QueueDeleted {
    pub deleted: bool,
    pub queue: String,
}

/// One dead-lettered message as `GET /api/v1/dlq` lists it, in Queen's shape. Fields a
/// Queen server may leave out are optional (the load generator reads either).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DlqMessage {
    /// The message id (a UUID).
    pub id: String,
    #[serde(default)]
    pub queue: String,
    #[serde(default)]
    pub partition: String,
    #[serde(default)]
    pub partition_id: String,
    /// `null` in queue mode.
    #[serde(default)]
    pub consumer_group: Option<String>,
    #[serde(default)]
    pub offset: Option<i64>,
    pub transaction_id: String,
    /// The payload's JSON text, exactly as pushed (`null` with `dataError` when an encrypted
    /// payload cannot be decrypted).
    pub data: Box<RawValue>,
    /// Why `data` is null: the encrypted payload could not be decrypted (the row is kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_error: Option<String>,
    #[serde(default)]
    pub error_message: Option<String>,
    #[serde(default)]
    pub retry_count: i32,
    /// When the message was pushed (null when not known).
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub failed_at: Option<String>,
}

/// The page of a DLQ listing. Queen's own server omits `total`: a reader then pages until a
/// page shorter than `limit`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DlqPagination {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    #[serde(default)]
    pub limit: i64,
    #[serde(default)]
    pub offset: i64,
}

/// The answer of `GET /api/v1/dlq`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DlqPage {
    pub messages: Vec<DlqMessage>,
    pub pagination: DlqPagination,
}

/// The facts of a push refused because a queue would exceed its `maxSize` (beside `error` in
/// the 409 answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueFull {
    pub queue: String,
    pub max_size: i64,
    /// Unconsumed messages (queue mode) when the push was refused.
    pub depth: i64,
    /// Messages the refused push would have added to that queue.
    pub pushing: i64,
}

// ---------------------------------------------------------------------------------------------
// Borrowed twins of the answers a client reads on its hot path: the same fields and names, but
// strings borrow from the answer's bytes (`Cow` owns only a string that had escapes) and
// payloads stay raw JSON, so parsing an answer allocates little more than its `Vec`.

/// `PushResult`, borrowed.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct PushResultRef<'a> {
    pub index: usize,
    #[serde(borrow)]
    pub message_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub transaction_id: Cow<'a, str>,
    #[serde(rename = "queueName", borrow)]
    pub queue_name: Cow<'a, str>,
    #[serde(borrow)]
    pub status: Cow<'a, str>,
}

/// `Message`, borrowed; `data` is the payload's raw JSON text.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageRef<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(borrow)]
    pub transaction_id: Cow<'a, str>,
    #[serde(borrow)]
    pub data: &'a RawValue,
    #[serde(borrow)]
    pub created_at: Cow<'a, str>,
    #[serde(borrow)]
    pub queue: Cow<'a, str>,
    #[serde(borrow)]
    pub partition: Cow<'a, str>,
    #[serde(borrow)]
    pub partition_id: Cow<'a, str>,
    #[serde(borrow)]
    pub lease_id: Cow<'a, str>,
    #[serde(borrow)]
    pub consumer_group: Option<Cow<'a, str>>,
    pub delivery_attempt: i32,
}

/// `PopResponse`, borrowed.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PopResponseRef<'a> {
    pub success: bool,
    #[serde(borrow)]
    pub queue: Cow<'a, str>,
    #[serde(borrow)]
    pub partition: Cow<'a, str>,
    #[serde(borrow)]
    pub partition_id: Cow<'a, str>,
    #[serde(borrow)]
    pub lease_id: Cow<'a, str>,
    #[serde(borrow)]
    pub consumer_group: Option<Cow<'a, str>>,
    pub partitions_claimed: usize,
    #[serde(borrow)]
    pub messages: Vec<MessageRef<'a>>,
}

/// `AckResult`, borrowed.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AckResultRef<'a> {
    pub index: usize,
    #[serde(borrow)]
    pub transaction_id: Cow<'a, str>,
    pub success: bool,
    #[serde(borrow)]
    pub error: Option<Cow<'a, str>>,
    pub lease_released: bool,
    pub dlq: bool,
    pub noop: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(txn: &str) -> Message {
        Message {
            id: "0190-a".into(),
            transaction_id: txn.into(),
            data: serde_json::json!({"ts": 17, "pad": "xx"}),
            created_at: "2024-01-01T00:00:00Z".into(),
            queue: "q".into(),
            partition: "p-0".into(),
            partition_id: "7c1e".into(),
            lease_id: "lease-1".into(),
            consumer_group: None,
            delivery_attempt: 1,
        }
    }

    #[test]
    fn borrowed_pop_answer_reads_what_the_owned_one_writes() {
        let owned = PopResponse {
            success: true,
            queue: "q".into(),
            partition: "p-0".into(),
            partition_id: "7c1e".into(),
            lease_id: "lease-1".into(),
            consumer_group: Some("g".into()),
            partitions_claimed: 1,
            messages: vec![message("plain"), message("with \"quotes\"")],
        };
        let text = serde_json::to_vec(&owned).unwrap();
        let r: PopResponseRef<'_> = serde_json::from_slice(&text).unwrap();
        assert_eq!(r.consumer_group.as_deref(), Some("g"));
        assert_eq!(r.messages.len(), 2);
        let m = &r.messages[0];
        assert!(matches!(m.transaction_id, Cow::Borrowed("plain")));
        assert_eq!(m.lease_id, "lease-1");
        assert_eq!(m.partition_id, "7c1e");
        let data: Value = serde_json::from_str(m.data.get()).unwrap();
        assert_eq!(data, owned.messages[0].data);
        assert_eq!(
            r.messages[1].transaction_id, "with \"quotes\"",
            "escaped strings are unescaped (owned)"
        );
    }

    #[test]
    fn borrowed_push_and_ack_answers_match_the_owned_ones() {
        let push = PushResult {
            index: 3,
            message_id: Some("m".into()),
            transaction_id: "t".into(),
            queue_name: "q".into(),
            status: "queued".into(),
        };
        let text = serde_json::to_vec(&[&push]).unwrap();
        let r: Vec<PushResultRef<'_>> = serde_json::from_slice(&text).unwrap();
        assert_eq!(
            (r[0].index, &*r[0].status, &*r[0].queue_name),
            (3, "queued", "q")
        );
        let ack = AckResult {
            index: 0,
            transaction_id: "t".into(),
            success: false,
            error: Some("lease expired".into()),
            lease_released: false,
            dlq: true,
            noop: false,
        };
        let text = serde_json::to_vec(&[&ack]).unwrap();
        let r: Vec<AckResultRef<'_>> = serde_json::from_slice(&text).unwrap();
        assert_eq!(r[0].error.as_deref(), Some("lease expired"));
        assert!(r[0].dlq && !r[0].success && !r[0].noop);
    }
}
