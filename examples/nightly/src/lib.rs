//! A nightly job, run by a schedule: it counts the records appended to its book under
//! tag `events` since its last run, appends a summary under tag `nightly`, and keeps its
//! place (the next seqnum to read) in table `nightly`. Each tick's invocation runs
//! exactly once, so every event is counted in exactly one summary, whatever crashes,
//! retries and catch-ups happen. The summary, which is also the output:
//!
//! ```text
//!   {"ran_at_ms":1795744800012,"events":42,"from":0,"next":1187}
//! ```
//!
//! `ran_at_ms` is the wall clock when the job first ran (a recorded reading: a
//! re-execution sees the same). At most 10,000 events are counted per run; the rest
//! wait for the next. Schedule it with the default overlap policy (`skip`), so that two
//! runs never read from one place at once:
//!
//! ```text
//!   tally schedule put nightly --function nightly --book 1 --cron "0 2 * * *"
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use tally_sdk::{log, state, SeqNum, Tag};

const EVENTS: Tag = Tag::named("events");
const NIGHTLY: Tag = Tag::named("nightly");
const TABLE: &str = "nightly";
const EVENTS_MAX: u64 = 10_000;

fn handle(_input: Vec<u8>) -> anyhow::Result<Vec<u8>> {
    let ran_at_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis();
    let from = match state::get(TABLE, "next")? {
        Some(bytes) => u64::from_le_bytes(bytes.try_into().map_err(|_| anyhow::anyhow!("a corrupt place"))?),
        None => 0,
    };
    let (mut next, mut events) = (from, 0u64);
    while events < EVENTS_MAX {
        let Some(record) = log::read_next(EVENTS, SeqNum::new(next))? else { break };
        events += 1;
        next = record.seqnum.get().checked_add(1).context("the book is full")?;
    }
    let summary = format!(r#"{{"ran_at_ms":{ran_at_ms},"events":{events},"from":{from},"next":{next}}}"#);
    log::append(&[NIGHTLY], &summary)?;
    state::put(TABLE, "next", next.to_le_bytes())?;
    Ok(summary.into_bytes())
}

tally_sdk::handler!(handle);
