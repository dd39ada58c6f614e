//! Schedules through the faults, and the check of their invocations against the
//! definitions alone once they are deleted.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use tally_log_core::BookId;

use crate::env::Clock;
use crate::error::Error;
use crate::record::kind;

use super::clients::retry;
use super::guest;
use super::history::placed_steps;
use super::log::SimLog;
use super::world::World;

/// The interval of the simulated schedules.
const TICK_MS: u64 = 100;
/// How far behind the clock a driver is once it has caught up.
const TICK_LAG_MS: u64 = 300;

/// Schedules through the faults: `every` (on book 0: every tick fires, overlapping, all
/// missed ones caught up), `skipping` (on book 1: overlapping ticks skipped, only the
/// latest missed one caught up, and triggered now and then) and `serial` (on book 0:
/// one tick buffered behind a running one, missed ones caught up one after another).
/// After the safety phase, once `every` has caught up, all are deleted; once their invocations have finished, the ticks
/// are checked against the definitions alone: tick IDs are distinct and as many as the
/// ticks between definition and deletion (within the drivers' lag, plus triggers),
/// each ran no earlier than its tick (comparing order statistics), and each appended
/// its record to its book once.
pub(super) async fn schedules(world: Arc<World>) {
    use crate::schedule::{CatchUp, Overlap, ScheduleSpec, Timing};
    let h = world.harness();
    let books = world.opts.books;
    let defs = [
        ("every", BookId(0), Overlap::AllowAll, CatchUp::All),
        ("skipping", BookId(1 % books), Overlap::Skip, CatchUp::Latest),
        ("serial", BookId(0), Overlap::BufferOne, CatchUp::All),
    ];
    h.sleep(world.draw(200)).await;
    let mut defined = Vec::new();
    for (name, book, overlap, catch_up) in defs {
        let spec = ScheduleSpec {
            function: guest::TICKER.into(),
            book,
            input: Bytes::from(name),
            timing: Timing::EveryMs(TICK_MS),
            overlap,
            catch_up,
        };
        let first = h.now_ms();
        let answered = retry(&world, "put-schedule", move |d| {
            let spec = spec.clone();
            async move { d.schedules().put(name, spec, None).await.map(|_| ()) }
        })
        .await;
        if answered.is_none() {
            return;
        }
        defined.push((name, book, first, h.now_ms()));
    }
    // Triggers of `skipping`, on random nodes, during the safety phase.
    let (mut tried, mut triggered) = (0u64, 0u64);
    while h.now_ms() < world.opts.safety_ms {
        h.sleep(50 + world.draw(300)).await;
        let Some((n, d, _)) = world.pick_node() else { continue };
        tried += 1;
        match world.on_node(n, d, "trigger", |d| async move { d.schedules().trigger("skipping").await }).await {
            Some(Ok(_)) => triggered += 1,
            // A replica behind the definition does not know the schedule yet.
            Some(Err(e)) if !e.is_transient() && !matches!(e, Error::Conflict(_) | Error::ScheduleNotFound(_)) => {
                return world.fail(format!("a trigger failed: {e}"));
            }
            _ => {}
        }
    }
    // Once faults stop, `every` catches up with the clock: it says it has fired every
    // tick up to `caught`, which the ticks' effects must then show.
    let caught = loop {
        h.sleep(50).await;
        let Some((n, d, _)) = world.pick_node() else { continue };
        if let Some(Ok(s)) = world.on_node(n, d, "schedule", |d| async move { d.schedules().get("every").await }).await {
            if s.last_tick_ms + TICK_LAG_MS >= h.now_ms() {
                break s.last_tick_ms;
            }
        }
    };
    let mut deleted = Vec::new();
    for (name, ..) in &defined {
        let name = *name;
        let answered = retry(&world, "delete-schedule", move |d| async move {
            match d.schedules().delete(name).await {
                // An earlier try whose answer was lost deleted it.
                Err(Error::ScheduleNotFound(_)) => Ok(()),
                other => other,
            }
        })
        .await;
        if answered.is_none() {
            return;
        }
        deleted.push(h.now_ms());
    }
    // Every invocation started runs to its end. One whose node died before it ran (or
    // whose run failed at once) is run by the recovery scan, after its function's
    // timeout and then some, later when the scan tracks `open_max` others already (the
    // libraries' invocations share book 0, and their waiters stay unfinished a while):
    // wait until every one whose Init the log holds has run, and nothing new has shown
    // up for several seconds.
    let (mut seen, mut since) = (0, h.now_ms());
    loop {
        h.sleep(20).await;
        let t = world.traces.lock().expect("not poisoned");
        if t.ticks.len() != seen {
            (seen, since) = (t.ticks.len(), h.now_ms());
        }
        let quiet = 8_000;
        if h.now_ms() > since + quiet && t.ticks.keys().all(|k| t.ticks_done.contains(k)) {
            let ran: BTreeSet<&String> = t.ticks.keys().map(|(_, id)| id).collect();
            if started_ticks(&world.log).iter().all(|id| ran.contains(id)) {
                break;
            }
        }
    }
    let t = world.traces.lock().expect("not poisoned");
    for (i, (name, book, put_first, put_done)) in defined.iter().enumerate() {
        let del_done = deleted[i];
        let mut starts: Vec<u64> = t.ticks.iter().filter(|((s, _), _)| s == name).map(|(_, &at)| at).collect();
        starts.sort_unstable();
        // Ticks are the multiples of TICK_MS after the definition took effect (at or
        // after put_first) and up to the deletion (at or before del_done); those up to
        // `caught` have fired (the definition took effect by put_done).
        let upper = del_done / TICK_MS - put_first / TICK_MS;
        let lower = (caught / TICK_MS).saturating_sub(put_done / TICK_MS);
        let (extra_max, extra_min) = if *name == "skipping" { (tried, triggered) } else { (0, 0) };
        let n = starts.len() as u64;
        if n > upper + extra_max {
            return world.fail(format!(
                "schedule {name} started {n} invocations for at most {upper} ticks and {extra_max} triggers: a tick fired twice"
            ));
        }
        if *name == "every" {
            if n < lower {
                return world.fail(format!(
                    "schedule {name} (every tick, all caught up) started {n} invocations for at least {lower} ticks \
                     (up to {caught} ms): a tick never fired; they started at {starts:?} ms"
                ));
            }
            let first_tick = (put_first / TICK_MS + 1) * TICK_MS;
            for (k, at) in starts.iter().enumerate() {
                let tick = first_tick + k as u64 * TICK_MS;
                if *at < tick {
                    return world.fail(format!("schedule {name}: invocation {k} ran at {at} ms, before tick {tick} ms"));
                }
            }
        } else if n < extra_min {
            return world.fail(format!("schedule {name} started {n} invocations for {extra_min} successful triggers"));
        }
        let appended = world.log.next_offset(*book, guest::ticks_of(name));
        if appended != n {
            return world.fail(format!("schedule {name}: {n} invocations ran and appended {appended} records"));
        }
    }
    world.stats.lock().expect("not poisoned").ticks = t.ticks.len() as u64;
    drop(t);
    *world.schedules_done.lock().expect("not poisoned") = true;
}

/// The IDs of the schedules' invocations whose Init the log holds (started).
fn started_ticks(log: &SimLog) -> BTreeSet<String> {
    use crate::record::Step;
    let inits = placed_steps(log).flat_map(|(_, _, steps)| steps);
    inits
        .filter_map(|step| match step {
            Step::Init(kind::Init { id, function, .. }) if function == guest::TICKER => Some(id.to_string()),
            _ => None,
        })
        .collect()
}
