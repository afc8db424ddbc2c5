//! Request bodies of every route that takes one, in the field names the wire uses. The broker
//! reads its requests into these types and the load generator can send exactly them.
//!
//! Optional fields are `Option` (an absent field and JSON `null` read alike, as the broker has
//! always treated them) and are left out when serialised. Unknown fields are ignored (Queen
//! clients send some). Semantic checks (non-empty strings, UUIDs, statuses, ranges) are the
//! broker's: these types only fix the shapes.

use std::marker::PhantomData;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// `POST /api/v1/push`: `{"items": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushBody {
    #[serde(deserialize_with = "objects")]
    pub items: Vec<PushItem>,
}

/// One message to push.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushItem {
    pub queue: String,
    /// `Default` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// The message id when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<String>,
    /// Required; any JSON value, `null` included (hence `Payload`, not `Option<Value>`), kept as
    /// the JSON text sent.
    #[serde(default, skip_serializing_if = "Payload::is_absent")]
    pub payload: Payload,
}

/// A push item's payload: absent, or present with any JSON value (`null` included), held as the
/// exact JSON text the producer sent (digits, key order, whitespace and escapes kept), so that
/// the consumer receives those bytes. Reading it needs serde_json's own deserializer (`from_str`,
/// `from_slice`), not `from_value`.
#[derive(Debug, Clone, Default)]
pub struct Payload(pub Option<Box<RawValue>>);

impl Payload {
    pub fn is_absent(&self) -> bool {
        self.0.is_none()
    }

    /// A payload of `value`'s JSON text.
    pub fn of(value: &Value) -> Payload {
        Payload(Some(
            serde_json::value::to_raw_value(value).expect("JSON values serialise"),
        ))
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Payload) -> bool {
        self.0.as_ref().map(|r| r.get()) == other.0.as_ref().map(|r| r.get())
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Payload, D::Error> {
        Box::<RawValue>::deserialize(d).map(|v| Payload(Some(v)))
    }
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(raw) => raw.serialize(s),
            None => Value::Null.serialize(s),
        }
    }
}

/// `POST /api/v1/ack`, and one element of `acknowledgments` or an ack operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AckBody {
    pub transaction_id: String,
    pub partition_id: String,
    /// `completed`, `failed`, `retry` or `dlq`.
    pub status: String,
    /// Queue mode when absent (and no batch-level group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_group: Option<String>,
    /// A lease-less ack when absent or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<String>,
    /// The failure reason a nack gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `POST /api/v1/ack/batch`; an item's own consumerGroup wins over the batch's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AckBatchBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer_group: Option<String>,
    #[serde(deserialize_with = "objects")]
    pub acknowledgments: Vec<AckBody>,
}

/// `POST /api/v1/lease/{leaseId}/extend`; 60 s when absent (an empty body is allowed too).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeaseExtendBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<i64>,
}

/// `POST /api/v1/transaction`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TransactionBody {
    pub operations: Vec<Operation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_leases: Option<Vec<String>>,
}

/// One operation of a transaction, tagged by `type`. Read by hand (`Deserialize` below): serde's
/// internally tagged enums buffer their content, which would lose a push payload's text.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Operation {
    Push {
        #[serde(deserialize_with = "objects")]
        items: Vec<PushItem>,
    },
    Ack(AckBody),
}

/// The `type` of an operation, read before the rest of it.
#[derive(Deserialize)]
struct Tag {
    #[serde(rename = "type")]
    kind: String,
}

/// The fields of a push operation.
#[derive(Deserialize)]
struct PushOperation {
    #[serde(deserialize_with = "objects")]
    items: Vec<PushItem>,
}

impl<'de> Deserialize<'de> for Operation {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Operation, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        let text = raw.get();
        if !text.starts_with('{') {
            return Err(de::Error::custom("invalid type: expected an object"));
        }
        let tag: Tag = serde_json::from_str(text).map_err(de::Error::custom)?;
        match tag.kind.as_str() {
            "push" => serde_json::from_str::<PushOperation>(text)
                .map(|p| Operation::Push { items: p.items })
                .map_err(de::Error::custom),
            "ack" => serde_json::from_str(text)
                .map(Operation::Ack)
                .map_err(de::Error::custom),
            other => Err(de::Error::unknown_variant(other, &["push", "ack"])),
        }
    }
}

/// `POST /api/v1/configure`. `options` stays an object: the broker names an unknown or
/// ill-typed option in its refusal (`"invalid": "<option>"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigureBody {
    pub queue: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Map<String, Value>>,
}

/// An array whose every element is a JSON object read as `T`. Serde would also read a struct
/// from an array (positionally); the wire only has objects, so an array element is refused.
pub(crate) fn objects<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    d.deserialize_seq(ObjectsVisitor(PhantomData))
}

struct ObjectsVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectsVisitor<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(Object(t)) = seq.next_element()? {
            out.push(t);
        }
        Ok(out)
    }
}

/// One element of `objects`: a JSON object, read as `T`.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Object<T>, D::Error> {
        d.deserialize_map(ObjectVisitor(PhantomData))
    }
}

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = Object<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Object<T>, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_null_payload_is_present_an_absent_one_is_not() {
        let with: PushItem = serde_json::from_str(r#"{"queue": "q", "payload": null}"#).unwrap();
        assert_eq!(with.payload, Payload::of(&Value::Null));
        let without: PushItem = serde_json::from_str(r#"{"queue": "q"}"#).unwrap();
        assert!(without.payload.is_absent());
    }

    #[test]
    fn operations_are_tagged_by_type_and_round_trip() {
        let body = json!({"operations": [
            {"type": "push", "items": [{"queue": "q", "transactionId": "t", "payload": {"a": 1}}]},
            {"type": "ack", "transactionId": "t", "partitionId": "p", "status": "completed",
             "leaseId": "l"}],
            "requiredLeases": ["l"]});
        let parsed: TransactionBody = serde_json::from_str(&body.to_string()).unwrap();
        assert!(
            matches!(parsed.operations[1], Operation::Ack(ref a) if a.lease_id.as_deref() == Some("l"))
        );
        assert_eq!(serde_json::to_value(&parsed).unwrap(), body);
    }

    #[test]
    fn array_elements_must_be_objects_not_positional_arrays() {
        let positional = json!({"items": [["q", "p", "t", 1]]});
        assert!(serde_json::from_str::<PushBody>(&positional.to_string()).is_err());
        let ack = json!({"acknowledgments": [["t", "p", "completed"]]});
        assert!(serde_json::from_value::<AckBatchBody>(ack).is_err());
        let op = json!({"operations": [["ack", "t", "p", "completed"]]});
        assert!(serde_json::from_str::<TransactionBody>(&op.to_string()).is_err());
        let fine =
            json!({"operations": [{"type": "push", "items": [{"queue": "q", "payload": 1}]}]});
        assert!(serde_json::from_str::<TransactionBody>(&fine.to_string()).is_ok());
    }

    #[test]
    fn a_payload_keeps_its_text() {
        let text = r#"{"items": [{"queue": "q", "payload": {"z": 123456789012345678901234567890, "a" : "\u0000é"}}]}"#;
        let body: PushBody = serde_json::from_str(text).unwrap();
        let raw = body.items[0].payload.0.as_ref().unwrap().get();
        assert_eq!(
            raw,
            r#"{"z": 123456789012345678901234567890, "a" : "\u0000é"}"#
        );
        let op = format!(
            r#"{{"operations": [{{"type": "push", "items": {}}}]}}"#,
            &text[10..text.len() - 1]
        );
        let parsed: TransactionBody = serde_json::from_str(&op).unwrap();
        let Operation::Push { items } = &parsed.operations[0] else {
            panic!("a push")
        };
        assert_eq!(items[0].payload.0.as_ref().unwrap().get(), raw);
    }

    #[test]
    fn nulls_read_as_absent_and_unknown_fields_are_ignored() {
        let a: AckBody = serde_json::from_value(json!({"transactionId": "t", "partitionId": "p",
            "status": "dlq", "leaseId": null, "extra": true}))
        .unwrap();
        assert_eq!(a.lease_id, None);
    }
}
