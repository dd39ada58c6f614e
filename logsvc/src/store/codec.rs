//! How the stores encode values: bincode's varint encoding (compact for small tags and
//! ids) with a size limit, so a corrupt length prefix is an error rather than a huge
//! allocation, and an oversized value is refused before it is written.

use bincode::Options as _;
use tally_log_core::{Error, Result};

fn codec(limit: u64) -> impl bincode::Options {
    bincode::DefaultOptions::new().with_limit(limit)
}

/// `prefix` then the encoding of `value`; fails with `TooLarge` past `limit` bytes.
pub(super) fn encode<T: serde::Serialize>(what: &'static str, value: &T, limit: u64, prefix: &[u8]) -> Result<Vec<u8>> {
    let size = bincode::DefaultOptions::new()
        .serialized_size(value)
        .map_err(|e| Error::Storage(format!("cannot encode {what}: {e}")))?;
    if size > limit {
        return Err(Error::TooLarge { what: what.into(), size: size as usize, limit: limit as usize });
    }
    let mut bytes = Vec::with_capacity(prefix.len() + size as usize);
    bytes.extend_from_slice(prefix);
    codec(limit).serialize_into(&mut bytes, value).map_err(|e| Error::Storage(format!("cannot encode {what}: {e}")))?;
    Ok(bytes)
}

pub(super) fn decode<T: serde::de::DeserializeOwned>(what: &'static str, bytes: &[u8], limit: u64) -> Result<T> {
    codec(limit).deserialize(bytes).map_err(|e| Error::Storage(format!("corrupt {what}: {e}")))
}
