//! Writing JSON answers by hand on the hot routes (pop, push, ack): one buffer per answer and no
//! owned string per field. Strings go through serde_json's escaping, so the text is what serde
//! would write.

use std::io::Write;

use uuid::Uuid;

/// `s` as a JSON string.
pub fn str(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail");
}

/// `s` as a JSON string, or `null`.
pub fn opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// `id` hyphenated, lower case, without quotes.
pub fn uuid(out: &mut Vec<u8>, id: Uuid) {
    let mut buf = Uuid::encode_buffer();
    out.extend_from_slice(id.hyphenated().encode_lower(&mut buf).as_bytes());
}

/// A JSON boolean.
pub fn bool(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

/// A JSON integer.
pub fn int(out: &mut Vec<u8>, n: usize) {
    write!(out, "{n}").expect("writing to a Vec cannot fail");
}
