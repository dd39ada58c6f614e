//! Instance IDs: which invocation an instance executes.
//!
//! An ID is structured, not a string: a root and the path of steps that led from the
//! root to this child. A root is hex digits: drawn by a node (24 digits), or derived
//! from a client's idempotency key and the function (32 digits of a hash of both,
//! length-prefixed), so the two kinds never meet and a client can ask for the status
//! of either by the same route. The ID's encoding (bincode: length-prefixed root, then
//! the path) is what the step log's tag is derived from and what Init records carry,
//! so no key, of any characters, names the same instance as another key or as a child:
//! key `k.2` and step 2 of key `k` are different IDs with different step logs.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The longest idempotency key.
pub const IDEMPOTENCY_KEY_MAX: usize = 256;
/// The longest generated root ID, in hex digits.
const GENERATED_MAX: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InstanceId {
    /// Hex digits.
    root: String,
    /// The parent's step at which each descendant was called, from the root down.
    path: Vec<u32>,
}

impl InstanceId {
    /// A generated root ID: hex digits, as [`InstanceId::parse_generated`] accepts.
    pub fn generated(hex: &str) -> InstanceId {
        InstanceId::parse_generated(hex).expect("a generated ID is hex")
    }

    /// The ID of an invocation a client names (`GET /v1/invocations/{id}`): 1 to 64
    /// lowercase hex digits, as this platform hands out.
    pub fn parse_generated(s: &str) -> Result<InstanceId> {
        let ok = !s.is_empty() && s.len() <= GENERATED_MAX && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !ok {
            return Err(Error::InvalidArgument(format!("{s:?} is not an invocation ID (1 to {GENERATED_MAX} hex digits)")));
        }
        Ok(InstanceId { root: s.to_string(), path: Vec::new() })
    }

    /// Any ID as [`InstanceId`]'s `Display` writes it: a root's hex digits, then the
    /// step of each descendant (`root/3/1`): what inspection routes take.
    pub fn parse(s: &str) -> Result<InstanceId> {
        let mut parts = s.split('/');
        let mut id = InstanceId::parse_generated(parts.next().unwrap_or(""))?;
        for step in parts {
            let ok = !step.is_empty() && step.len() <= 10 && step.bytes().all(|b| b.is_ascii_digit());
            match step.parse::<u32>() {
                Ok(n) if ok && id.path.len() < 64 => id.path.push(n),
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "{s:?} is not an invocation ID (a root, then /step of each child)"
                    )))
                }
            }
        }
        Ok(id)
    }

    /// The ID of an invocation of `function` with an idempotency key: 1 to 256
    /// printable ASCII characters, any of them.
    pub fn keyed(function: &str, key: &str) -> Result<InstanceId> {
        if key.is_empty() || key.len() > IDEMPOTENCY_KEY_MAX || !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::InvalidArgument(format!(
                "an idempotency key is 1 to {IDEMPOTENCY_KEY_MAX} printable ASCII characters"
            )));
        }
        Ok(InstanceId::hashed(&("key", function, key)))
    }

    /// The invocation schedule `name` starts for its tick at `tick_ms`: the same on
    /// every node and for every definition of the schedule, so a tick fires once.
    pub fn scheduled(name: &str, tick_ms: u64) -> InstanceId {
        InstanceId::hashed(&("schedule", name, "tick", tick_ms))
    }

    /// The invocation the `n`-th trigger of schedule `name` starts.
    pub fn triggered(name: &str, n: u64) -> InstanceId {
        InstanceId::hashed(&("schedule", name, "trigger", n))
    }

    /// A root of 32 hex digits from a hash of `named` (whose first field says what
    /// kind of name it is, so kinds never meet).
    fn hashed(named: &impl Serialize) -> InstanceId {
        use sha2::{Digest, Sha256};
        let named = bincode::serialize(named).expect("names encode");
        InstanceId { root: hex(&Sha256::digest(named)[..16]), path: Vec::new() }
    }

    /// The child called at `step` of this instance.
    pub fn child(&self, step: u32) -> InstanceId {
        let mut path = self.path.clone();
        path.push(step);
        InstanceId { root: self.root.clone(), path }
    }

    /// Not a child invocation.
    pub fn is_root(&self) -> bool {
        self.path.is_empty()
    }

    /// The root invocation this instance descends from (itself for a root).
    pub fn root(&self) -> InstanceId {
        InstanceId { root: self.root.clone(), path: Vec::new() }
    }

    /// The unambiguous encoding tags are derived from.
    pub fn encode(&self) -> Vec<u8> {
        bincode::serialize(self).expect("IDs always encode")
    }
}

impl std::fmt::Display for InstanceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.root)?;
        for step in &self.path {
            write!(f, "/{step}")?;
        }
        Ok(())
    }
}

/// `bytes` in lowercase hex digits, two a byte (without a `format!` and a `String` a
/// byte: an invocation's root is derived on every request).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes.iter().flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]]).map(char::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Roots derived before `hex` existed keep their spelling: an idempotency key names
    /// the same invocation after an upgrade.
    #[test]
    fn hex_spells_bytes_as_format_did() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(hex(&all), all.iter().map(|b| format!("{b:02x}")).collect::<String>());
        assert_eq!(hex(&[]), "");
    }

    #[test]
    fn ids_parse_as_they_display() {
        let child = InstanceId::generated("ab12").child(3).child(0);
        assert_eq!(InstanceId::parse(&child.to_string()).unwrap(), child);
        let keyed = InstanceId::keyed("f", "k/1").unwrap();
        assert_eq!(InstanceId::parse(&keyed.to_string()).unwrap(), keyed);
        for bad in ["", "xyz", "ab/", "ab//1", "ab/-1", "ab/+1", "ab/99999999999", "AB", "ab/1/x"] {
            assert!(InstanceId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn keys_with_separators_never_name_a_child() {
        let k = InstanceId::keyed("f", "k").unwrap();
        let k2 = InstanceId::keyed("f", "k.2").unwrap();
        let slash = InstanceId::keyed("f", "k/2").unwrap();
        assert_ne!(k.child(2), k2);
        assert_ne!(k.child(2), slash);
        assert_ne!(k.child(2).encode(), k2.encode());
        assert_ne!(k.child(2).encode(), slash.encode());
        // Function and key are separate fields too.
        assert_ne!(InstanceId::keyed("f:a", "b").unwrap(), InstanceId::keyed("f", "a:b").unwrap());
        // A keyed root is a client-nameable ID that no node draws.
        assert_eq!(k.to_string().len(), 32);
        assert_eq!(InstanceId::parse_generated(&k.to_string()).unwrap(), k);
        assert_eq!(k.child(2).root(), k);
        assert!(!k.child(2).is_root());
        // Schedules' ticks and triggers are neither keys nor each other.
        let tick = InstanceId::scheduled("s", 2);
        assert_ne!(tick, InstanceId::triggered("s", 2));
        assert_ne!(tick, InstanceId::scheduled("s", 3));
        assert_ne!(tick, InstanceId::keyed("s", "2").unwrap());
        assert_eq!(InstanceId::parse_generated(&tick.to_string()).unwrap(), tick);
    }

    #[test]
    fn only_hex_names_a_generated_invocation() {
        assert!(InstanceId::parse_generated("00ff").is_ok());
        for bad in ["", "00FF", "x", "a.1", &"a".repeat(65)] {
            assert!(InstanceId::parse_generated(bad).is_err(), "{bad}");
        }
        for bad in ["", "a b", "é", &"k".repeat(257)] {
            assert!(InstanceId::keyed("f", bad).is_err(), "{bad:?}");
        }
    }
}
