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

/// A record's metadata, also as stores wrote it before conditions on unchanged streams
/// (`RecordMetaV1`, which ends where the newer encoding goes on).
pub(super) fn decode_record_meta(bytes: &[u8], limit: u64) -> Result<tally_log_core::RecordMeta> {
    decode("record metadata", bytes, limit).or_else(|e| match decode::<tally_log_core::RecordMetaV1>("", bytes, limit) {
        Ok(v1) => Ok(v1.into()),
        Err(_) => Err(e),
    })
}

#[cfg(test)]
mod tests {
    use tally_log_core::{BookId, Cond, RecordMeta, Tag};

    use super::*;

    #[test]
    fn record_metadata_written_before_unchanged_conditions_reads_as_it_was() {
        let old = RecordMeta { cond: Some(Cond { tag: Tag(3), position: 9 }), ..RecordMeta::plain(BookId(5), vec![Tag(3)]) };
        let bytes = encode("meta", &old, 1 << 10, &[]).unwrap();
        // The older encoding is this one without the (empty) list's length.
        assert_eq!(bytes.last(), Some(&0));
        assert_eq!(decode_record_meta(&bytes[..bytes.len() - 1], 1 << 10).unwrap(), old);
        let new = RecordMeta { unchanged: vec![Cond { tag: Tag(4), position: 2 }], ..old };
        let bytes = encode("meta", &new, 1 << 10, &[]).unwrap();
        assert_eq!(decode_record_meta(&bytes, 1 << 10).unwrap(), new);
        assert!(decode_record_meta(&bytes[..bytes.len() - 1], 1 << 10).is_err());
    }
}
