//! The hot request bodies (push, ack, ack batch) read without copying: every name, id and
//! payload borrows the request's bytes (`Text` owns only a string that carried escapes). The
//! broker reads these on its hot routes; the owned twins in `requests` stay the wire's model for
//! everything else (the transaction route converts with `borrowed()`). Shapes and refusals are
//! the owned types': the same field names, arrays of objects only, and a push payload present
//! whenever its key is (`null` included).

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::requests::{objects, AckBody, PushItem};

/// A JSON string borrowed from the body, or owned when it carried escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text<'a>(pub Cow<'a, str>);

impl Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'a> From<&'a str> for Text<'a> {
    fn from(s: &'a str) -> Text<'a> {
        Text(Cow::Borrowed(s))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text<'a>, D::Error> {
        d.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Borrowed(s)))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(s.to_string())))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(s)))
    }
}

/// A JSON value's text exactly as sent (checked to be JSON, not parsed further).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonText<'a>(pub &'a str);

impl<'a> JsonText<'a> {
    pub fn get(&self) -> &'a str {
        self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for JsonText<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<JsonText<'a>, D::Error> {
        <&RawValue>::deserialize(d).map(|raw| JsonText(raw.get()))
    }
}

/// `PushBody`, borrowed.
#[derive(Debug, PartialEq, Deserialize)]
pub struct PushBodyRef<'a> {
    #[serde(borrow, deserialize_with = "objects")]
    pub items: Vec<PushItemRef<'a>>,
}

/// `PushItem`, borrowed; `payload` is `Some` whenever the key is present (`null` included).
#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushItemRef<'a> {
    #[serde(borrow)]
    pub queue: Text<'a>,
    #[serde(default, borrow)]
    pub partition: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub transaction_id: Option<Text<'a>>,
    #[serde(default, borrow, deserialize_with = "present")]
    pub payload: Option<JsonText<'a>>,
}

/// A key that is present reads as `Some`, even when its value is `null`.
fn present<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<JsonText<'a>>, D::Error> {
    JsonText::deserialize(d).map(Some)
}

impl PushItem {
    /// This item, borrowed.
    pub fn borrowed(&self) -> PushItemRef<'_> {
        PushItemRef {
            queue: self.queue.as_str().into(),
            partition: self.partition.as_deref().map(Text::from),
            transaction_id: self.transaction_id.as_deref().map(Text::from),
            payload: self.payload.0.as_deref().map(|raw| JsonText(raw.get())),
        }
    }
}

/// `AckBody`, borrowed.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AckBodyRef<'a> {
    #[serde(borrow)]
    pub transaction_id: Text<'a>,
    #[serde(borrow)]
    pub partition_id: Text<'a>,
    #[serde(borrow)]
    pub status: Text<'a>,
    #[serde(default, borrow)]
    pub consumer_group: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub lease_id: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub error: Option<Text<'a>>,
}

/// `AckBatchBody`, borrowed.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AckBatchBodyRef<'a> {
    #[serde(default, borrow)]
    pub consumer_group: Option<Text<'a>>,
    #[serde(borrow, deserialize_with = "objects")]
    pub acknowledgments: Vec<AckBodyRef<'a>>,
}

impl AckBody {
    /// This item, borrowed.
    pub fn borrowed(&self) -> AckBodyRef<'_> {
        AckBodyRef {
            transaction_id: self.transaction_id.as_str().into(),
            partition_id: self.partition_id.as_str().into(),
            status: self.status.as_str().into(),
            consumer_group: self.consumer_group.as_deref().map(Text::from),
            lease_id: self.lease_id.as_deref().map(Text::from),
            error: self.error.as_deref().map(Text::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::{AckBatchBody, PushBody};

    #[test]
    fn names_and_payloads_borrow_the_body_unless_escaped() {
        let text = r#"{"items":[{"queue":"q","partition":"p\u00e9","transactionId":"t-1","payload":{"a": [1, 2.50]}}]}"#;
        let body: PushBodyRef = serde_json::from_str(text).unwrap();
        let item = &body.items[0];
        assert!(matches!(item.queue.0, Cow::Borrowed("q")));
        assert!(matches!(
            item.transaction_id.as_ref().unwrap().0,
            Cow::Borrowed("t-1")
        ));
        assert_eq!(
            &*item.partition.clone().unwrap(),
            "pé",
            "an escape is decoded (owned)"
        );
        assert_eq!(
            item.payload.unwrap().get(),
            r#"{"a": [1, 2.50]}"#,
            "the text sent"
        );
    }

    #[test]
    fn reads_what_the_owned_types_read_and_refuses_what_they_refuse() {
        for text in [
            r#"{"items":[{"queue":"q","payload":null}]}"#,
            r#"{"items":[{"queue":"q"}]}"#,
            r#"{"items":[{"queue":"q","partition":null,"transactionId":null,"payload":7}]}"#,
            r#"{"items":[["q"]]}"#,
            r#"{"items":[{"queue":1}]}"#,
            r#"{"items":{}}"#,
        ] {
            let owned = serde_json::from_str::<PushBody>(text);
            let borrowed = serde_json::from_str::<PushBodyRef>(text);
            assert_eq!(owned.is_ok(), borrowed.is_ok(), "{text}");
            if let (Ok(o), Ok(b)) = (owned, borrowed) {
                let (o, b) = (o.items[0].borrowed(), &b.items[0]);
                assert_eq!(o.queue, b.queue);
                assert_eq!(o.partition, b.partition);
                assert_eq!(o.transaction_id, b.transaction_id);
                assert_eq!(
                    o.payload.map(|r| r.get()),
                    b.payload.map(|r| r.get()),
                    "{text}"
                );
            }
        }
        for text in [
            r#"{"consumerGroup":"g","acknowledgments":[{"transactionId":"t","partitionId":"p","status":"completed","leaseId":"l","error":"e"}]}"#,
            r#"{"acknowledgments":[{"transactionId":"t","partitionId":"p","status":"failed"}]}"#,
            r#"{"acknowledgments":[{"transactionId":"t","status":"failed"}]}"#,
            r#"{"acknowledgments":[["t","p","completed"]]}"#,
        ] {
            let owned = serde_json::from_str::<AckBatchBody>(text);
            let borrowed = serde_json::from_str::<AckBatchBodyRef>(text);
            assert_eq!(owned.is_ok(), borrowed.is_ok(), "{text}");
            if let (Ok(o), Ok(b)) = (owned, borrowed) {
                let (o, b) = (o.acknowledgments[0].borrowed(), &b.acknowledgments[0]);
                assert_eq!(o.transaction_id, b.transaction_id);
                assert_eq!(o.partition_id, b.partition_id);
                assert_eq!(o.status, b.status);
                assert_eq!(o.consumer_group, b.consumer_group);
                assert_eq!(o.lease_id, b.lease_id);
                assert_eq!(o.error, b.error);
            }
        }
    }
}
