//! The SCHEDULES listing: every node learns the schedules' names and books from it, and
//! the owner of the platform book compacts it, so that creating and deleting schedules
//! does not grow it for ever.
//!
//! A compaction lists every live schedule again (a change of its stream that changes
//! nothing but the offset, also in SCHEDULES, so that it fails if the schedule changed
//! meanwhile, a deletion included), then appends where the oldest live listing is to
//! SCHEDULES_COMPACTED, then trims SCHEDULES below it. A reader that finds a compaction
//! it has read past forgets the names whose latest listing is below it: their deletion
//! may have been trimmed before the reader saw it, and every live one was listed again.
//! Each deleted schedule keeps the last record of its own stream (a new schedule of that
//! name goes on from its offset).

use super::*;
use crate::node::Durable;

/// Listings beyond twice the live schedules before a compaction is due.
const COMPACT_SLACK: usize = 64;

impl Durable {
    /// The live schedules, each with its book (and where it was listed last: 0 for one
    /// this node listed and has not read back yet), reading what is new in SCHEDULES.
    pub(super) async fn known_schedules<R>(&self, f: impl FnOnce(&BTreeMap<String, (BookId, u64)>) -> R) -> Result<R> {
        self.read_listing(|l| f(&l.live)).await
    }

    /// Reads what is new in SCHEDULES (and the last compaction), then applies `f`.
    async fn read_listing<R>(&self, f: impl FnOnce(&Listing) -> R) -> Result<R> {
        let mut l = self.drivers.known.lock().await;
        let mut ctx = Context::new();
        while let Some(r) = self.core.log.read_next(&mut ctx, PLATFORM_BOOK, SCHEDULES, SeqNum(l.next)).await? {
            l.next = r.seqnum.0 + 1;
            l.read.push_back(r.seqnum.0);
            match record::decode::<State>("schedule", &r.data) {
                Ok(s) => match s.spec {
                    Some(spec) => {
                        l.live.insert(s.name, (spec.book, r.seqnum.0));
                    }
                    // A deleted schedule is forgotten: only live ones are listed and counted.
                    None => {
                        l.live.remove(&s.name);
                    }
                },
                Err(e) => tracing::error!(seqnum = %r.seqnum, "skipping a schedule listing: {e}"),
            }
        }
        if let Some(m) = self.core.log.read_prev(&mut ctx, PLATFORM_BOOK, SCHEDULES_COMPACTED, SeqNum::MAX).await? {
            let below: u64 = record::decode("schedules' compaction", &m.data)?;
            // Only once the listings before the compaction are read.
            if m.seqnum.0 < l.next && below > l.compacted {
                l.live.retain(|_, (_, at)| *at >= below);
                l.read.retain(|&s| s >= below);
                l.compacted = below;
            }
        }
        Ok(f(&l))
    }

    /// Compacts SCHEDULES if it holds more than twice the live schedules' listings
    /// (plus some); returns whether it did.
    pub(crate) async fn compact_listing(&self) -> Result<bool> {
        let (names, due) = self
            .read_listing(|l| (l.live.keys().cloned().collect::<Vec<_>>(), l.read.len() > 2 * l.live.len() + COMPACT_SLACK))
            .await?;
        if !due {
            return Ok(false);
        }
        for name in names {
            self.change_schedule(&name, true, |old, _| Ok(old.spec.is_some().then(|| old.next(|_| {})))).await?;
        }
        let below = self.read_listing(|l| l.live.values().map(|&(_, at)| at).min().unwrap_or(l.next)).await?;
        let mut ctx = Context::new();
        let marker = self.core.log.append(&mut ctx, PLATFORM_BOOK, &[SCHEDULES_COMPACTED], record::encode(&below)).await?;
        self.core.log.trim(&mut ctx, PLATFORM_BOOK, SCHEDULES, SeqNum(below)).await?;
        self.core.log.trim(&mut ctx, PLATFORM_BOOK, SCHEDULES_COMPACTED, marker).await?;
        Ok(true)
    }
}
