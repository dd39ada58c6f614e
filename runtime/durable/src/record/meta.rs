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

/// The byte that begins a trailer.
pub const META_MARK: u8 = 0xA7;

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
    use bincode::Options as _;
    if meta.is_empty() {
        return record;
    }
    let mut out = Vec::with_capacity(record.len() + 64);
    out.extend_from_slice(&record);
    out.push(META_MARK);
    let mut meta = meta.clone();
    meta.parts.truncate(PARTS_MAX);
    options().serialize_into(&mut out, &meta).expect("a trailer always encodes");
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
        Some((&META_MARK, trailer)) => options().deserialize(trailer).ok(),
        _ => None,
    }
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
