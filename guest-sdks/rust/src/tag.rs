use std::fmt;

/// Selects a sub-stream of the book: every record carries a set of tags, and reads
/// name the one tag whose stream they walk.
///
/// Tag 0 ([`Tag::ALL`]) is the whole book. Tags with the top bit (bit 63) set are
/// reserved for the platform: appending with one fails with
/// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(u64);

impl Tag {
    /// The whole book: every record is in tag 0's stream. It is only for reading and
    /// trimming; a record's own tags never include it.
    pub const ALL: Tag = Tag(0);

    /// The tag with this number. Any number is accepted here; the platform refuses
    /// reserved ones when they are used.
    pub const fn new(tag: u64) -> Tag {
        Tag(tag)
    }

    /// The tag for a name, so functions agree on tags by name without a registry.
    ///
    /// The tag is the 64-bit FNV-1a hash of the name's UTF-8 bytes (offset basis
    /// `0xcbf29ce484222325`, prime `0x100000001b3`: for each byte, xor it in, then
    /// multiply, wrapping), with the top bit cleared because it is reserved for the
    /// platform, and 1 in place of 0 because 0 is [`Tag::ALL`]. The gateway uses the
    /// same function for `?tag=name`, so these must not change:
    ///
    /// | name       | FNV-1a 64            | tag (hex)            | tag (decimal)         |
    /// |------------|----------------------|----------------------|-----------------------|
    /// | `""`       | `0xcbf29ce484222325` | `0x4bf29ce484222325` | `5472609002491880229` |
    /// | `"a"`      | `0xaf63dc4c8601ec8c` | `0x2f63dc4c8601ec8c` | `3414815163700866188` |
    /// | `"orders"` | `0x00125d9250be8b4c` | `0x00125d9250be8b4c` | `5169432582064972`    |
    ///
    /// It is a `const fn`, so a function can name its tags as constants:
    ///
    /// ```
    /// use tally_sdk::Tag;
    ///
    /// const ORDERS: Tag = Tag::named("orders");
    /// assert_eq!(ORDERS, Tag::new(0x0012_5d92_50be_8b4c));
    /// ```
    pub const fn named(name: &str) -> Tag {
        const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;

        let bytes = name.as_bytes();
        let mut hash = OFFSET_BASIS;
        let mut i = 0;
        // A `while` loop because iterators are not available in a `const fn`.
        while i < bytes.len() {
            hash ^= bytes[i] as u64;
            hash = hash.wrapping_mul(PRIME);
            i += 1;
        }
        Tag::from_hash(hash)
    }

    /// Makes a name's hash a tag a function may append with.
    const fn from_hash(hash: u64) -> Tag {
        const RESERVED_BIT: u64 = 1 << 63;
        match hash & !RESERVED_BIT {
            0 => Tag(1),
            tag => Tag(tag),
        }
    }

    /// The tag's number.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, expect: u64) {
        assert_eq!(Tag::named(name).get(), expect, "Tag::named({name:?})");
    }

    #[test]
    fn named_matches_the_documented_vectors() {
        check("", 0x4bf2_9ce4_8422_2325);
        check("a", 0x2f63_dc4c_8601_ec8c);
        check("orders", 0x0012_5d92_50be_8b4c);
    }

    #[test]
    fn named_matches_the_shared_vectors() {
        // The host and every other SDK test the same file.
        let file: serde_json::Value =
            serde_json::from_str(include_str!("../../test-vectors/tags.json")).expect("the vectors are JSON");
        for vector in file["vectors"].as_array().expect("a list of vectors") {
            let name = vector["name"].as_str().expect("a name");
            check(name, vector["tag"].as_str().and_then(|t| t.parse().ok()).expect("a decimal tag"));
        }
    }

    #[test]
    fn from_hash_avoids_all_and_reserved_tags() {
        // No short name hashes to these, so the hash-to-tag step is checked alone.
        let check = |hash: u64, expect: u64| assert_eq!(Tag::from_hash(hash).get(), expect);
        check(0, 1);
        check(1 << 63, 1);
        check(u64::MAX, u64::MAX >> 1);
        check(42, 42);
    }
}
