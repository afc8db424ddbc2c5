//! Writing JSON answers by hand on the hot routes (pop, push, ack): one buffer per answer and no
//! owned string per field. Strings that need an escape go through serde_json's escaping, so the text is what serde
//! would write.

use uuid::Uuid;

/// `s` as a JSON string. Most strings (ids, names) need no escape: those are copied after one
/// branch-free scan; the rest go through serde_json's escaping.
pub fn str(out: &mut Vec<u8>, s: &str) {
    let plain = !s.bytes().fold(false, |esc, b| {
        esc | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if plain {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail");
    }
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

/// A JSON integer, its decimal digits written without the formatting machinery.
pub fn int(out: &mut Vec<u8>, n: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_integers_read_as_serde_writes_them() {
        for s in [
            "",
            "plain-id",
            "q\"uote",
            "back\\slash",
            "tab\tnew\nline",
            "\u{1}",
            "é ü 😀",
            "\u{7f}",
        ] {
            let mut out = Vec::new();
            str(&mut out, s);
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
        for n in [0usize, 7, 10, 99, 100, 12_345, usize::MAX] {
            let mut out = Vec::new();
            int(&mut out, n);
            assert_eq!(out, n.to_string().into_bytes());
        }
    }
}
