//! A function that calls itself, to check that a child invocation sees what its parent
//! wrote to the log before calling it.
//!
//! As a parent (any input not starting with `child:`), it appends the input to the
//! `chain` stream and calls itself with `child:<seqnum>` naming that record, then
//! returns the child's output. As a child, it reads the `chain` stream from that seqnum
//! and returns `saw:<data>` if the record is there, or fails with "parent's record not
//! visible" if it is not.

use anyhow::{bail, Context};
use tally_sdk::{context, invoke, log, SeqNum, Tag};

/// The stream the parent writes and the child reads.
const CHAIN: Tag = Tag::named("chain");

fn handle(input: Vec<u8>) -> anyhow::Result<Vec<u8>> {
    match input.strip_prefix(b"child:") {
        Some(seqnum) => child(seqnum),
        None => parent(&input),
    }
}

tally_sdk::handler!(handle);

/// Writes `input` to the log and returns what a child invocation saw of it.
fn parent(input: &[u8]) -> anyhow::Result<Vec<u8>> {
    let seqnum = log::append(&[CHAIN], input)?;
    // Calling the name this function was deployed under keeps the example independent
    // of how it is deployed.
    let output = invoke::call(&context::function_name(), format!("child:{seqnum}"))?;
    Ok(output)
}

/// Returns `saw:<data>` for the parent's record at `seqnum`.
fn child(seqnum: &[u8]) -> anyhow::Result<Vec<u8>> {
    let seqnum: SeqNum =
        std::str::from_utf8(seqnum).ok().and_then(|seqnum| seqnum.parse().ok()).context("expected `child:<seqnum>`")?;
    match log::read_next(CHAIN, seqnum)? {
        Some(record) if record.seqnum == seqnum => Ok([b"saw:", &record.data[..]].concat()),
        _ => bail!("parent's record not visible"),
    }
}
