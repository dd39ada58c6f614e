//! The targets, a module per part of the system: the shared log's wire and disk formats
//! (`log.rs`), the exactly-once core's records and the state store's entries
//! (`durable.rs`), what the host takes from HTTP functions, deploys and guests
//! (`host.rs`), and the gateway's tokens and parameters (`gateway.rs`).
//!
//! Inputs that carry several things (a record and the key it is read for, a text and a
//! time) split them with [`fields`]; a target over several decoders picks one with the
//! first byte ([`pick`]), so that one decoder's bytes are also tried on the others.

pub mod durable;
pub mod gateway;
pub mod host;
pub mod log;

use crate::Target;

/// Every target, in the order the test command runs them.
pub const ALL: &[Target] = &[
    log::FRAMES,
    log::RECORD_META,
    log::RECORD_JOURNAL,
    log::METALOG_JOURNAL,
    log::METALOG_ENTRIES,
    log::ETCD_VALUES,
    durable::STEP_RECORDS,
    durable::WRITE_LOG,
    durable::CORE_RECORDS,
    durable::SCHEDULE_STATE,
    durable::CRON,
    durable::STATE_ENTRIES,
    host::HTTP_MESSAGES,
    host::MANIFESTS,
    host::ROUTES,
    host::OUTBOUND,
    host::SECRETS,
    host::GUEST_ARGS,
    host::OBJECTS,
    gateway::TOKENS,
    gateway::GATEWAY_PARAMS,
];

/// Separates the fields of an input: a byte that UTF-8 text never holds.
pub const SEP: u8 = 0xff;

/// The first `N - 1` fields of `data` separated by [`SEP`], and the rest as the last;
/// missing fields are empty.
pub fn fields<const N: usize>(data: &[u8]) -> [&[u8]; N] {
    let mut out = [&data[data.len()..]; N];
    let mut rest = data;
    for field in out.iter_mut().take(N - 1) {
        match rest.iter().position(|b| *b == SEP) {
            Some(at) => {
                *field = &rest[..at];
                rest = &rest[at + 1..];
            }
            None => {
                *field = rest;
                rest = &rest[rest.len()..];
            }
        }
    }
    out[N - 1] = rest;
    out
}

/// `parts` joined by [`SEP`]: an input for [`fields`].
pub fn join(parts: &[&[u8]]) -> Vec<u8> {
    parts.join(&SEP)
}

/// The first byte, which picks one of `n` decoders, and the rest.
pub fn pick(data: &[u8], n: u8) -> Option<(u8, &[u8])> {
    let (first, rest) = data.split_first()?;
    Some((first % n, rest))
}

/// `bytes` after the byte that picks decoder `which`.
pub fn picked(which: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![which];
    out.extend_from_slice(bytes);
    out
}

/// Text as an API that takes `&str` gets it: bytes that are not UTF-8 are replaced, so
/// that they still reach the parser.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `u64` from the first 8 bytes (little endian, zeros for missing ones) and the rest.
pub fn take_u64(data: &[u8]) -> (u64, &[u8]) {
    let n = data.len().min(8);
    let mut bytes = [0; 8];
    bytes[..n].copy_from_slice(&data[..n]);
    (u64::from_le_bytes(bytes), &data[n..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_split_on_the_separator_and_the_last_takes_the_rest() {
        let input = join(&[b"a", b"", b"c\xffd"]);
        assert_eq!(fields::<3>(&input), [&b"a"[..], b"", b"c\xffd"]);
        assert_eq!(fields::<3>(b"only"), [&b"only"[..], b"", b""]);
        assert_eq!(fields::<1>(b"x\xffy"), [&b"x\xffy"[..]]);
    }

    #[test]
    fn target_names_are_unique() {
        let mut names: Vec<&str> = ALL.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
    }
}
