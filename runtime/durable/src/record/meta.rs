//! What an invocation's Init and Result records carry besides their steps: when it
//! started and ended, its trace, and where its time went.
//!
//! A [`Meta`] is a trailer after the record's step, marked by [`META_MARK`]: every node
//! decodes records with trailing bytes allowed, so a node that predates trailers reads
//! the step and ignores it, and a record without one reads as it always did. A trailer
//! is observability, never protocol: no decision of the exactly-once layer reads it, two
//! peers' records of one step may carry different trailers, and a corrupt trailer reads
//! as none.

use serde::{Deserialize, Serialize};

/// The byte that begins a trailer as the first nodes with trailers wrote it (bincode,
/// fixed-width integers, part names spelled out): read, no longer written.
pub const META_MARK: u8 = 0xA7;

/// The byte that begins a compact trailer (`encode_compact`), a third of the size.
pub const META_MARK_COMPACT: u8 = 0xA8;

/// The parts a node names, by their index in a compact trailer (any other name is
/// spelled out there).
const KNOWN_PARTS: [&str; 15] = [
    "queue",
    "instantiate",
    "guest",
    "host-state",
    "host-log",
    "host-objects",
    "host-queues",
    "host-locks",
    "host-context",
    "host-config",
    "children",
    "outgoing",
    "log",
    "store",
    "platform",
];

/// A part's name spelled out in a compact trailer: this byte, its length, its bytes.
const NAMED: u8 = 0xFF;

/// The most parts a breakdown keeps (a longer one is cut).
pub const PARTS_MAX: usize = 32;

/// The trailer of an Init or Result record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// Wall milliseconds (Unix epoch) when the execution that logged the Init began.
    pub started_ms: Option<u64>,
    /// Wall milliseconds when the Result was logged.
    pub ended_ms: Option<u64>,
    /// The W3C trace the execution that logged the record belongs to.
    pub trace: Option<TraceRef>,
    /// Where the execution's time went up to its Result, in microseconds per part
    /// (`queue`, `guest`, `log`, ...; the node names them), parts in the order measured.
    pub parts: Vec<(String, u64)>,
}

/// A W3C trace context: the trace and the span that logged the record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceRef {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
}

impl TraceRef {
    /// The trace ID in lowercase hex, as `traceparent` writes it.
    pub fn trace_hex(&self) -> String {
        crate::id::hex(&self.trace_id)
    }

    /// The span ID in lowercase hex.
    pub fn span_hex(&self) -> String {
        crate::id::hex(&self.span_id)
    }
}

impl Meta {
    /// Whether the trailer says nothing (it is then not written).
    pub fn is_empty(&self) -> bool {
        *self == Meta::default()
    }

    /// The wall time of the breakdown's parts together, in microseconds.
    pub fn total_us(&self) -> u64 {
        self.parts.iter().fold(0u64, |t, (_, us)| t.saturating_add(*us))
    }
}

fn options() -> impl bincode::Options {
    use bincode::Options as _;
    bincode::DefaultOptions::new().with_fixint_encoding().allow_trailing_bytes().with_limit(super::RECORD_LIMIT)
}

/// Whether `steps` (one record's) hold an Init and a Result: the records with a trailer.
pub fn ends(steps: &[super::Step]) -> (bool, bool) {
    let began = steps.iter().any(super::Step::is_init);
    let ended = steps.iter().any(|s| matches!(s, super::Step::Result(super::kind::Result { .. })));
    (began, ended)
}

/// `record` (as [`super::encode`] made it) with `meta` after it, unless `meta` is empty.
pub fn with_meta(record: bytes::Bytes, meta: &Meta) -> bytes::Bytes {
    if meta.is_empty() {
        return record;
    }
    let mut out = Vec::with_capacity(record.len() + 64);
    out.extend_from_slice(&record);
    out.push(META_MARK_COMPACT);
    encode_compact(meta, &mut out);
    bytes::Bytes::from(out)
}

/// The trailer of a record that holds `T` (a [`super::Step`]), if it has one. A record
/// that does not decode, or whose trailer does not, has none.
pub fn meta_of<T: serde::de::DeserializeOwned>(record: &[u8]) -> Option<Meta> {
    use bincode::Options as _;
    if record.first() != Some(&super::FORMAT) {
        return None;
    }
    let mut rest = &record[1..];
    let _: T = options().deserialize_from(&mut rest).ok()?;
    match rest.split_first() {
        Some((&META_MARK_COMPACT, trailer)) => decode_compact(trailer),
        Some((&META_MARK, trailer)) => options().deserialize(trailer).ok(),
        _ => None,
    }
}

/// `meta` compactly: a byte of flags (a start, an end, a trace), the start as 8 bytes
/// little-endian, the end as a LEB128 offset from the start (or itself without one), the
/// trace's 24 bytes, then the parts: their count, and each a known name's index (or
/// [`NAMED`], a length byte and the name, cut to 255 bytes at a character's boundary)
/// and LEB128 microseconds.
fn encode_compact(meta: &Meta, out: &mut Vec<u8>) {
    let flags =
        u8::from(meta.started_ms.is_some()) | u8::from(meta.ended_ms.is_some()) << 1 | u8::from(meta.trace.is_some()) << 2;
    out.push(flags);
    if let Some(started) = meta.started_ms {
        out.extend_from_slice(&started.to_le_bytes());
    }
    if let Some(ended) = meta.ended_ms {
        leb128(out, ended.wrapping_sub(meta.started_ms.unwrap_or(0)));
    }
    if let Some(t) = &meta.trace {
        out.extend_from_slice(&t.trace_id);
        out.extend_from_slice(&t.span_id);
    }
    let parts = &meta.parts[..meta.parts.len().min(PARTS_MAX)];
    out.push(parts.len() as u8);
    for (name, us) in parts {
        match KNOWN_PARTS.iter().position(|k| k == name) {
            Some(i) => out.push(i as u8),
            None => {
                let name = &name.as_bytes()[..name_cut(name)];
                out.extend_from_slice(&[NAMED, name.len() as u8]);
                out.extend_from_slice(name);
            }
        }
        leb128(out, *us);
    }
}

/// `meta` as a trailer keeps it: at most [`PARTS_MAX`] parts, names cut to 255 bytes at a
/// character's boundary (what `with_meta` then `meta_of` give back).
#[cfg(any(test, feature = "fuzzing"))]
pub fn as_written(mut meta: Meta) -> Meta {
    meta.parts.truncate(PARTS_MAX);
    for (name, _) in &mut meta.parts {
        name.truncate(name_cut(name));
    }
    meta
}

/// Where a part's name is cut in a compact trailer.
fn name_cut(name: &str) -> usize {
    (0..=name.len().min(255)).rev().find(|&i| name.is_char_boundary(i)).unwrap_or(0)
}

fn decode_compact(mut b: &[u8]) -> Option<Meta> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (b.get(..n)?, b.get(n..)?);
        *b = rest;
        Some(head)
    }
    let flags = take(&mut b, 1)?[0];
    let started_ms = (flags & 1 != 0).then(|| take(&mut b, 8).map(|v| u64::from_le_bytes(v.try_into().expect("8 bytes"))));
    let started_ms = started_ms.flatten();
    let ended_ms = match flags & 2 != 0 {
        true => Some(read_leb128(&mut b)?.wrapping_add(started_ms.unwrap_or(0))),
        false => None,
    };
    let trace = match flags & 4 != 0 {
        true => {
            let ids = take(&mut b, 24)?;
            Some(TraceRef { trace_id: ids[..16].try_into().ok()?, span_id: ids[16..].try_into().ok()? })
        }
        false => None,
    };
    let count = take(&mut b, 1)?[0] as usize;
    if count > PARTS_MAX {
        return None;
    }
    let mut parts = Vec::with_capacity(count);
    for _ in 0..count {
        let name = match take(&mut b, 1)?[0] {
            NAMED => {
                let len = take(&mut b, 1)?[0] as usize;
                String::from_utf8(take(&mut b, len)?.to_vec()).ok()?
            }
            i => (*KNOWN_PARTS.get(usize::from(i))?).to_string(),
        };
        parts.push((name, read_leb128(&mut b)?));
    }
    Some(Meta { started_ms, ended_ms, trace, parts })
}

fn leb128(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_leb128(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f).checked_shl(7 * i as u32)?;
        if byte & 0x80 == 0 {
            *b = &b[i + 1..];
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{decode_steps, encode, kind, Outcome, Step};

    fn result() -> Step {
        Step::Result(kind::Result { outcome: Outcome::Ok(bytes::Bytes::from_static(b"done")) })
    }

    #[test]
    fn a_trailer_is_read_back_and_ignored_by_step_decoding() {
        let meta = Meta {
            started_ms: Some(1),
            ended_ms: Some(2),
            trace: Some(TraceRef { trace_id: [7; 16], span_id: [9; 8] }),
            parts: vec![("guest".into(), 50_000), ("log".into(), 120)],
        };
        let plain = encode(&result());
        let record = with_meta(plain.clone(), &meta);
        assert!(record.len() > plain.len());
        assert_eq!(decode_steps("step", &record).expect("decodes"), result());
        assert_eq!(meta_of::<Step>(&record), Some(meta));
        assert_eq!(meta_of::<Step>(&plain), None);
    }

    #[test]
    fn compact_trailers_round_trip_and_the_first_encoding_still_reads() {
        let metas = [
            Meta {
                started_ms: Some(1_764_000_000_123),
                ended_ms: Some(1_764_000_000_456),
                trace: Some(TraceRef { trace_id: [1; 16], span_id: [2; 8] }),
                parts: vec![("queue".into(), 3), ("guest".into(), 50_000), ("platform".into(), 0)],
            },
            Meta {
                started_ms: None,
                ended_ms: Some(u64::MAX),
                trace: None,
                parts: vec![("a part of later nodes".into(), u64::MAX)],
            },
            Meta { started_ms: Some(u64::MAX), ended_ms: Some(0), trace: None, parts: Vec::new() },
            Meta { parts: vec![("é".repeat(200), 1)], ..Meta::default() },
        ];
        for meta in metas {
            let record = with_meta(encode(&result()), &meta);
            assert_eq!(meta_of::<Step>(&record), Some(as_written(meta.clone())), "{meta:?}");
        }
        let meta = Meta { started_ms: Some(5), parts: vec![("guest".into(), 9)], ..Meta::default() };
        let compact = with_meta(encode(&result()), &meta);
        let mut first = encode(&result()).to_vec();
        first.push(META_MARK);
        bincode::Options::serialize_into(options(), &mut first, &meta).unwrap();
        assert_eq!(meta_of::<Step>(&first), Some(meta), "the first encoding");
        let plain = encode(&result()).len();
        assert!((compact.len() - plain) * 2 < first.len() - plain, "{} against {}", compact.len(), first.len());
        for cut in 1..compact.len() - encode(&result()).len() {
            let _ = meta_of::<Step>(&compact[..compact.len() - cut]);
        }
    }

    #[test]
    fn an_empty_trailer_is_not_written_and_a_corrupt_one_reads_as_none() {
        let plain = encode(&result());
        assert_eq!(with_meta(plain.clone(), &Meta::default()), plain);
        let mut corrupt = plain.to_vec();
        corrupt.extend_from_slice(&[META_MARK, 1, 2]);
        assert_eq!(decode_steps("step", &corrupt).expect("the step still decodes"), result());
        assert_eq!(meta_of::<Step>(&corrupt), None);
        let mut other = plain.to_vec();
        other.push(0x11);
        assert_eq!(meta_of::<Step>(&other), None);
        assert_eq!(meta_of::<Step>(&[]), None);
    }

    #[test]
    fn a_long_breakdown_is_cut() {
        let meta = Meta { parts: (0..100).map(|i| (format!("p{i}"), i)).collect(), ..Meta::default() };
        let got = meta_of::<Step>(&with_meta(encode(&result()), &meta)).expect("a trailer");
        assert_eq!(got.parts.len(), PARTS_MAX);
    }
}
