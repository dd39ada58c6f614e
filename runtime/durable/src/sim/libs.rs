//! The simulator's workload for the libraries on the log (`objects.rs`, `queues.rs`,
//! `locks.rs`, keyed invocations), run through the same faults as everything else, and
//! its oracle, which shares no code with them: it checks what the guests saw against a
//! plain model built from their own reports.
//!
//! - Tellers (Boki §7.5's counters): transactions on [`COUNTERS`] shared counters of one
//!   book (read-modify-write ones that retry on conflict, blind increments, aborted
//!   ones) and plain increments. The model replays every committed transaction and
//!   plain write in the order of their records: each committed read-modify-write must
//!   have read the model's values there (serializability), and a final read-only
//!   transaction must read the model's totals (nothing lost, nothing aborted kept).
//! - Producers push messages in order to one queue; consumers pop until it stays
//!   empty, and a last consumer drains it: every message pushed is popped exactly once,
//!   and one producer's messages are popped in the order it pushed them (FIFO per shard).
//!   One consumer relays what it pops to a second queue (its push rides its next pop's
//!   record), which a last consumer drains: every message relayed arrives there once.
//! - Lockers take the lock `L`, the lock `M`, or both (`M` first: two tries that ride one
//!   record, two releases in another), and for each lock held read its counter and
//!   write it plus one (some without releasing: finishing releases); keyed invocations
//!   do the same under their key's lock. Each counter must equal the number of its
//!   lock's holders: no two held it at once.
//!
//! Garbage collection runs every 40 ms, and a third of the seeds turn aux-data views off,
//! so that readers start from checkpoints. The tellers' inputs carry the seed, so each seed
//! mixes other kinds of tellers on other counters: with fixed inputs no plain write ever
//! fell in a transaction's window, and a decision that ignored plain writes passed.
//!
//! What the guests report (`Seen`, `LibTraces`) is with the other executions' reports in
//! `guest.rs`; the harness task that starts them and then asks this oracle is
//! `libraries.rs`.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::attempt::Attempt;
use crate::error::{Error, Result};
use crate::objects::ObjOp;

use super::guest::{guest, seed_of, LibTraces, Seen};

pub const TELLER: &str = "teller";
pub const PRODUCER: &str = "producer";
pub const CONSUMER: &str = "consumer";
pub const LOCKER: &str = "locker";
pub const KEYED: &str = "keyed";
/// Reads the field `/n` of object `<input>` (a read-only transaction for the counters).
pub const READER: &str = "reader";

pub const COUNTERS: u64 = 6;
pub const TELLERS: u64 = 14;
pub const PRODUCERS: u64 = 3;
pub const MESSAGES: u64 = 4;
pub const CONSUMERS: u64 = 3;
pub const LOCKERS: u64 = 5;
pub const KEYEDS: u64 = 6;
pub const QUEUE: &str = "jobs";
/// Where the relaying consumer (input starting with [`RELAY`]) pushes what it pops, and
/// what consumers with inputs starting with [`RELAY_DRAIN`] pop.
pub const RELAYED: &str = "relayed";
pub const RELAY: &str = "relay";
pub const RELAY_DRAIN: &str = "rdrain";

pub fn counter(c: u64) -> String {
    format!("counter-{c}")
}

fn number(text: Option<String>) -> Result<i64> {
    match text {
        None => Ok(0),
        Some(t) => t.parse().map_err(|_| Error::Failed(format!("a counter holds {t:?}"))),
    }
}

async fn get_n(attempt: &mut Attempt, object: &str) -> Result<i64> {
    number(attempt.object_get(object, "/n").await.map_err(guest)?)
}

/// Runs one of this module's functions, if `attempt` is of one.
pub async fn run(traces: &std::sync::Mutex<super::guest::Traces>, attempt: &mut Attempt) -> Option<Result<Vec<u8>>> {
    let input = String::from_utf8_lossy(&attempt.input).into_owned();
    let result = match attempt.version.name.as_str() {
        TELLER => teller(attempt, &input)
            .await
            .map(|seen| traces.lock().expect("not poisoned").libs.tellers.entry(input).or_default().push(seen)),
        PRODUCER => producer(attempt, &input).await,
        CONSUMER => consume(attempt, &input)
            .await
            .map(|got| traces.lock().expect("not poisoned").libs.consumers.entry(input).or_default().push(got)),
        LOCKER | KEYED => hold(attempt, &input)
            .await
            .map(|held| traces.lock().expect("not poisoned").libs.holders.entry(input).or_default().push(held)),
        READER => read(attempt, &input)
            .await
            .map(|values| traces.lock().expect("not poisoned").libs.read.entry(input).or_default().push(values)),
        _ => return None,
    };
    Some(result.map(|()| vec![0; 8]))
}

async fn teller(attempt: &mut Attempt, input: &str) -> Result<Vec<Seen>> {
    let s = seed_of(input.as_bytes());
    let k = 1 + (s >> 8) % 3;
    let mut counters: Vec<u64> = Vec::new();
    for i in 0..k {
        let c = (s >> 16).wrapping_add(i * 5) % COUNTERS;
        if !counters.contains(&c) {
            counters.push(c);
        }
    }
    let by = 1 + ((s >> 24) % 9) as i64;
    let mut seen = Vec::new();
    // A clock reading is logged before the next step: a re-execution must take it there.
    if (s >> 40).is_multiple_of(2) {
        attempt.wall_clock_ns(s);
    }
    match s % 4 {
        // Read-modify-write, again while it conflicts.
        0 => {
            for _ in 0..6 {
                attempt.txn_begin(false).await.map_err(guest)?;
                let mut reads = Vec::new();
                for &c in &counters {
                    let v = get_n(attempt, &counter(c)).await?;
                    reads.push((c, v));
                    let op = ObjOp::Set { path: "/n".into(), json: (v + by).to_string() };
                    attempt.object_update(&counter(c), op).await.map_err(guest)?;
                }
                let committed = attempt.txn_commit().await.map_err(guest)?;
                let adds = counters.iter().map(|&c| (c, by)).collect();
                seen.push(Seen::Txn { seqnum: attempt.instance.last_commit, committed, reads, adds });
                if committed {
                    break;
                }
            }
        }
        // Blind increments in one transaction: nothing to conflict with.
        1 => {
            attempt.txn_begin(false).await.map_err(guest)?;
            for &c in &counters {
                attempt.object_update(&counter(c), ObjOp::Incr { path: "/n".into(), by }).await.map_err(guest)?;
            }
            let committed = attempt.txn_commit().await.map_err(guest)?;
            let adds = counters.iter().map(|&c| (c, by)).collect();
            seen.push(Seen::Txn { seqnum: attempt.instance.last_commit, committed, reads: Vec::new(), adds });
        }
        // Reads and writes, then an abort: nothing of it may show.
        2 => {
            attempt.txn_begin(false).await.map_err(guest)?;
            for &c in &counters {
                let v = get_n(attempt, &counter(c)).await?;
                attempt
                    .object_update(&counter(c), ObjOp::Set { path: "/n".into(), json: (v + 1000).to_string() })
                    .await
                    .map_err(guest)?;
            }
            attempt.txn_abort().map_err(guest)?;
        }
        _ => {
            for &c in &counters {
                attempt.object_update(&counter(c), ObjOp::Incr { path: "/n".into(), by }).await.map_err(guest)?;
                seen.push(Seen::Plain { seqnum: attempt.instance.cursor(), counter: c, by });
            }
        }
    }
    Ok(seen)
}

async fn producer(attempt: &mut Attempt, input: &str) -> Result<()> {
    for j in 0..MESSAGES {
        attempt.wall_clock_ns(j);
        attempt.queue_push(QUEUE, Bytes::from(format!("{input}/{j}"))).await.map_err(guest)?;
    }
    Ok(())
}

/// Pops until the queue stays empty: one at a time, or several in a pop of many (how
/// many at most, from the input), relaying what it got if it is the relay.
async fn consume(attempt: &mut Attempt, input: &str) -> Result<Vec<super::guest::Popped>> {
    let mut got = Vec::new();
    attempt.monotonic_clock_ns(1);
    let queue = if input.starts_with(RELAY_DRAIN) { RELAYED } else { QUEUE };
    let many = match seed_of(input.as_bytes()) % 3 {
        0 => None,
        k => Some(1 + 2 * k as u32),
    };
    loop {
        let messages = match many {
            None => attempt.queue_pop(queue, 20).await.map_err(guest)?.into_iter().collect(),
            Some(max) => attempt.queue_pop_many(queue, max, 20).await.map_err(guest)?,
        };
        if messages.is_empty() {
            return Ok(got);
        }
        let seqnum = attempt.instance.cursor();
        for (place, message) in messages.into_iter().enumerate() {
            got.push((String::from_utf8_lossy(&message).into_owned(), (seqnum, place)));
            if input.starts_with(RELAY) && !input.starts_with(RELAY_DRAIN) {
                attempt.queue_push(RELAYED, message).await.map_err(guest)?;
            }
        }
    }
}

/// The locks locker `input` (`l<i>`) takes, in order, and the counter each guards.
fn locker_locks(input: &str) -> &'static [(&'static str, &'static str)] {
    match input.trim_start_matches('l').parse::<u64>().unwrap_or(0) % 3 {
        0 => &[("L", "locked")],
        1 => &[("M", "locked-m")],
        _ => &[("M", "locked-m"), ("L", "locked")],
    }
}

/// A locker (`locker_locks`) or a keyed invocation (its key's lock, taken before it
/// ran): reads each counter its locks guard and writes it plus one while it holds them.
async fn hold(attempt: &mut Attempt, input: &str) -> Result<bool> {
    let keyed = attempt.version.name == KEYED;
    let locks = if keyed { &[("", "keyed")][..] } else { locker_locks(input) };
    attempt.wall_clock_ns(7);
    for (lock, _) in locks.iter().filter(|_| !keyed) {
        if !attempt.lock_acquire(lock, 60).await.map_err(guest)? {
            return Ok(false);
        }
    }
    for (_, object) in locks {
        let n = get_n(attempt, object).await?;
        attempt.object_update(object, ObjOp::Set { path: "/n".into(), json: (n + 1).to_string() }).await.map_err(guest)?;
    }
    if !keyed && seed_of(input.as_bytes()).is_multiple_of(2) {
        for (lock, _) in locks {
            attempt.lock_release(lock).await.map_err(guest)?;
        }
    }
    Ok(true)
}

async fn read(attempt: &mut Attempt, input: &str) -> Result<Vec<i64>> {
    let objects: Vec<String> = match input {
        "counters" => (0..COUNTERS).map(counter).collect(),
        snap if snap.starts_with("snap") => (0..COUNTERS).map(counter).collect(),
        other => vec![other.to_string()],
    };
    attempt.txn_begin(true).await.map_err(guest)?;
    let mut values = Vec::new();
    for o in &objects {
        values.push(get_n(attempt, o).await?);
    }
    if !attempt.txn_commit().await.map_err(guest)? {
        return Err(Error::Failed("a read-only transaction did not commit".into()));
    }
    Ok(values)
}

/// The one report of each invocation, checked to be the same in every execution that
/// ran to its end.
pub fn agreed<T: Clone + PartialEq + std::fmt::Debug>(
    what: &str,
    reports: &BTreeMap<String, Vec<T>>,
) -> std::result::Result<BTreeMap<String, T>, String> {
    let mut out = BTreeMap::new();
    for (input, executions) in reports {
        let first = executions.first().ok_or_else(|| format!("{what} {input} has no report"))?;
        if let Some(other) = executions.iter().find(|e| *e != first) {
            return Err(format!("{what} {input}: one execution saw {first:?}, another {other:?}"));
        }
        out.insert(input.clone(), first.clone());
    }
    Ok(out)
}

/// The oracle of the tellers: serializable commits and the final totals.
pub fn check_tellers(
    tellers: &BTreeMap<String, Vec<Seen>>,
    totals: &[i64],
    snapshots: &BTreeMap<String, Vec<i64>>,
) -> std::result::Result<u64, String> {
    let mut events: Vec<(u64, &Seen)> = Vec::new();
    for seen in tellers.values() {
        for s in seen {
            match s {
                Seen::Txn { seqnum, committed: true, .. } | Seen::Plain { seqnum, .. } => events.push((*seqnum, s)),
                Seen::Txn { .. } => {}
            }
        }
    }
    events.sort_by_key(|(s, _)| *s);
    if let Some(w) = events.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("two writes at one record {}: {:?} and {:?}", w[0].0, w[0].1, w[1].1));
    }
    let mut model = vec![0i64; COUNTERS as usize];
    // The counters after each prefix of the writes: what a snapshot may read.
    let mut states = vec![model.clone()];
    for (seqnum, s) in &events {
        match s {
            Seen::Txn { reads, adds, .. } => {
                for (c, v) in reads {
                    if model[*c as usize] != *v {
                        return Err(format!(
                            "the transaction committed at {seqnum} read {v} from counter {c}, which held {} there",
                            model[*c as usize]
                        ));
                    }
                }
                for (c, by) in adds {
                    model[*c as usize] += by;
                }
            }
            Seen::Plain { counter, by, .. } => model[*counter as usize] += by,
        }
        states.push(model.clone());
    }
    if model != totals {
        return Err(format!("the counters hold {totals:?}; the committed writes add up to {model:?}"));
    }
    for (input, read) in snapshots {
        if !states.contains(read) {
            return Err(format!("{input} read the counters as {read:?}, which no prefix of the committed writes gives"));
        }
    }
    Ok(events.len() as u64 + snapshots.len() as u64)
}

/// The libraries' oracle over what the executions reported (`libs.rs`).
pub(super) fn check_libraries(t: &LibTraces) -> Result<u64, String> {
    let read = agreed("reader", &t.read)?;
    let value = |input: &str| read.get(input).cloned().ok_or_else(|| format!("no read of {input}"));
    let snapshots = read.iter().filter(|(i, _)| i.starts_with("snap")).map(|(i, v)| (i.clone(), v.clone())).collect();
    let mut checked = check_tellers(&agreed("teller", &t.tellers)?, &value("counters")?, &snapshots)?;
    // Every message popped once, one producer's in its order.
    let consumers = agreed("consumer", &t.consumers)?;
    let (drains, consumers): (BTreeMap<_, _>, BTreeMap<_, _>) =
        consumers.into_iter().partition(|(i, _)| i.starts_with(RELAY_DRAIN));
    // What the relay popped arrives in the second queue, once each.
    let mut relayed: Vec<&String> =
        consumers.iter().filter(|(i, _)| i.starts_with(RELAY)).flat_map(|(_, got)| got.iter().map(|(m, _)| m)).collect();
    let mut arrived: Vec<&String> = drains.values().flat_map(|got| got.iter().map(|(m, _)| m)).collect();
    relayed.sort_unstable();
    arrived.sort_unstable();
    if relayed != arrived {
        return Err(format!("the relay popped {relayed:?}; the second queue gave {arrived:?}"));
    }
    checked += arrived.len() as u64;
    let mut popped: BTreeMap<String, (u64, usize)> = BTreeMap::new();
    for got in consumers.values() {
        for (message, seqnum) in got {
            if let Some(earlier) = popped.insert(message.clone(), *seqnum) {
                return Err(format!("{message} was popped twice, at {earlier:?} and {seqnum:?}"));
            }
        }
    }
    for p in 0..PRODUCERS {
        let at: Vec<Option<(u64, usize)>> = (0..MESSAGES).map(|j| popped.remove(&format!("p{p}/{j}"))).collect();
        if at.iter().any(Option::is_none) || at.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("producer p{p}'s messages were popped at {at:?}"));
        }
        checked += MESSAGES;
    }
    if !popped.is_empty() {
        return Err(format!("popped messages no producer pushed: {popped:?}"));
    }
    // Lock holders one at a time: each one's increment counted.
    let holders = agreed("holder", &t.holders)?;
    let held = |prefix: char| holders.iter().filter(|(i, h)| i.starts_with(prefix) && **h).count() as i64;
    for (lock, counter) in [("L", "locked"), ("M", "locked-m")] {
        let holders_of = |(i, h): &(&String, &bool)| i.starts_with('l') && **h && locker_locks(i).iter().any(|l| l.0 == lock);
        let n = holders.iter().filter(holders_of).count() as i64;
        if value(counter)? != [n] {
            return Err(format!("{n} lockers held {lock}; its counter says {:?}", value(counter)?));
        }
    }
    if held('k') != KEYEDS as i64 || value("keyed")? != [KEYEDS as i64] {
        return Err(format!("{} of {KEYEDS} keyed invocations ran; their counter says {:?}", held('k'), value("keyed")?));
    }
    checked += holders.len() as u64;
    Ok(checked)
}
