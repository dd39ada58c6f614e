//! What the exactly-once core reads back from the log and takes from guests, as
//! `tally-fuzz` calls it: every kind of record, decoded by the functions its readers
//! call and encoded again; schedules and cron expressions; the checks of what a guest
//! passes. Records come out of here as bytes, so that no record type leaves the crate.

use bytes::Bytes;
use tally_log_core::{BookId, Tag};

use crate::cron::Cron;
use crate::error::Result;
use crate::record::{self, kind, samples, Step, TableRef, Transition};
use crate::schedule::{sample_states, Plan, State};

/// A record of every kind, encoded as the core writes it: steps, groups of steps,
/// transitions, listings, schedule states and the views cached in aux data.
pub fn sample_records() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = samples::one_of_each().iter().map(|s| record::encode(s).to_vec()).collect();
    let write =
        |migrated_from| Step::Write(kind::Write { table: "t".into(), key: Bytes::from_static(b"k"), version: 7, migrated_from });
    let put = Step::Put(kind::Put { table: "t".into(), key: Bytes::from_static(b"k"), version: 8, value: None });
    let clocks = Step::Clocks(kind::Clocks { readings: vec![record::Reading::Wall(1)] });
    let result = Step::Result(kind::Result { outcome: record::Outcome::Ok(Bytes::from_static(b"ok")) });
    for steps in [vec![write(None), put.clone()], vec![write(None), clocks.clone(), put], vec![clocks, write(Some(3)), result]] {
        out.push(record::encode(&Step::Group(kind::Group { steps })).to_vec());
    }
    let trailer = record::meta::Meta {
        started_ms: Some(1),
        ended_ms: Some(2),
        trace: Some(record::meta::TraceRef { trace_id: [3; 16], span_id: [4; 8] }),
        parts: vec![("guest".into(), 5), ("log".into(), 6)],
    };
    let finished = Step::Result(kind::Result { outcome: record::Outcome::Ok(Bytes::from_static(b"done")) });
    out.push(record::meta::with_meta(record::encode(&finished), &trailer).to_vec());
    let protocol = crate::Protocol::ReadOptimized;
    out.push(record::encode(&Transition::End { table: "t".into(), protocol, auto: true }).to_vec());
    let to = crate::Protocol::WriteOptimized;
    out.push(record::encode(&Transition::Begin { table: "t".into(), from: protocol, to, auto: false }).to_vec());
    out.push(record::encode(&TableRef { book: 7, table: "t".into() }).to_vec());
    out.push(record::encode(&7u64).to_vec());
    out.extend(sample_states("nightly").iter().map(|s| record::encode(s).to_vec()));
    let aux = crate::objects::AuxView { committed: Some(true), views: vec![("o".into(), r#"{"a":[1]}"#.into())] };
    out.push(record::encode(&aux).to_vec());
    out.push(crate::queues::ShardView { pending: 2, head: Some((5, 1)), popped: None }.encode().to_vec());
    let holder = crate::locks::LockView {
        tail: 3,
        holder: Some("h".into()),
        root: Some(crate::InstanceId::generated("00ff")),
        records: Some(4),
    };
    out.push(record::encode(&crate::locks::LockViews { views: vec![(9, holder)] }).to_vec());
    out
}

/// A record read as one step (`record::decode::<Step>`, as the library readers and the
/// promise and wake-up paths read theirs), encoded again.
pub fn decode_step(bytes: &[u8]) -> Result<Vec<u8>> {
    let step: Step = record::decode("step", bytes)?;
    Ok(record::encode(&step).to_vec())
}

/// A record of a step log as its readers take it: checked by `decode_steps`, then taken
/// apart as the recovery scan, status and init do; encoded again.
pub fn decode_step_record(bytes: &[u8]) -> Result<Vec<u8>> {
    let step = record::decode_steps("step", bytes)?;
    let _ = step.describe();
    let (init, last) = step.clone().into_init_and_last();
    assert!(init.as_ref().is_none_or(Step::is_init), "into_init_and_last gave a non-Init: {init:?}");
    assert!(last.is_some() || init.is_some(), "a record without an Init or a last step: {step:?}");
    let _ = step.clone().into_last();
    let steps = step.clone().into_steps();
    assert!(!steps.is_empty(), "a record of no steps: {step:?}");
    let mut shed = step.clone();
    shed.shed();
    // A trailer (`record/meta.rs`) reads back as it is written, parts cut to the bound.
    if let Some(meta) = record::meta::meta_of::<Step>(bytes) {
        let again = record::meta::with_meta(record::encode(&step), &meta);
        let meta = record::meta::as_written(meta);
        let read = record::meta::meta_of::<Step>(&again);
        assert_eq!(read, (!meta.is_empty()).then_some(meta), "a trailer written again reads differently");
    }
    Ok(record::encode(&step).to_vec())
}

/// A write of `(table, key)` a record holds, as a reader takes it: its version, the
/// cursor a migration carried over, and the value a put carries.
pub type Written = (u64, Option<u64>, Option<Option<Vec<u8>>>);

/// The write of `(table, key)` that `record::write_in` reads in place.
pub fn write_in(bytes: &[u8], table: &str, key: &[u8]) -> Result<Option<Written>> {
    let bytes = Bytes::copy_from_slice(bytes);
    let found = record::write_in(&bytes, table, key)?;
    Ok(found.map(|w| (w.version, w.migrated_from, w.value.map(|v| v.map(|b| b.to_vec())))))
}

/// What `write_in` must find, from the whole record decoded: the last write of
/// `(table, key)` among its steps.
pub fn write_in_decoded(bytes: &[u8], table: &str, key: &[u8]) -> Result<Option<Written>> {
    let steps = record::decode_steps("write-log", bytes)?.into_steps();
    Ok(steps.into_iter().rev().find_map(|s| match s {
        Step::Write(kind::Write { table: t, key: k, version, migrated_from }) if t == table && k == key => {
            Some((version, migrated_from, None))
        }
        Step::Put(kind::Put { table: t, key: k, version, value }) if t == table && k == key => {
            Some((version, None, Some(value.map(|v| v.to_vec()))))
        }
        _ => None,
    }))
}

/// The other records of the core, each decoded as its reader does and encoded again.
pub fn decode_transition(bytes: &[u8]) -> Result<Vec<u8>> {
    let t: Transition = record::decode("transition", bytes)?;
    let _ = t.table();
    Ok(record::encode(&t).to_vec())
}

pub fn decode_table_ref(bytes: &[u8]) -> Result<Vec<u8>> {
    Ok(record::encode(&record::decode::<TableRef>("table listing", bytes)?).to_vec())
}

pub fn decode_book_listing(bytes: &[u8]) -> Result<Vec<u8>> {
    Ok(record::encode(&record::decode::<u64>("book listing", bytes)?).to_vec())
}

pub fn decode_aux_view(bytes: &[u8]) -> Result<Vec<u8>> {
    Ok(record::encode(&record::decode::<crate::objects::AuxView>("aux view", bytes)?).to_vec())
}

pub fn decode_queue_view(bytes: &[u8]) -> Result<Vec<u8>> {
    Ok(crate::queues::ShardView::decode(bytes)?.encode().to_vec())
}

pub fn decode_lock_view(bytes: &[u8]) -> Result<Vec<u8>> {
    Ok(record::encode(&record::decode::<crate::locks::LockViews>("lock views", bytes)?).to_vec())
}

/// A record of schedule `name`'s stream, as its driver reads it and plans from it at
/// `now_ms`; encoded again. Checks the plan against what `State::plan` promises: a
/// tick due is not in the future, a wait is for one that is.
pub fn decode_schedule_state(name: &str, bytes: &[u8], now_ms: u64) -> Result<Vec<u8>> {
    let state = State::of_stream(name, bytes)?;
    match state.plan(now_ms) {
        Plan::Wait(Some(t)) => assert!(t > now_ms, "waits for {t}, at {now_ms}"),
        Plan::Wait(None) => {}
        Plan::Due { tick, .. } => assert!(tick <= now_ms, "tick {tick} due at {now_ms}"),
        Plan::Pass { upto, .. } => assert!(upto <= now_ms, "passes over ticks up to {upto} at {now_ms}"),
    }
    let _ = state.view();
    Ok(record::encode(&state).to_vec())
}

/// A schedule's stream names the schedule: the name the sample states have.
pub const SAMPLE_SCHEDULE: &str = "nightly";

/// The first time cron expression `text` names strictly after `after_ms`.
pub fn cron_next(text: &str, after_ms: u64) -> Result<Option<u64>> {
    Ok(Cron::parse(text)?.next_after(after_ms))
}

/// The checks of what a guest passes: a state table, key and value (`state.*`).
pub fn check_object(table: &str, key: &[u8], value: Option<&[u8]>) -> std::result::Result<(), String> {
    crate::table::check_object(table, key, value).map_err(|a| format!("{a:?}"))
}

/// Tags a guest names (`log.*`): none of the platform's.
pub fn check_guest_tags(tags: &[u64]) -> std::result::Result<(), String> {
    let tags: Vec<Tag> = tags.iter().copied().map(Tag).collect();
    crate::instance::guest_tags(&tags).map_err(|e| e.to_string())
}

/// A book a client or a schedule names: none of the platform's.
pub fn check_book(book: u64) -> Result<()> {
    crate::abort::check_book(BookId(book))
}
