use std::fmt;
use std::num::ParseIntError;
use std::str::FromStr;

/// A record's position in its book: seqnums are totally ordered across the whole book,
/// whatever the record's tags.
///
/// It prints and parses as a decimal number, so it can travel in text payloads:
///
/// ```
/// use tally_sdk::SeqNum;
///
/// let seqnum = SeqNum::new(42);
/// assert_eq!(seqnum.to_string().parse(), Ok(seqnum));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeqNum(u64);

impl SeqNum {
    /// The smallest seqnum: `log::read_next(tag, SeqNum::MIN)` reads a stream's first
    /// record.
    pub const MIN: SeqNum = SeqNum(0);
    /// The largest seqnum: `log::read_prev(tag, SeqNum::MAX)` reads a stream's last
    /// record.
    pub const MAX: SeqNum = SeqNum(u64::MAX);

    /// The seqnum with this number.
    pub const fn new(seqnum: u64) -> SeqNum {
        SeqNum(seqnum)
    }

    /// The seqnum's number.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The seqnum after this one, or `None` after [`SeqNum::MAX`]. Reading a stream
    /// forward continues from `record.seqnum.checked_next()`.
    pub const fn checked_next(self) -> Option<SeqNum> {
        match self.0.checked_add(1) {
            Some(next) => Some(SeqNum(next)),
            None => None,
        }
    }

    /// The seqnum before this one, or `None` before [`SeqNum::MIN`]. Reading a stream
    /// backward continues from `record.seqnum.checked_prev()`.
    pub const fn checked_prev(self) -> Option<SeqNum> {
        match self.0.checked_sub(1) {
            Some(prev) => Some(SeqNum(prev)),
            None => None,
        }
    }
}

impl fmt::Display for SeqNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for SeqNum {
    type Err = ParseIntError;

    fn from_str(s: &str) -> std::result::Result<SeqNum, ParseIntError> {
        s.parse().map(SeqNum)
    }
}
