//! The segment blob: the compressed frames of one push for one partition.
//!
//! Only the broker packs and unpacks blobs; PostgreSQL stores them opaquely. A frame holds the
//! message id, the transactionId and the payload (JSON text). Layout before compression:
//! a format byte, the frame count (u32 LE), then per frame the 16-byte message id, the
//! transactionId length (u32 LE) and bytes, the payload length (u32 LE) and bytes. The whole is
//! LZ4-compressed with its uncompressed size prepended.
//!
//! Format byte 1 holds payloads as pushed; format byte 2 (queues with `encryptionEnabled`)
//! holds each payload sealed by `crypto::Sealer` (nonce, ciphertext, tag; the message id bound
//! as associated data), the rest of the layout unchanged. `decode_raw` gives back format 1
//! (payloads opened), which is all the segment cache and the pop path ever hold.

use uuid::Uuid;

use crate::crypto::{self, Sealer};

const FORMAT_V1: u8 = 1;
const FORMAT_SEALED: u8 = 2;

/// A frame as the push path packs it.
pub struct FrameRef<'a> {
    pub message_id: Uuid,
    pub transaction_id: &'a str,
    pub payload: &'a [u8],
}

/// A frame unpacked from a stored blob, its payload as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub message_id: Uuid,
    pub transaction_id: String,
    /// The payload as pushed, or sealed (see `sealed`).
    pub payload: Vec<u8>,
    /// The payload is sealed (an encrypted queue's segment): open it with `crypto::Sealer`.
    pub sealed: bool,
}

/// Packs and compresses frames into a blob.
pub fn pack(frames: &[FrameRef<'_>]) -> Vec<u8> {
    compress(&pack_raw(frames))
}

/// Packs frames into a blob, their payloads sealed when `sealer` is given (an encrypted queue).
pub fn pack_with(frames: &[FrameRef<'_>], sealer: Option<&Sealer>) -> Vec<u8> {
    let Some(sealer) = sealer else {
        return pack(frames);
    };
    let sealed: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| sealer.seal(f.payload, f.message_id))
        .collect();
    let refs: Vec<FrameRef<'_>> = frames
        .iter()
        .zip(&sealed)
        .map(|(f, payload)| FrameRef {
            message_id: f.message_id,
            transaction_id: f.transaction_id,
            payload,
        })
        .collect();
    let mut raw = pack_raw(&refs);
    raw[0] = FORMAT_SEALED;
    compress(&raw)
}

/// Lays frames out uncompressed (what `compress` turns into a blob, and what the segment cache
/// indexes without decompressing).
pub fn pack_raw(frames: &[FrameRef<'_>]) -> Vec<u8> {
    let size: usize = frames
        .iter()
        .map(|f| 24 + f.transaction_id.len() + f.payload.len())
        .sum();
    let mut raw = Vec::with_capacity(5 + size);
    raw.push(FORMAT_V1);
    raw.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    for f in frames {
        raw.extend_from_slice(f.message_id.as_bytes());
        raw.extend_from_slice(&(f.transaction_id.len() as u32).to_le_bytes());
        raw.extend_from_slice(f.transaction_id.as_bytes());
        raw.extend_from_slice(&(f.payload.len() as u32).to_le_bytes());
        raw.extend_from_slice(f.payload);
    }
    raw
}

/// Compresses an uncompressed segment into a blob.
pub fn compress(raw: &[u8]) -> Vec<u8> {
    lz4_flex::compress_prepend_size(raw)
}

/// Decompresses a blob into its uncompressed layout.
pub fn decompress(blob: &[u8]) -> Result<Vec<u8>, String> {
    lz4_flex::decompress_size_prepended(blob).map_err(|e| format!("corrupt segment: {e}"))
}

/// Decompresses a blob into the format-1 layout: a sealed segment's payloads are opened with
/// `sealer` (an error naming the message when there is no key or it does not open them).
pub fn decode_raw(blob: &[u8], sealer: Option<&Sealer>) -> Result<Vec<u8>, String> {
    let raw = decompress(blob)?;
    if raw.first() != Some(&FORMAT_SEALED) {
        return Ok(raw);
    }
    let frames = unpack_raw(&raw)?;
    let opened = frames
        .iter()
        .map(|f| crypto::open_with(sealer, &f.payload, f.message_id))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<FrameRef<'_>> = frames
        .iter()
        .zip(&opened)
        .map(|(f, payload)| FrameRef {
            message_id: f.message_id,
            transaction_id: &f.transaction_id,
            payload,
        })
        .collect();
    Ok(pack_raw(&refs))
}

/// Decompresses and unpacks every frame of a blob, payloads as stored (see `Frame::sealed`).
pub fn unpack(blob: &[u8]) -> Result<Vec<Frame>, String> {
    unpack_raw(&decompress(blob)?)
}

/// Unpacks an uncompressed segment of either format.
fn unpack_raw(raw: &[u8]) -> Result<Vec<Frame>, String> {
    let sealed = raw.first() == Some(&FORMAT_SEALED);
    let mut r = Cursor::new(raw);
    if sealed {
        r.take(1)?;
    } else {
        r.header()?;
    }
    let count = r.u32()? as usize;
    let mut frames = Vec::with_capacity(count.min(1 << 16));
    for _ in 0..count {
        let message_id = Uuid::from_slice(r.take(16)?).map_err(|e| e.to_string())?;
        let len = r.u32()? as usize;
        let transaction_id = String::from_utf8(r.take(len)?.to_vec())
            .map_err(|_| "segment holds a transactionId that is not UTF-8".to_string())?;
        let len = r.u32()? as usize;
        let payload = r.take(len)?.to_vec();
        frames.push(Frame {
            message_id,
            transaction_id,
            payload,
            sealed,
        });
    }
    Ok(frames)
}

/// Reads an uncompressed segment front to back, refusing truncation.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Cursor<'a> {
        Cursor { buf, pos: 0 }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The format byte.
    pub(crate) fn header(&mut self) -> Result<(), String> {
        if self.take(1)?[0] != FORMAT_V1 {
            return Err("segment has an unknown format".into());
        }
        Ok(())
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or_else(|| "segment is truncated".to_string())?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let ids = [Uuid::now_v7(), Uuid::now_v7()];
        let frames = [
            FrameRef {
                message_id: ids[0],
                transaction_id: "t-1",
                payload: br#"{"a":1}"#,
            },
            FrameRef {
                message_id: ids[1],
                transaction_id: "",
                payload: b"null",
            },
        ];
        let out = unpack(&pack(&frames)).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].message_id, ids[0]);
        assert_eq!(out[0].transaction_id, "t-1");
        assert_eq!(out[0].payload, br#"{"a":1}"#);
        assert_eq!(out[1].transaction_id, "");
        assert_eq!(out[1].payload, b"null");
    }

    #[test]
    fn sealed_segments_hide_payloads_and_decode_to_format_one() {
        let sealer = Sealer::new(&[3; 32]);
        let id = Uuid::now_v7();
        let frames = [FrameRef {
            message_id: id,
            transaction_id: "t",
            payload: br#"{"secret":"plain"}"#,
        }];
        let blob = pack_with(&frames, Some(&sealer));
        let stored = unpack(&blob).unwrap();
        assert!(stored[0].sealed);
        assert!(!decompress(&blob)
            .unwrap()
            .windows(6)
            .any(|w| w == b"secret"));
        assert_eq!(decode_raw(&blob, Some(&sealer)).unwrap(), pack_raw(&frames));
        assert!(decode_raw(&blob, None).is_err(), "no key");
        assert!(
            decode_raw(&blob, Some(&Sealer::new(&[4; 32]))).is_err(),
            "another key"
        );
        assert_eq!(decode_raw(&pack(&frames), None).unwrap(), pack_raw(&frames));
    }

    #[test]
    fn corrupt_blobs_are_errors_not_panics() {
        assert!(unpack(b"").is_err());
        assert!(unpack(&[5, 0, 0, 0, 1, 2, 3]).is_err());
        let mut blob = pack(&[FrameRef {
            message_id: Uuid::nil(),
            transaction_id: "x",
            payload: b"1",
        }]);
        blob.truncate(blob.len() - 2);
        assert!(unpack(&blob).is_err());
    }
}
