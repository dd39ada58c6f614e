//! A counter kept as a replicated state machine on the book's log (Boki §5.4).
//!
//! Input `incr` or `incr N` adds 1 or N and returns the value as of that increment;
//! `get` returns the current value. The output is the value in decimal.
//!
//! The log is the ground truth: each increment is a record in the `counter` stream, and
//! the value as of a record is the sum of the increments up to and including it
//! (wrapping at 2^64, so replay never fails on a large sum). Replaying the whole stream
//! on every call would get slower as the log grows, and a function keeps no memory
//! between invocations, so the value is cached in the log instead: after a replay, the
//! reader attaches the value to the last record it replayed as aux data. The next
//! reader walks back from where it wants the value to the newest record carrying such
//! a snapshot, and replays forward only from there:
//!
//! ```text
//!   counter stream:   +1    +5    +2    +1    +3
//!   aux data:               6           9
//!                                       ^ walk back to here, replay +3, value 12,
//!                                         leave aux data 12 on the last record
//! ```
//!
//! Record data and aux data are both a `u64` in 8 little-endian bytes.

use anyhow::{anyhow, bail, Context};
use tally_sdk::{log, SeqNum, Tag};

/// The stream of increments.
const COUNTER: Tag = Tag::named("counter");

/// What the input asks for.
enum Command {
    /// Add this amount.
    Incr(u64),
    /// Read the current value.
    Get,
}

impl Command {
    fn parse(input: &[u8]) -> anyhow::Result<Command> {
        let input = std::str::from_utf8(input).context("the input is not UTF-8")?;
        // Splitting on whitespace also tolerates a trailing newline from `echo`.
        let words: Vec<&str> = input.split_whitespace().collect();
        match words[..] {
            ["incr"] => Ok(Command::Incr(1)),
            ["incr", amount] => amount.parse().map(Command::Incr).with_context(|| format!("the amount {amount:?} is not a u64")),
            ["get"] => Ok(Command::Get),
            _ => bail!("expected `incr`, `incr N` or `get`"),
        }
    }
}

fn handle(input: Vec<u8>) -> anyhow::Result<String> {
    let value = match Command::parse(&input)? {
        Command::Incr(amount) => {
            let seqnum = log::append(&[COUNTER], amount.to_le_bytes())?;
            value_at(seqnum)?
        }
        Command::Get => value_at(SeqNum::MAX)?,
    };
    Ok(value.to_string())
}

tally_sdk::handler!(handle);

/// The counter's value as of `upto`: the sum of the increments at or before it.
fn value_at(upto: SeqNum) -> anyhow::Result<u64> {
    let (mut value, mut next) = match newest_snapshot(upto)? {
        Some((seqnum, value)) => (value, seqnum.checked_next()),
        None => (0, Some(SeqNum::MIN)),
    };
    let mut last_replayed = None;
    while let Some(min) = next {
        let Some(record) = log::read_next(COUNTER, min)? else {
            break;
        };
        if record.seqnum > upto {
            break;
        }
        let amount = decode(&record.data).with_context(|| format!("reading increment {}", record.seqnum))?;
        value = value.wrapping_add(amount);
        last_replayed = Some(record.seqnum);
        // Stopping at `upto` itself saves `incr` a read past its own record.
        next = record.seqnum.checked_next().filter(|&next| next <= upto);
    }
    if let Some(seqnum) = last_replayed {
        // The snapshot is only a cache, so failing to leave one is not an error: the
        // value is right either way, and failing an `incr` whose increment is already
        // in the log would invite a retry that counts it twice.
        let _ = log::set_aux_data(seqnum, value.to_le_bytes());
    }
    Ok(value)
}

/// Walks back from `upto` to the newest increment carrying a snapshot of the value, and
/// returns its seqnum and the value; `None` when no increment at or before `upto` has
/// one.
fn newest_snapshot(upto: SeqNum) -> anyhow::Result<Option<(SeqNum, u64)>> {
    let mut max = Some(upto);
    while let Some(seqnum) = max {
        let Some(record) = log::read_prev(COUNTER, seqnum)? else {
            break;
        };
        if let Some(aux) = &record.aux {
            let value = decode(aux).with_context(|| format!("reading the snapshot in {}", record.seqnum))?;
            return Ok(Some((record.seqnum, value)));
        }
        max = record.seqnum.checked_prev();
    }
    Ok(None)
}

/// Reads a `u64` stored as 8 little-endian bytes.
fn decode(bytes: &[u8]) -> anyhow::Result<u64> {
    let bytes: [u8; 8] = bytes.try_into().map_err(|_| anyhow!("expected 8 bytes, found {}", bytes.len()))?;
    Ok(u64::from_le_bytes(bytes))
}
