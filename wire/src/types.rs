//! Answer bodies of every route, in the field names the wire uses.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `{"error": "..."}`: every 4xx answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub invalid: Option<String>,
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
}

/// One dead-lettered message as `GET /api/v1/dlq` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DlqMessage {
    pub id: i64,
    pub queue: String,
    pub partition: String,
    pub partition_id: String,
    pub consumer_group: Option<String>,
    pub offset: i64,
    pub message_id: String,
    pub transaction_id: String,
    pub data: Value,
    pub error: Option<String>,
    pub retry_count: i32,
    pub failed_at: String,
}

/// The answer of `GET /api/v1/dlq`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DlqPage {
    pub messages: Vec<DlqMessage>,
    pub total: i64,
}
