//! The histories the log holds, read without the core's code: the step log of an
//! invocation decoded from every record the log placed, and the checks at a run's end
//! over every step log and write log.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use tally_log_core::{BookId, Tag};

use crate::record::kind;
use crate::tags::TagKey;

use super::log::SimLog;
use super::store::FaultyStore;

/// Whether `tag` is one the platform derives (a step log, an object's write log, ...):
/// the bit the oracle reads without the core's tag code.
fn is_derived(tag: Tag) -> bool {
    tag.is_reserved() && tag.0 & (1 << 62) != 0
}

/// Every record the log placed (collected ones too) that decodes as steps: its book,
/// tags and steps (a group's, in order).
pub(super) fn placed_steps(log: &SimLog) -> impl Iterator<Item = (BookId, Vec<Tag>, Vec<crate::record::Step>)> {
    use crate::record::{self, Step};
    log.placed_records().into_iter().filter_map(|(book, tags, data)| {
        let steps = record::decode::<Step>("step", &data).ok()?.into_steps();
        Some((book, tags, steps))
    })
}

/// The step log an Init (or a refusal) begins: named by the tag key where known; else
/// the record's one derived tag (an Init logged alone carries no other).
fn step_log_begun(tags: &[Tag], first: &crate::record::Step, key: Option<&TagKey>) -> Option<Tag> {
    use crate::record::Step;
    match (first, key) {
        (Step::Init(kind::Init { id, .. }) | Step::InitKeyed(kind::InitKeyed { id, .. }), Some(key)) => Some(key.step(id)),
        (Step::Init(kind::Init { .. }) | Step::InitKeyed(kind::InitKeyed { .. }) | Step::Refused(kind::Refused { .. }), _) => {
            tags.iter().copied().find(|&t| is_derived(t))
        }
        _ => None,
    }
}

/// The steps of the step log of the invocation with input `input`, in order, read
/// from every record the log placed (collected ones too).
fn logged_steps(log: &SimLog, input: &[u8], key: Option<&TagKey>) -> Vec<crate::record::Step> {
    use crate::record::Step;
    let mut step_log = None;
    let mut logged = Vec::new();
    for (_, tags, steps) in placed_steps(log) {
        let begun = matches!(&steps[0], Step::Init(kind::Init { input: i, .. }) | Step::InitKeyed(kind::InitKeyed { input: i, .. }) if i == input);
        if step_log.is_none() && begun {
            step_log = step_log_begun(&tags, &steps[0], key);
        }
        if step_log.is_some_and(|tag| tags.contains(&tag)) {
            logged.extend(steps);
        }
    }
    logged
}

/// The output that the step log of the invocation with input `input` holds as its
/// result (a deferred Init's record may hold the result too).
pub(super) fn logged_output(log: &SimLog, input: &[u8], key: Option<&TagKey>) -> Option<Result<u64, String>> {
    use crate::record::{Outcome, Step};
    logged_steps(log, input, key).into_iter().find_map(|step| match step {
        Step::Result(kind::Result { outcome: Outcome::Ok(out) }) => out[..].try_into().ok().map(|b| Ok(u64::from_be_bytes(b))),
        _ => None,
    })
}

/// The clock readings that the step log of the invocation with input `input` holds,
/// in order: those of the execution whose history the invocation kept.
pub(super) fn logged_clocks(log: &SimLog, input: &[u8], key: Option<&TagKey>) -> Vec<u64> {
    use crate::record::{Reading, Step};
    let readings = logged_steps(log, input, key).into_iter().flat_map(|step| match step {
        Step::Clocks(kind::Clocks { readings }) => readings,
        _ => Vec::new(),
    });
    readings
        .filter_map(|r| match r {
            Reading::Wall(v) | Reading::Monotonic(v) | Reading::Settings(v) => Some(v),
            Reading::Log(_) => None,
        })
        .collect()
}

/// Every step log the run left, as the log holds it (the records that took their
/// places): a stream of a derived tag whose first record is an Init or a refusal.
/// After a `Cancelled` step the guest's every call fails before it logs, so only clock
/// readings, lock releases and the result may follow it; nothing follows the result.
/// (A write taken before the cancellation and logged after it would break this.)
pub(super) fn check_step_logs(log: &SimLog, key: Option<&TagKey>) -> Result<(), String> {
    use crate::record::Step;
    // Per stream: whether it is a step log, and whether it has a Cancelled or a Result.
    let mut streams: BTreeMap<(BookId, u64), (bool, bool, bool)> = BTreeMap::new();
    for (book, tags, steps) in placed_steps(log) {
        let begun = step_log_begun(&tags, &steps[0], key);
        for tag in tags.iter().filter(|&&t| is_derived(t)) {
            let first = begun == Some(*tag);
            let (step_log, cancelled, ended) = streams.entry((book, tag.0)).or_insert((first, false, false));
            if !*step_log {
                continue;
            }
            for step in &steps {
                let after_cancel = matches!(
                    step,
                    Step::Clocks(kind::Clocks { .. })
                        | Step::LockRelease(kind::LockRelease { .. })
                        | Step::Result(kind::Result { .. })
                );
                if *ended || (*cancelled && !after_cancel) {
                    let after = if *ended { "its result" } else { "its cancellation" };
                    return Err(format!("the step log {:#x} of book {} has a {} after {after}", tag.0, book.0, step.describe()));
                }
                *cancelled |= matches!(step, Step::Cancelled);
                *ended |= matches!(step, Step::Result(kind::Result { .. }) | Step::Refused(kind::Refused { .. }));
            }
        }
    }
    Ok(())
}

/// Every object that a record still in its write log writes (a read-optimized write)
/// has a version in the store: garbage collection and a switch's migration find
/// objects by their stored versions, so one without any would keep its garbage for
/// ever and be left out of a migration. A crash may lose any version that is not
/// durable; the protocol keeps one durable version per object.
pub(super) fn check_objects_stored(log: &SimLog, store: &FaultyStore, key: Option<&TagKey>) -> Result<(), String> {
    use crate::record::{self, Step};
    let Some(tags) = key else { return Ok(()) };
    let mut objects = BTreeSet::new();
    for (book, _, steps) in placed_steps(log) {
        for step in steps {
            if let Step::Write(kind::Write { table, key, .. }) | Step::Put(kind::Put { table, key, .. }) = step {
                objects.insert((book, table, key));
            }
        }
    }
    let objects: Vec<(BookId, String, Bytes)> = objects.into_iter().collect();
    let streams: Vec<(BookId, Tag)> = objects.iter().map(|(book, table, key)| (*book, tags.object(table, key))).collect();
    for ((book, table, key), records) in objects.iter().zip(log.readable(&streams)) {
        let writes_it = |data: &Bytes| {
            let steps = record::decode::<Step>("step", data).map(Step::into_steps).unwrap_or_default();
            steps.iter().any(|s| matches!(s, Step::Write(kind::Write { table: t, key: k, .. }) | Step::Put(kind::Put { table: t, key: k, .. }) if t == table && k == key))
        };
        // Write logs are in the book's shadow, the store's tables under the book.
        let user = BookId(book.0 & !BookId::RESERVED_BIT);
        if records.iter().any(writes_it) && !store.has_versions(&crate::table::store_table(user, table), key) {
            return Err(format!("{table}/{key:?} of book {} has a write in its write log and no version in the store", user.0));
        }
    }
    Ok(())
}
