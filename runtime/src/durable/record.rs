//! What the exactly-once protocols write to the log, and the tags they write it under.
//!
//! Every record is one [`Step`] or [`Transition`], encoded with bincode. Tags are
//! platform tags (top bit set) of the invocation's book, derived by hashing:
//!
//! ```text
//!   step_tag(id)            the instance's step log: Init, then one record per logged step
//!   object_tag(table, key)  read-optimized write log of one object (Write records)
//!   transition_tag(table)   the table's protocol history (Transition records)
//!   INSTANCES               every Init and Result of the book (the recovery scan)
//! ```
//!
//! A hash may collide, so every record names what it is about (the instance ID, the
//! table and key) and readers skip or refuse records that are not theirs.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tally_logsvc::Tag;

use crate::config::Protocol;
use crate::error::RuntimeError;

/// One record of an instance's step log. The position of a record in the step log is
/// its step number; `Init` is step 0.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    /// The invocation started: what is needed to run it again.
    Init { id: String, function: String, root: bool, input: Bytes },
    /// A version number allocated by a migration (its seqnum; outside any step log).
    PreWrite,
    /// A read-optimized write, also in the object's write log: from here on `version`
    /// (stored before this record was appended) is the object's value for readers at or
    /// past this record.
    ///
    /// Also written outside any step log by a switch to read-optimized, to carry a
    /// write-optimized value over (`migrated_from` is that value's version cursor): such
    /// a record is void if the object's previous write-log record is a write newer than
    /// that cursor (a transitional write that raced the migration; see `switch.rs`).
    Write { table: String, key: Bytes, version: u64, migrated_from: Option<u64> },
    /// Symmetric write: logged before the store is written; the seqnum is the version.
    LoggedWrite { table: String, key: Bytes, value: Option<Bytes> },
    /// A logged read (write-optimized, symmetric, transitional) and what it returned.
    Read { value: Option<Bytes> },
    /// A child invocation's final outcome.
    Invoke { outcome: Outcome },
    /// The invocation's final outcome.
    Result { outcome: Outcome },
}

impl Step {
    /// The step's kind, to compare a re-execution with the recorded history.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::Init { .. } => "init",
            Step::PreWrite => "pre-write",
            Step::Write { .. } => "write",
            Step::LoggedWrite { .. } => "logged-write",
            Step::Read { .. } => "read",
            Step::Invoke { .. } => "invoke",
            Step::Result { .. } => "result",
        }
    }
}

/// A final outcome, as logged: a re-execution or a retried request gets it back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Ok(Bytes),
    Failed(String),
    Trap(String),
    MemoryLimit(u64),
    TooLarge { size: Option<u64>, limit: u64 },
    Timeout(u64),
}

impl Outcome {
    /// The outcome of a finished attempt, or `None` when the error is transient (the
    /// invocation should run again rather than have it as its result).
    /// Outputs over [`PAYLOAD_MAX`](super::PAYLOAD_MAX) become `TooLarge` (the result
    /// is logged in one record) and messages are cut to [`MESSAGE_MAX`] bytes.
    pub fn of_final(result: &Result<Vec<u8>, RuntimeError>) -> Option<Outcome> {
        let limit = super::PAYLOAD_MAX;
        match result {
            Ok(out) if out.len() > limit => Some(Outcome::TooLarge { size: Some(out.len() as u64), limit: limit as u64 }),
            Ok(out) => Some(Outcome::Ok(Bytes::copy_from_slice(out))),
            Err(RuntimeError::Failed(m)) => Some(Outcome::Failed(cut(m))),
            Err(RuntimeError::MemoryLimit(n)) => Some(Outcome::MemoryLimit(*n)),
            Err(RuntimeError::TooLarge { size, limit, .. }) => Some(Outcome::TooLarge { size: *size, limit: *limit }),
            _ => None,
        }
    }

    /// A failure logged as the result once retrying it is given up.
    pub fn of_given_up(e: &RuntimeError) -> Outcome {
        match e {
            RuntimeError::Timeout(ms) => Outcome::Timeout(*ms),
            RuntimeError::Trap(m) => Outcome::Trap(cut(m)),
            other => Outcome::Failed(cut(&format!("gave up: {other}"))),
        }
    }

    pub fn into_result(self) -> Result<Vec<u8>, RuntimeError> {
        match self {
            Outcome::Ok(b) => Ok(b.to_vec()),
            Outcome::Failed(m) => Err(RuntimeError::Failed(m)),
            Outcome::Trap(m) => Err(RuntimeError::Trap(m)),
            Outcome::MemoryLimit(n) => Err(RuntimeError::MemoryLimit(n)),
            Outcome::TooLarge { size, limit } => Err(RuntimeError::TooLarge { what: "the response", size, limit }),
            Outcome::Timeout(ms) => Err(RuntimeError::Timeout(ms)),
        }
    }
}

/// The longest error message logged as an outcome.
pub const MESSAGE_MAX: usize = 16 << 10;

/// `m`, cut at a character boundary to at most [`MESSAGE_MAX`] bytes.
pub fn cut(m: &str) -> String {
    if m.len() <= MESSAGE_MAX {
        return m.to_string();
    }
    let mut end = MESSAGE_MAX;
    while !m.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &m[..end])
}

/// One record of a table's transition log (Halfmoon §4.7). An instance uses the
/// protocol of the last record at or before its init record (the first record if none:
/// nobody used the table before it existed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Transition {
    /// `protocol` from here on; `auto` lets the runtime switch it from observed rates.
    End { table: String, protocol: Protocol, auto: bool },
    /// A switch from `from` to `to` began: instances starting now use the transitional
    /// protocol, until the End that follows once every earlier instance finished.
    Begin { table: String, from: Protocol, to: Protocol, auto: bool },
}

impl Transition {
    pub fn table(&self) -> &str {
        match self {
            Transition::End { table, .. } | Transition::Begin { table, .. } => table,
        }
    }
}

/// Records are small: a bincode limit just over the engine's record limit turns a
/// corrupt length prefix into an error instead of an allocation.
const RECORD_LIMIT: u64 = 2 << 20;

pub fn encode<T: Serialize>(value: &T) -> Bytes {
    Bytes::from(bincode::serialize(value).expect("steps and transitions always encode"))
}

pub fn decode<T: serde::de::DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T, RuntimeError> {
    use bincode::Options as _;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .allow_trailing_bytes()
        .with_limit(RECORD_LIMIT)
        .deserialize(bytes)
        .map_err(|e| RuntimeError::Internal(format!("corrupt {what} record: {e}")))
}

/// FNV-1a over a domain and length-prefixed parts, as a platform tag (never 0).
fn platform_tag(domain: &str, parts: &[&[u8]]) -> Tag {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(domain.as_bytes());
    for part in parts {
        eat(&(part.len() as u32).to_be_bytes());
        eat(part);
    }
    Tag::platform(h)
}

pub fn step_tag(id: &str) -> Tag {
    platform_tag("step", &[id.as_bytes()])
}

pub fn object_tag(table: &str, key: &[u8]) -> Tag {
    platform_tag("object", &[table.as_bytes(), key])
}

pub fn transition_tag(table: &str) -> Tag {
    platform_tag("transition", &[table.as_bytes()])
}

/// The stream of every Init and Result record of a book.
pub fn instances_tag() -> Tag {
    platform_tag("instances", &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_round_trip_and_garbage_is_an_error() {
        let steps = [
            Step::Init { id: "a.1".into(), function: "f".into(), root: false, input: Bytes::from_static(b"in") },
            Step::PreWrite,
            Step::Write { table: "t".into(), key: Bytes::from_static(b"\0k"), version: u64::MAX, migrated_from: Some(3) },
            Step::Read { value: None },
            Step::Result { outcome: Outcome::TooLarge { size: None, limit: 7 } },
        ];
        for s in steps {
            assert_eq!(decode::<Step>("step", &encode(&s)).unwrap(), s);
        }
        assert!(decode::<Step>("step", &[0xff; 3]).is_err());
        assert!(decode::<Step>("step", &[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]).is_err());
    }

    #[test]
    fn tags_are_platform_tags_that_separate_their_parts() {
        let tags = [step_tag("ab"), object_tag("a", b"b"), object_tag("ab", b""), transition_tag("ab"), instances_tag()];
        for (i, t) in tags.iter().enumerate() {
            assert!(t.is_reserved());
            for u in &tags[i + 1..] {
                assert_ne!(t, u);
            }
        }
    }
}
