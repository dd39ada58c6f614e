//! The caller's view of the log: for each physical log, the metalog position its reads
//! must reflect.
//!
//! Every completed request moves a context forward, which gives monotonic reads and
//! read-your-writes; a child invocation starts from [`Context::child`] and so sees
//! everything its parent saw. A context is a plain value with no IO, so a caller that
//! is itself an IO-free state machine can hold one.
//!
//! A log implementation moves a context with `Context::advance` after every request: the
//! async client of `tally-logsvc` and IO-free callers (the exactly-once core's simulated
//! log) alike.

use crate::types::{LogId, MetalogPosition};

/// The caller's metalog position per physical log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Context {
    positions: Vec<MetalogPosition>,
}

impl Context {
    /// A context that has seen nothing yet.
    pub fn new() -> Context {
        Context::default()
    }

    /// The context a child invocation inherits: a copy, so the child sees everything
    /// the parent saw, and the parent is not moved by what the child does.
    pub fn child(&self) -> Context {
        self.clone()
    }

    /// A context that has seen each log `i` up to `positions[i]` (a client's session,
    /// sent back with its next request).
    pub fn from_positions(positions: Vec<MetalogPosition>) -> Context {
        Context { positions }
    }

    /// The position of every log this context has seen, by log.
    pub fn positions(&self) -> &[MetalogPosition] {
        &self.positions
    }

    pub fn position(&self, log: LogId) -> MetalogPosition {
        self.positions.get(log.0 as usize).copied().unwrap_or(MetalogPosition::ZERO)
    }

    /// Whether this context has seen everything `other` has.
    pub fn covers(&self, other: &Context) -> bool {
        other.positions.iter().enumerate().all(|(i, &p)| self.position(LogId(i as u8)) >= p)
    }

    /// Moves this context past everything `other` has seen (a parent after its child
    /// returned).
    pub fn merge(&mut self, other: &Context) {
        for (i, &p) in other.positions.iter().enumerate() {
            self.advance(LogId(i as u8), p);
        }
    }

    /// Records that the caller has now seen `log` up to `position`, the position a
    /// completed request returned. A log implementation calls this after every request
    /// that reached the log (a success, or a conditional append that lost its offset),
    /// so the caller's next request waits for at least that position. Positions never
    /// move back: an older position leaves the context as it is.
    pub fn advance(&mut self, log: LogId, position: MetalogPosition) {
        let i = log.0 as usize;
        if self.positions.len() <= i {
            self.positions.resize(i + 1, MetalogPosition::ZERO);
        }
        self.positions[i] = self.positions[i].max(position);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Term;

    fn at(term: u16, index: u64) -> MetalogPosition {
        MetalogPosition::new(Term(term), index)
    }

    #[test]
    fn advance_only_moves_forward_and_merge_takes_the_later_position() {
        let mut ctx = Context::new();
        assert_eq!(ctx.position(LogId(3)), MetalogPosition::ZERO);
        ctx.advance(LogId(1), at(1, 5));
        ctx.advance(LogId(1), at(1, 2));
        assert_eq!(ctx.position(LogId(1)), at(1, 5), "an older position leaves the context as it is");
        ctx.advance(LogId(1), at(2, 0));
        assert_eq!(ctx.position(LogId(1)), at(2, 0), "a later term is later whatever the index");
        assert_eq!(ctx.position(LogId(0)), MetalogPosition::ZERO);

        let mut child = ctx.child();
        child.advance(LogId(0), at(2, 7));
        child.advance(LogId(4), at(1, 1));
        assert_eq!(ctx.position(LogId(0)), MetalogPosition::ZERO, "the parent is not moved by its child");
        ctx.advance(LogId(1), at(2, 3));
        ctx.merge(&child);
        assert_eq!((ctx.position(LogId(0)), ctx.position(LogId(1)), ctx.position(LogId(4))), (at(2, 7), at(2, 3), at(1, 1)));
    }
}
