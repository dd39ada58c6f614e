//! Claims: how many of a shard's pending messages this node's pops are taking now,
//! so that a push that wakes every waiting pop of the node has only as many of them
//! append a pop as it gave messages (the others wait for the next wake or look).
//!
//! A claim is a hint, never a promise: what a pop gets is decided by the log, and a
//! claim ends when its pop's record is read (or the pop fails), waking the waiting pops
//! if it got less than it claimed. Pops of other nodes do not see this node's claims.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tally_log_core::BookId;

/// A shard of a queue of a book.
type ShardKey = (BookId, String, u64);

/// The claims of this node's pops, by shard.
#[derive(Default)]
pub(crate) struct Claims {
    claimed: Arc<Mutex<HashMap<ShardKey, u64>>>,
}

/// One pop's claim, given back when dropped.
pub(crate) struct Claim {
    claimed: Arc<Mutex<HashMap<ShardKey, u64>>>,
    key: ShardKey,
    count: u64,
}

impl Claims {
    /// Claims up to `max` of the `pending` messages of the shard that no other pop of
    /// this node claimed; none if they all are.
    pub(crate) fn claim(&self, book: BookId, queue: &str, shard: u64, pending: u64, max: u64) -> Option<Claim> {
        let key = (book, queue.to_string(), shard);
        let mut claimed = self.claimed.lock().expect("not poisoned");
        let already = claimed.get(&key).copied().unwrap_or(0);
        let count = pending.saturating_sub(already).min(max);
        if count == 0 {
            return None;
        }
        *claimed.entry(key.clone()).or_insert(0) += count;
        Some(Claim { claimed: self.claimed.clone(), key, count })
    }
}

impl Claim {
    /// How many messages it claimed.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut claimed = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = claimed.get_mut(&self.key) {
            *n = n.saturating_sub(self.count);
            if *n == 0 {
                claimed.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_claim_what_others_did_not_until_they_give_it_back() {
        let claims = Claims::default();
        let first = claims.claim(BookId(1), "q", 0, 8, 5).expect("all 8 free");
        assert_eq!(first.count(), 5);
        let second = claims.claim(BookId(1), "q", 0, 8, 5).expect("3 free");
        assert_eq!(second.count(), 3);
        assert!(claims.claim(BookId(1), "q", 0, 8, 5).is_none(), "all claimed");
        // Another shard, queue or book is another count.
        assert!(claims.claim(BookId(1), "q", 1, 8, 5).is_some());
        assert!(claims.claim(BookId(2), "q", 0, 8, 5).is_some());
        // More pushes since: more to claim.
        assert_eq!(claims.claim(BookId(1), "q", 0, 10, 5).map(|c| c.count()), Some(2));
        drop(first);
        assert_eq!(claims.claim(BookId(1), "q", 0, 8, 5).map(|c| c.count()), Some(5));
        drop(second);
        assert!(claims.claimed.lock().unwrap().is_empty(), "every claim given back");
    }
}
