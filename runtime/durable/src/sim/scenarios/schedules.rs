//! Scenarios of schedules: their listing under creations and deletions.

use bytes::Bytes;
use tally_log_core::{Context, SeqNum};

use crate::schedule::{CatchUp, Overlap, ScheduleSpec, Timing};
use crate::tags::{PLATFORM_BOOK, SCHEDULES};

use super::{config, World, BOOK};

/// Review finding 10: the SCHEDULES listing kept every definition and deletion ever made,
/// so creating and deleting schedules grew it without bound (and every node starting
/// read all of it). The owner of the platform book now compacts it: every live schedule
/// is listed again, then the listing is trimmed below the oldest live listing.
#[test]
fn the_listing_of_schedules_stays_bounded_under_creations_and_deletions() {
    let mut w = World::new(config());
    let d = w.start(0);
    let spec = || ScheduleSpec {
        function: "put".into(),
        book: BOOK,
        input: Bytes::new(),
        timing: Timing::EveryMs(3_600_000),
        overlap: Overlap::default(),
        catch_up: CatchUp::default(),
    };
    let kept = ["kept-a", "kept-b"];
    for name in kept {
        w.run(d.schedules().put(name, spec(), Some(true))).expect("defined");
    }
    for i in 0..300 {
        let name = format!("brief-{i}");
        w.run(d.schedules().put(&name, spec(), Some(true))).expect("defined");
        w.run(d.schedules().delete(&name)).expect("deleted");
        if i % 50 == 49 {
            w.run(d.compact_listing()).expect("compacting");
        }
    }
    let listed = w.run(async {
        let (mut ctx, mut at, mut n) = (Context::new(), SeqNum(0), 0);
        while let Some(r) = d.core.log.read_next(&mut ctx, PLATFORM_BOOK, SCHEDULES, at).await.expect("a read") {
            at = SeqNum(r.seqnum.0 + 1);
            n += 1;
        }
        n
    });
    assert!(listed <= 2 * kept.len() + 64 + kept.len(), "SCHEDULES holds {listed} records");
    // Both a node that read it all along and one that starts now know the live ones only.
    let fresh = w.start(1);
    for node in [&d, &fresh] {
        let (page, next) = w.run(node.schedules().list("", 100)).expect("a listing");
        assert_eq!(page.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), kept);
        assert_eq!(next, None);
    }
    // A deleted name can be defined again.
    w.run(d.schedules().put("brief-7", spec(), Some(true))).expect("defined again");
    assert_eq!(w.run(fresh.schedules().get("brief-7")).expect("found").name, "brief-7");
}
