//! The simulator as a log for a caller outside it: one request at a time to an engine of
//! the simulated cluster, the simulation stepped (events, ticks, network, disk) until the
//! engine completes it. [`SimLog`] is the [`LogBook`] over it, so that the conformance
//! suite checks the real engines, sequencers and storage nodes without a network.
//!
//! The cluster serves without faults: the run is all liveness phase (no loss,
//! duplication, crash or partition), with the simulator's delays, reordering, disk
//! latency and batching. It takes its first call once settled: its late members joined
//! and its logs were added. (A conditional append under way when a log is added may
//! fail with `Unavailable`, as the contract allows, but the conformance suite checks a
//! log that serves.) Its own random clients (if `SimOptions::clients` asks for them)
//! run alongside, in their own books, and the oracle checks every event as in a run: a
//! violation panics the caller with its seed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

use super::{quiet_panics, Node, Sim, SimOptions, Violation};
use crate::context::Context;
use crate::controller::Role;
use crate::engine::OpId;
use crate::error::Error;
use crate::logbook::{BoxFuture, LogBook, LogResult};
use crate::message::{Cond, LogRecord, Reply, Request};
use crate::types::{BookId, LogId, MetalogPosition, Micros, NodeId, SeqNum, Tag};

/// A call's deadline in simulated time, past the engines' own operation timeout (2 s),
/// so that a request the engine gives up on fails as the engine says.
const CALL_TIMEOUT_US: Micros = 5_000_000;
/// How long the cluster may take to settle.
const SETTLE_US: Micros = 5_000_000;

/// An engine's completion: the result, and the position of the log that served it.
type Completion = (Result<Reply, Error>, LogId, MetalogPosition);

/// The request a caller outside the simulation waits for.
pub(super) struct Call {
    pub(super) engine: NodeId,
    pub(super) op: OpId,
    pub(super) done: Option<Completion>,
}

impl Sim {
    /// A simulation that serves calls (see the module doc): `opts` in a run that is all
    /// liveness phase, stepped until it settled.
    pub fn serving(seed: u64, opts: SimOptions) -> Sim {
        quiet_panics();
        let mut sim = Sim::new(seed, SimOptions { safety_us: 0, liveness_us: Micros::MAX / 2, ..opts });
        while !sim.settled() {
            let stepped = sim.step(SETTLE_US).unwrap_or_else(|v| panic!("{v}"));
            assert!(stepped, "the cluster did not settle in {SETTLE_US}us; reproduce with seed={seed}");
        }
        sim
    }

    /// Whether every engine has the configuration with every engine and every log.
    fn settled(&self) -> bool {
        let (engines, logs) = (self.engine_ids(), self.opts.n_logs + self.opts.add_logs);
        engines.iter().all(|n| match self.slots[n].node.as_ref() {
            Some(Node::Engine(e)) => e.n_logs() == Some(logs) && e.engines().len() == engines.len(),
            _ => false,
        })
    }

    /// The engines, in the order of their ids.
    pub fn engine_ids(&self) -> Vec<NodeId> {
        self.roster.iter().filter(|(_, r)| *r == Role::Engine).map(|(n, _)| *n).collect()
    }

    /// Runs `request` on `engine` for a caller whose view of the log is `ctx`, as the
    /// engine's client does: a read the engine can answer in place is answered so (half
    /// the time, as the simulator's own clients do), any other request is submitted and
    /// the simulation stepped until the engine completes it, or `CALL_TIMEOUT_US` of
    /// simulated time passed (`Error::Timeout`). Once the log served the request (a
    /// success or a conflict), `ctx` moves to the position it was served at.
    pub fn call(&mut self, engine: NodeId, ctx: &mut Context, request: Request) -> Result<Reply, Error> {
        let Some((result, log, position)) = self.serve(engine, ctx, request) else {
            return Err(Error::Timeout(CALL_TIMEOUT_US / 1000));
        };
        if result.is_ok() || matches!(result, Err(Error::Conflict { .. })) {
            ctx.advance(log, position);
        }
        result
    }

    fn serve(&mut self, engine: NodeId, ctx: &Context, request: Request) -> Option<Completion> {
        let in_place = matches!(request, Request::ReadNext { .. } | Request::ReadPrev { .. }) && self.rng.chance(0.5);
        let (now, op) = (self.now, self.next_op);
        self.next_op += 1;
        let Some(Node::Engine(e)) = self.slots.get_mut(&engine).and_then(|s| s.node.as_mut()) else {
            panic!("{engine} is no running engine");
        };
        if let Some(done) = in_place.then(|| e.read_now(ctx, &request)).flatten() {
            return Some(done);
        }
        e.submit(now, op, ctx, request);
        self.call = Some(Call { engine, op, done: None });
        self.tick_after_input(engine);
        self.node_actions(engine);
        if !self.oracle.violations.is_empty() {
            let what = std::mem::take(&mut self.oracle.violations);
            panic!("{}", Violation { seed: self.seed, at_us: self.now, what });
        }
        let deadline = self.now + CALL_TIMEOUT_US;
        loop {
            if let Some(done) = self.call.as_mut().and_then(|c| c.done.take()) {
                self.call = None;
                return Some(done);
            }
            if !self.step(deadline).unwrap_or_else(|v| panic!("{v}")) {
                // The engine may still complete it later: that completion is dropped.
                self.call = None;
                return None;
            }
        }
    }
}

/// The simulator's log as a [`LogBook`]: each call goes to the next engine in turn, so
/// that a caller's context crosses nodes from one call to the next.
pub struct SimLog {
    sim: Mutex<Sim>,
    engines: Vec<NodeId>,
    turn: AtomicUsize,
}

impl SimLog {
    /// A log served by [`Sim::serving`]`(seed, opts)`.
    pub fn new(seed: u64, opts: SimOptions) -> SimLog {
        let sim = Sim::serving(seed, opts);
        let engines = sim.engine_ids();
        SimLog { sim: Mutex::new(sim), engines, turn: AtomicUsize::new(0) }
    }

    fn call(&self, ctx: &mut Context, request: Request) -> LogResult<Reply> {
        let engine = self.engines[self.turn.fetch_add(1, Ordering::Relaxed) % self.engines.len()];
        self.sim.lock().expect("an earlier call panicked").call(engine, ctx, request)
    }

    fn append_request(&self, ctx: &mut Context, request: Request) -> LogResult<SeqNum> {
        match self.call(ctx, request)? {
            Reply::Appended(seqnum) => Ok(seqnum),
            other => Err(unexpected(&other)),
        }
    }

    fn read(&self, ctx: &mut Context, request: Request) -> LogResult<Option<LogRecord>> {
        match self.call(ctx, request)? {
            Reply::Read(record) => Ok(record),
            other => Err(unexpected(&other)),
        }
    }

    fn expect(&self, ctx: &mut Context, request: Request, expected: Reply) -> LogResult<()> {
        match self.call(ctx, request)? {
            reply if reply == expected => Ok(()),
            other => Err(unexpected(&other)),
        }
    }
}

/// An engine answered with another request's reply: reported as the engine's client
/// reports it, as an error rather than a panic.
fn unexpected(reply: &Reply) -> Error {
    Error::Unavailable(format!("the engine answered with an unexpected reply: {reply:?}"))
}

/// Each call runs the simulation inside its future, on its first poll: the future is
/// ready when polled once.
impl LogBook for SimLog {
    fn append<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
    ) -> BoxFuture<'a, LogResult<SeqNum>> {
        let request = Request::Append { book, tags: tags.to_vec(), data, cond: None, unchanged: vec![] };
        Box::pin(async move { self.append_request(ctx, request) })
    }

    fn cond_append<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
        cond_tag: Tag,
        cond_position: u64,
    ) -> BoxFuture<'a, LogResult<SeqNum>> {
        self.cond_append_if(ctx, book, tags, data, Cond { tag: cond_tag, position: cond_position }, &[])
    }

    fn cond_append_if<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tags: &'a [Tag],
        data: Bytes,
        cond: Cond,
        unchanged: &'a [Cond],
    ) -> BoxFuture<'a, LogResult<SeqNum>> {
        let request = Request::Append { book, tags: tags.to_vec(), data, cond: Some(cond), unchanged: unchanged.to_vec() };
        Box::pin(async move { self.append_request(ctx, request) })
    }

    fn read_next<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        min: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>> {
        Box::pin(async move { self.read(ctx, Request::ReadNext { book, tag, min }) })
    }

    fn read_prev<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        tag: Tag,
        max: SeqNum,
    ) -> BoxFuture<'a, LogResult<Option<LogRecord>>> {
        Box::pin(async move { self.read(ctx, Request::ReadPrev { book, tag, max }) })
    }

    fn trim<'a>(&'a self, ctx: &'a mut Context, book: BookId, tag: Tag, seqnum: SeqNum) -> BoxFuture<'a, LogResult<()>> {
        Box::pin(async move { self.expect(ctx, Request::Trim { book, tag, seqnum }, Reply::Trimmed) })
    }

    fn set_aux_data<'a>(
        &'a self,
        ctx: &'a mut Context,
        book: BookId,
        seqnum: SeqNum,
        aux: Bytes,
    ) -> BoxFuture<'a, LogResult<()>> {
        Box::pin(async move { self.expect(ctx, Request::SetAux { book, seqnum, aux }, Reply::AuxSet) })
    }
}
