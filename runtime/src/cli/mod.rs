//! The `tally` binary's commands that are not the node: what it prints for people, and
//! `tally new` and `tally build` for every guest language.

pub mod build;
pub mod new;
pub mod output;
pub mod sdk;
pub mod tools;

/// 64-bit FNV-1a: a hash that names cache directories after their contents or paths,
/// stable across Rust versions (unlike the standard library's hashers).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}
