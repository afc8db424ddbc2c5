//! The hot request bodies (push, ack, ack batch) read by a byte scanner, when they are in the
//! plain form clients send: no escapes in names and ids, no exponents, payloads nested at most
//! `MAX_DEPTH` deep. Anything outside that form answers `None`, and the caller reads the body
//! with serde (`borrowed`), which stays the authority on what the wire accepts: the scanner
//! accepts only bodies serde accepts, and reads them into the same values (the differential
//! tests below check both on bodies generated around the edges of the form).
//!
//! Why: serde's derive reads each item field by field through visitors and, for the payload,
//! scans it twice (once to find its end, once to capture it). At pops of 100 that reading was a
//! quarter of the broker's instructions per message.

use std::borrow::Cow;

use crate::borrowed::{AckBatchBodyRef, AckBodyRef, JsonText, PushBodyRef, PushItemRef, Text};

/// How deep a payload may nest before the scanner leaves it to serde.
const MAX_DEPTH: usize = 32;

/// A push body `{"items": [...]}`, or `None` when serde must read it.
pub fn push_body(text: &str) -> Option<PushBodyRef<'_>> {
    let mut s = Scanner::new(text);
    let mut items = None;
    s.object(|s, key| match key {
        "items" if items.is_none() => {
            items = Some(s.objects(push_item)?);
            Some(())
        }
        "items" => None,
        _ => s.skip_value(0),
    })?;
    s.end()?;
    Some(PushBodyRef { items: items? })
}

/// An ack batch body `{"consumerGroup"?, "acknowledgments": [...]}`, or `None`.
pub fn ack_batch_body(text: &str) -> Option<AckBatchBodyRef<'_>> {
    let mut s = Scanner::new(text);
    let (mut group, mut acks) = (None, None);
    s.object(|s, key| match key {
        "consumerGroup" => once(&mut group, s.optional_text()?),
        "acknowledgments" if acks.is_none() => {
            acks = Some(s.objects(ack_item)?);
            Some(())
        }
        "acknowledgments" => None,
        _ => s.skip_value(0),
    })?;
    s.end()?;
    Some(AckBatchBodyRef {
        consumer_group: group.flatten(),
        acknowledgments: acks?,
    })
}

/// A single ack body (one ack item at the root), or `None`.
pub fn ack_body(text: &str) -> Option<AckBodyRef<'_>> {
    let mut s = Scanner::new(text);
    let ack = ack_item(&mut s)?;
    s.end()?;
    Some(ack)
}

fn push_item<'a>(s: &mut Scanner<'a>) -> Option<PushItemRef<'a>> {
    let (mut queue, mut partition, mut transaction_id, mut payload) = (None, None, None, None);
    s.object(|s, key| match key {
        "queue" => once(&mut queue, s.text()?),
        "partition" => once(&mut partition, s.optional_text()?),
        "transactionId" => once(&mut transaction_id, s.optional_text()?),
        "payload" => once(&mut payload, JsonText(s.value()?)),
        _ => s.skip_value(0),
    })?;
    Some(PushItemRef {
        queue: queue?,
        partition: partition.flatten(),
        transaction_id: transaction_id.flatten(),
        payload,
    })
}

fn ack_item<'a>(s: &mut Scanner<'a>) -> Option<AckBodyRef<'a>> {
    let (mut transaction_id, mut partition_id, mut status) = (None, None, None);
    let (mut group, mut lease_id, mut error) = (None, None, None);
    s.object(|s, key| match key {
        "transactionId" => once(&mut transaction_id, s.text()?),
        "partitionId" => once(&mut partition_id, s.text()?),
        "status" => once(&mut status, s.text()?),
        "consumerGroup" => once(&mut group, s.optional_text()?),
        "leaseId" => once(&mut lease_id, s.optional_text()?),
        "error" => once(&mut error, s.optional_text()?),
        _ => s.skip_value(0),
    })?;
    Some(AckBodyRef {
        transaction_id: transaction_id?,
        partition_id: partition_id?,
        status: status?,
        consumer_group: group.flatten(),
        lease_id: lease_id.flatten(),
        error: error.flatten(),
    })
}

/// Sets a field read for the first time; a field named twice is serde's to refuse.
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(value);
            Some(())
        }
    }
}

struct Scanner<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Scanner<'a> {
        Scanner { text, at: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The next byte that is not JSON whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        let bytes = self.bytes();
        while let Some(&b) = bytes.get(self.at) {
            if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                return Some(b);
            }
            self.at += 1;
        }
        None
    }

    /// Consumes the next non-whitespace byte, which must be `want`.
    fn expect(&mut self, want: u8) -> Option<()> {
        (self.peek()? == want).then(|| self.at += 1)
    }

    /// Nothing but whitespace is left.
    fn end(&mut self) -> Option<()> {
        self.peek().is_none().then_some(())
    }

    /// Reads an object, handing each key to `field`, which must consume the key's value.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            field(self, key)?;
            match self.next()? {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// Reads an array whose every element is an object read by `item`.
    fn objects<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        self.expect(b'[')?;
        let mut out = Vec::new();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(out);
        }
        loop {
            out.push(item(self)?);
            match self.next()? {
                b',' => {}
                b']' => return Some(out),
                _ => return None,
            }
        }
    }

    /// Consumes and returns the next non-whitespace byte.
    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    /// A string without escapes or control characters, borrowed.
    fn string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.at;
        self.at = special(self.bytes(), start)?;
        if self.bytes()[self.at] != b'"' {
            return None;
        }
        self.at += 1;
        // Both ends sit next to an ASCII quote, so the slice is on character boundaries.
        Some(&self.text[start..self.at - 1])
    }

    fn text(&mut self) -> Option<Text<'a>> {
        self.string().map(|s| Text(Cow::Borrowed(s)))
    }

    /// A string or `null` (absent).
    fn optional_text(&mut self) -> Option<Option<Text<'a>>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        self.text().map(Some)
    }

    /// Any JSON value, returned as the text sent.
    fn value(&mut self) -> Option<&'a str> {
        self.peek()?;
        let start = self.at;
        self.skip_value(0)?;
        Some(&self.text[start..self.at])
    }

    /// Consumes one JSON value, checking its grammar.
    fn skip_value(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => self.object(|s, _| s.skip_value(depth + 1)),
            b'[' => self.skip_array(depth),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn skip_array(&mut self, depth: usize) -> Option<()> {
        self.expect(b'[')?;
        if self.peek()? == b']' {
            self.at += 1;
            return Some(());
        }
        loop {
            self.skip_value(depth + 1)?;
            match self.next()? {
                b',' => {}
                b']' => return Some(()),
                _ => return None,
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes().get(self.at..end)? == word).then(|| self.at = end)
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)?`; an exponent is left to serde.
    fn number(&mut self) -> Option<()> {
        if self.bytes().get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match *self.bytes().get(self.at)? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.bytes().get(self.at) == Some(&b'.') {
            self.at += 1;
            if !self.bytes().get(self.at)?.is_ascii_digit() {
                return None;
            }
            self.digits();
        }
        match self.bytes().get(self.at) {
            Some(b'e' | b'E') => None,
            _ => Some(()),
        }
    }

    fn digits(&mut self) {
        while self.bytes().get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
    }
}

/// The position of the first quote, backslash or control character at or after `from`: where a
/// string ends, or where the scanner gives up on it. Eight bytes at a time (the usual test for a zero byte,
/// applied to the byte XOR each sought value; the lowest flagged byte is always a true match).
fn special(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let v = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let below_space = v.wrapping_sub(ONES * 0x20) & !v & HIGHS;
        let found =
            zero(v ^ (ONES * u64::from(b'"'))) | zero(v ^ (ONES * u64::from(b'\\'))) | below_space;
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    bytes[at.min(bytes.len())..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|i| at + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serde_push(text: &str) -> Option<PushBodyRef<'_>> {
        serde_json::from_str(text).ok()
    }

    fn serde_ack_batch(text: &str) -> Option<AckBatchBodyRef<'_>> {
        serde_json::from_str(text).ok()
    }

    fn serde_ack(text: &str) -> Option<AckBodyRef<'_>> {
        serde_json::from_str(text).ok()
    }

    /// What the scanner reads, serde reads the same; what serde refuses, the scanner refuses.
    fn agree(text: &str) -> [bool; 3] {
        [
            compare(push_body(text), serde_push(text), text),
            compare(ack_batch_body(text), serde_ack_batch(text), text),
            compare(ack_body(text), serde_ack(text), text),
        ]
    }

    /// Whether the scanner read `text` (after checking it agrees with serde).
    fn compare<T: PartialEq + std::fmt::Debug>(
        scanned: Option<T>,
        serde: Option<T>,
        text: &str,
    ) -> bool {
        match (scanned, serde) {
            (Some(a), Some(b)) => {
                assert_eq!(a, b, "scanner and serde differ on {text}");
                true
            }
            (Some(a), None) => panic!("the scanner accepted what serde refuses: {text} -> {a:?}"),
            (None, _) => false,
        }
    }

    #[test]
    fn special_finds_the_first_quote_backslash_or_control_character() {
        let naive = |b: &[u8], from: usize| {
            (from..b.len()).find(|&i| b[i] == b'"' || b[i] == b'\\' || b[i] < 0x20)
        };
        let mut rng = Rng(7);
        let alphabet = [
            b'a', b'"', b'\\', 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0xc3, 0xff, 0x00,
        ];
        for _ in 0..20_000 {
            let len = (rng.next() % 40) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| match rng.next() % 4 {
                    0 => alphabet[(rng.next() % alphabet.len() as u64) as usize],
                    _ => b'x',
                })
                .collect();
            let from = (rng.next() as usize) % (len + 1);
            assert_eq!(
                special(&bytes, from),
                naive(&bytes, from),
                "{bytes:?} from {from}"
            );
        }
    }

    #[test]
    fn plain_bodies_are_read_as_serde_reads_them() {
        let push = r#"{"items":[{"queue":"q","partition":"p1","transactionId":"t-1","payload":{"seq":1,"pad":"xx","n":[1,-2.5,true,null,{}]}},{"queue":"q","payload":null}]}"#;
        assert_eq!(agree(push), [true, false, false]);
        let body = push_body(push).unwrap();
        assert_eq!(
            body.items[0].payload.as_ref().map(|p| p.0),
            Some(r#"{"seq":1,"pad":"xx","n":[1,-2.5,true,null,{}]}"#)
        );
        assert_eq!(body.items[1].payload, Some(JsonText("null")));
        assert_eq!(body.items[1].partition, None);

        let batch = r#" { "consumerGroup" : "g", "acknowledgments" : [ {"transactionId":"t","partitionId":"0190a0a0-0000-7000-8000-000000000001","leaseId":"l","status":"completed","extra":[1,{"a":"b"}]} ] } "#;
        assert_eq!(agree(batch), [false, true, false]);
        let ack = r#"{"transactionId":"t","partitionId":"p","status":"failed","error":"boom","leaseId":null}"#;
        assert_eq!(agree(ack), [false, false, true]);
    }

    #[test]
    fn bodies_outside_the_plain_form_are_left_to_serde() {
        for text in [
            r#"{"items":[{"queue":"q\u00e9","payload":1}]}"#,
            r#"{"items":[{"queue":"q","payload":"a\"b"}]}"#,
            r#"{"items":[{"queue":"q","payload":1e5}]}"#,
            r#"{"items":[{"queue":"q","queue":"r","payload":1}]}"#,
            r#"{"items":[{"queue":"q","payload":1}]} x"#,
            r#"{"items":[{"queue":"q","payload":01}]}"#,
            r#"{"items":[{"queue":"q","payload":[1,]}]}"#,
            r#"{"items":[{"queue":null,"payload":1}]}"#,
            r#"{"items":[["q"]]}"#,
            r#"{"items":{}}"#,
            "{\"items\":[{\"queue\":\"q\u{1}\",\"payload\":1}]}",
        ] {
            assert!(push_body(text).is_none(), "{text}");
            agree(text);
        }
    }

    /// A small deterministic generator (xorshift), so the test needs no crate and repeats.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[(self.next() % from.len() as u64) as usize]
        }
    }

    const VALUES: &[&str] = &[
        r#""s""#,
        r#""""#,
        r#""é ü""#,
        r#""a\nb""#,
        r#""q\"""#,
        "null",
        "true",
        "false",
        "nul",
        "0",
        "-0",
        "12",
        "-3.25",
        "1.",
        "1e3",
        "01",
        "-",
        "[]",
        "[1,2]",
        "[1,]",
        "{}",
        r#"{"a":1}"#,
        r#"{"a":}"#,
        r#"{"a" 1}"#,
        r#"[{"b":[null,"x"]}]"#,
        "[[[[[]]]]]",
        "\"\u{1}\"",
        r#"{"a":1,"a":2}"#,
        "7 ",
        " [ 1 , 2 ] ",
    ];
    const KEYS: &[&str] = &[
        "queue",
        "partition",
        "transactionId",
        "payload",
        "status",
        "partitionId",
        "leaseId",
        "consumerGroup",
        "error",
        "other",
        "items",
        "acknowledgments",
        "q\\u0075eue",
    ];

    fn object(rng: &mut Rng, keys: &[&str], depth: u32) -> String {
        let n = rng.next() % 6;
        let fields: Vec<String> = (0..n)
            .map(|_| format!(r#""{}":{}"#, rng.pick(keys), value(rng, depth)))
            .collect();
        format!("{{{}}}", fields.join(","))
    }

    fn value(rng: &mut Rng, depth: u32) -> String {
        match rng.next() % 5 {
            0 if depth < 3 => format!(
                "[{}]",
                (0..rng.next() % 4)
                    .map(|_| object(rng, KEYS, depth + 1))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            1 if depth < 3 => object(rng, KEYS, depth + 1),
            _ => rng.pick(VALUES).to_string(),
        }
    }

    /// An object with the given fields, each usually with its plain value, sometimes left out,
    /// given an odd value, or repeated, in a shuffled order, plus now and then an extra field.
    fn item(rng: &mut Rng, fields: &[(&str, &str)]) -> String {
        let mut parts: Vec<String> = Vec::new();
        for (key, plain) in fields {
            let value = match rng.next() % 10 {
                0 => continue,
                1 => rng.pick(VALUES).to_string(),
                _ => plain.to_string(),
            };
            parts.push(format!(r#""{key}":{value}"#));
        }
        for _ in 0..rng.next() % 3 {
            if rng.next().is_multiple_of(2) {
                let (key, _) = fields[(rng.next() % fields.len() as u64) as usize];
                parts.push(format!(r#""{key}":{}"#, rng.pick(VALUES)));
            }
        }
        for i in (1..parts.len()).rev() {
            parts.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        format!("{{{}}}", parts.join(","))
    }

    fn push_item_text(rng: &mut Rng) -> String {
        let payload = rng.pick(VALUES);
        item(
            rng,
            &[
                ("queue", r#""q""#),
                ("partition", r#""p1""#),
                ("transactionId", r#""t-1""#),
                ("payload", payload),
                ("other", "[1]"),
            ],
        )
    }

    fn ack_item_text(rng: &mut Rng) -> String {
        item(
            rng,
            &[
                ("transactionId", r#""t-2""#),
                ("partitionId", r#""p""#),
                ("status", r#""completed""#),
                ("leaseId", r#""l""#),
                ("consumerGroup", "null"),
                ("error", r#""e""#),
            ],
        )
    }

    fn list(rng: &mut Rng, one: fn(&mut Rng) -> String) -> String {
        let items: Vec<String> = (0..rng.next() % 4).map(|_| one(rng)).collect();
        format!("[{}]", items.join(","))
    }

    fn body(rng: &mut Rng) -> String {
        match rng.next() % 5 {
            0 => {
                let items = list(rng, push_item_text);
                item(rng, &[("items", &items), ("extra", "{}")])
            }
            1 => {
                let acks = list(rng, ack_item_text);
                item(
                    rng,
                    &[("consumerGroup", r#""g""#), ("acknowledgments", &acks)],
                )
            }
            2 => ack_item_text(rng),
            _ => object(rng, KEYS, 0),
        }
    }

    /// Cuts or corrupts a body at a random place, or pads it, to reach the form's edges.
    fn disturb(rng: &mut Rng, text: String) -> String {
        let at = (rng.next() as usize) % (text.len() + 1);
        let at = (0..=at)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        match rng.next() % 6 {
            0 => text[..at].to_string(),
            1 => format!(
                "{}{}{}",
                &text[..at],
                rng.pick(&[" ", ",", "\"", "}", "]", "\n", "x"]),
                &text[at..]
            ),
            2 => format!(" {text}\t"),
            _ => text,
        }
    }

    #[test]
    fn the_scanner_never_reads_a_body_otherwise_than_serde() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut read = [0usize; 3];
        for _ in 0..60_000 {
            let text = body(&mut rng);
            let text = disturb(&mut rng, text);
            for (count, hit) in read.iter_mut().zip(agree(&text)) {
                *count += usize::from(hit);
            }
        }
        // The comparison must have been exercised on every reader, not only on refusals.
        assert!(
            read.iter().all(|&n| n > 500),
            "bodies the scanner read: {read:?}"
        );
    }
}
