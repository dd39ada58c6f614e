//! How the RocksDB backend encodes entries, as `tally-fuzz` calls it: the keys and
//! values a read takes back from the database, decoded by the functions reads use.

use tally_state_api::{StateError, Value, Version};

use crate::rocks::{decode_latest, decode_value, decode_version_suffix, latest_entry, object_key, stored_key, version_key};

/// The key of version `version` of `(table, key)`, and its value.
pub fn version_entry(table: &str, key: &[u8], version: u64, value: &Value) -> (Vec<u8>, Vec<u8>) {
    (version_key(&object_key(table, key), version), crate::rocks::encode_value(&[], value))
}

/// A version entry as a read at a version takes it back: the version its key names,
/// if the key is one of `(table, key)`'s, and its value.
pub fn decode_version_entry(table: &str, key: &[u8], raw_key: &[u8], raw: &[u8]) -> Result<(Option<u64>, Value), StateError> {
    let prefix = object_key(table, key);
    let version = match raw_key.len() == prefix.len() + 8 && raw_key.starts_with(&prefix) {
        true => Some(decode_version_suffix(raw_key, prefix.len())?),
        false => None,
    };
    Ok((version, decode_value(raw)?))
}

/// The key of a stored entry of `table`, as a listing takes it back from any key under
/// the table's prefix (`None` for a key outside it, which a listing never meets).
pub fn decode_listed_key(table: &str, raw_key: &[u8]) -> Option<Result<Vec<u8>, StateError>> {
    let prefix = object_key(table, b"");
    let prefix = &prefix[..prefix.len() - 4];
    raw_key.starts_with(prefix).then(|| stored_key(raw_key, prefix.len()).map(<[u8]>::to_vec))
}

/// The latest entry of `(table, key)`: its key and value.
pub fn latest(table: &str, key: &[u8], version: Version, value: &Value) -> (Vec<u8>, Vec<u8>) {
    (object_key(table, key), latest_entry(version, value))
}

pub fn decode_latest_entry(raw: &[u8]) -> Result<(Version, Value), StateError> {
    decode_latest(raw)
}
