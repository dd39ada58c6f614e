//! Positions that instances on this node read at before their Init is logged
//! (`instance/snapshot.rs`): garbage collection keeps every stream's history from the
//! lowest of them on, as it does from the oldest unfinished root's Init
//! (`recovery.rs`, Halfmoon's t̄), since the log knows nothing of such a reader yet.
//!
//! An instance pins 0 (everything) before it looks for its position and moves the pin
//! there once it knows it, so a collection that computed its horizon before the pin
//! existed can only have chosen a point that no record lies between the position and:
//! the horizon is at most one past the book's newest record when it was computed, and
//! the position is at least that record.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The positions pinned on this node, each with how many pins hold it.
#[derive(Clone, Default)]
pub(crate) struct Pins(Arc<Mutex<BTreeMap<u64, usize>>>);

impl Pins {
    /// Pins `at` until the returned pin is dropped.
    pub(crate) fn hold(&self, at: u64) -> Pin {
        *self.0.lock().expect("not poisoned").entry(at).or_default() += 1;
        Pin { pins: self.clone(), at }
    }

    /// The lowest position pinned, if any.
    pub(crate) fn floor(&self) -> Option<u64> {
        self.0.lock().expect("not poisoned").keys().next().copied()
    }

    fn release(&self, at: u64) {
        let mut held = self.0.lock().expect("not poisoned");
        if let Some(n) = held.get_mut(&at) {
            *n -= 1;
            if *n == 0 {
                held.remove(&at);
            }
        }
    }
}

/// One pin of a position: released when dropped.
pub(crate) struct Pin {
    pins: Pins,
    at: u64,
}

impl Pin {
    /// The position pinned.
    pub(crate) fn at(&self) -> u64 {
        self.at
    }

    /// Moves the pin to `at` (pinned first, then the old position released).
    pub(crate) fn move_to(&mut self, at: u64) {
        let moved = self.pins.hold(at);
        self.pins.release(self.at);
        self.at = at;
        std::mem::forget(moved);
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        self.pins.release(self.at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_the_lowest_position_still_pinned() {
        let pins = Pins::default();
        assert_eq!(pins.floor(), None);
        let mut a = pins.hold(0);
        let b = pins.hold(7);
        let c = pins.hold(7);
        assert_eq!(pins.floor(), Some(0));
        a.move_to(9);
        assert_eq!((pins.floor(), a.at()), (Some(7), 9));
        drop(b);
        assert_eq!(pins.floor(), Some(7), "a second pin still holds 7");
        drop(c);
        assert_eq!(pins.floor(), Some(9));
        drop(a);
        assert_eq!(pins.floor(), None);
    }
}
