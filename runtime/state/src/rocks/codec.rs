//! The encoding of the store's keys and entries (the layout is in `mod.rs`).

use bytes::Bytes;
use tally_state_api::{StateError, Value, Version};

const TAG_TOMBSTONE: u8 = 0;
const TAG_VALUE: u8 = 1;

/// The key part of a stored entry's RocksDB key under the table prefix `table_prefix`
/// (`len(key) | key [| version]`).
pub(crate) fn stored_key(raw: &[u8], table_prefix: usize) -> Result<&[u8], StateError> {
    let rest = &raw[table_prefix..];
    let len = rest
        .get(..4)
        .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")) as usize)
        .ok_or_else(|| StateError::Corrupt("a key without its length".into()))?;
    rest.get(4..4 + len).ok_or_else(|| StateError::Corrupt("a key shorter than its length".into()))
}

pub(crate) fn object_key(table: &str, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + table.len() + key.len() + 8);
    for part in [table.as_bytes(), key] {
        let len = u32::try_from(part.len()).expect("table and key are under 4 GiB");
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

pub(crate) fn version_key(prefix: &[u8], version: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + 8);
    out.extend_from_slice(prefix);
    out.extend_from_slice(&version.to_be_bytes());
    out
}

pub(crate) fn decode_version_suffix(k: &[u8], prefix_len: usize) -> Result<u64, StateError> {
    let suffix: [u8; 8] =
        k[prefix_len..].try_into().map_err(|_| StateError::Corrupt(format!("version key of {} bytes", k.len())))?;
    Ok(u64::from_be_bytes(suffix))
}

pub(crate) fn encode_value(header: &[u8], value: &Value) -> Vec<u8> {
    let len = value.as_ref().map_or(0, Bytes::len);
    let mut out = Vec::with_capacity(header.len() + 1 + len);
    out.extend_from_slice(header);
    match value {
        Some(bytes) => {
            out.push(TAG_VALUE);
            out.extend_from_slice(bytes);
        }
        None => out.push(TAG_TOMBSTONE),
    }
    out
}

pub(crate) fn decode_value(raw: &[u8]) -> Result<Value, StateError> {
    match raw.split_first() {
        Some((&TAG_VALUE, rest)) => Ok(Some(Bytes::copy_from_slice(rest))),
        Some((&TAG_TOMBSTONE, [])) => Ok(None),
        _ => Err(StateError::Corrupt(format!("value entry of {} bytes", raw.len()))),
    }
}

/// A latest entry's value: its version (cursor, then counter, big-endian), then the
/// value as [`encode_value`] writes it.
pub(crate) fn latest_entry(version: Version, value: &Value) -> Vec<u8> {
    let mut header = [0; 12];
    header[..8].copy_from_slice(&version.cursor.to_be_bytes());
    header[8..].copy_from_slice(&version.counter.to_be_bytes());
    encode_value(&header, value)
}

pub(crate) fn decode_latest(raw: &[u8]) -> Result<(Version, Value), StateError> {
    if raw.len() < 12 {
        return Err(StateError::Corrupt(format!("latest entry of {} bytes", raw.len())));
    }
    let cursor = u64::from_be_bytes(raw[..8].try_into().expect("8 bytes"));
    let counter = u32::from_be_bytes(raw[8..12].try_into().expect("4 bytes"));
    Ok((Version { cursor, counter }, decode_value(&raw[12..])?))
}
