//! One instance of an exactly-once invocation: its step log, `cursorTS`, and the
//! protocols' reads and writes (Halfmoon Figures 5 and 7, Boki Figure 6).
//!
//! Invariants, for every instance ID:
//! - The step log is a sequence: record `k` of `step_tag(id)` is step `k`, and is only
//!   ever appended by a conditional append at position `k`, so peer instances of one
//!   invocation (a retry racing a re-execution, two nodes) agree on every step: the
//!   loser of a race adopts the winner's record, values included.
//! - A re-execution takes every step it reaches from the log instead of doing it again;
//!   a recorded step of another kind than the one asked for is non-determinism and
//!   aborts the attempt.
//! - `cursor` only moves forward: it is the seqnum of the last step taken, and every
//!   log-free operation is parameterised by it, so it returns or does the same thing in
//!   every execution.
//! - Read-optimized: a version is written to the store before the write-log record
//!   that makes it visible, so a reader always finds the version it is pointed at.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tally_logsvc::{BookId, Context, Error as LogError, SeqNum, Tag};

use super::record::{self, object_tag, step_tag, transition_tag, Outcome, Step, Transition};
use super::{fresher_value, version_value, visible_write, Abort, Durable};
use crate::config::Protocol;
use crate::state::Version;

/// The protocol an instance uses for one table, decided at its first use of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effective {
    ReadOptimized,
    WriteOptimized,
    Symmetric,
    Unsafe,
    /// During a switch between read- and write-optimized (Halfmoon §4.7, §5.2): reads
    /// look at both stores and are logged, writes go to both.
    Transitional,
}

/// Aborts an instance after a number of effects, as if its process died there.
#[derive(Debug)]
pub struct CrashAfter(AtomicU64);

impl CrashAfter {
    pub fn new(effects: u64) -> Arc<CrashAfter> {
        Arc::new(CrashAfter(AtomicU64::new(effects)))
    }

    /// Counts one effect; true when this one is the last before the crash.
    fn hit(&self) -> bool {
        self.0.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok_and(|before| before == 1)
    }
}

/// A decoded step record.
#[derive(Clone, Debug)]
struct Recorded {
    seqnum: u64,
    step: Step,
}

/// What an instance is of: the invocation it executes.
pub struct Of {
    pub id: String,
    pub book: BookId,
    pub function: String,
    /// Not a child invocation.
    pub root: bool,
    pub input: Bytes,
    /// The protocols the function was deployed with, per table.
    pub declared: Arc<std::collections::BTreeMap<String, Protocol>>,
    pub crash: Option<Arc<CrashAfter>>,
}

pub struct Instance {
    svc: Arc<Durable>,
    pub id: String,
    pub book: BookId,
    function: String,
    root: bool,
    input: Bytes,
    step_tag: Tag,
    /// The step log as far as this instance knows it.
    steps: Vec<Recorded>,
    /// The next step number.
    next: usize,
    /// `cursorTS`; 0 until `init`.
    cursor: u64,
    init_cursor: u64,
    /// Consecutive log-free writes at this cursor (write-optimized versions).
    counter: u32,
    protocols: HashMap<String, Effective>,
    /// The protocols the function was deployed with, per table.
    declared: Arc<std::collections::BTreeMap<String, Protocol>>,
    crash: Option<Arc<CrashAfter>>,
}

impl Instance {
    pub fn new(svc: Arc<Durable>, of: Of) -> Instance {
        Instance {
            step_tag: step_tag(&of.id),
            svc,
            id: of.id,
            book: of.book,
            function: of.function,
            root: of.root,
            input: of.input,
            steps: Vec::new(),
            next: 0,
            cursor: 0,
            init_cursor: 0,
            counter: 0,
            protocols: HashMap::new(),
            declared: of.declared,
            crash: of.crash,
        }
    }

    pub fn initialized(&self) -> bool {
        self.cursor != 0
    }

    pub fn crash(&self) -> Option<Arc<CrashAfter>> {
        self.crash.clone()
    }

    /// Counts an effect against the crash hook.
    fn effect(&self) -> Result<(), Abort> {
        match &self.crash {
            Some(c) if c.hit() => Err(Abort::Crash),
            _ => Ok(()),
        }
    }

    /// Appends the init record, or recovers the step log of an earlier execution.
    /// Returns the logged result if the invocation has finished already.
    pub async fn init(&mut self, ctx: &mut Context) -> Result<Option<Outcome>, Abort> {
        if self.initialized() {
            return Ok(None);
        }
        if self.input.len() > super::PAYLOAD_MAX {
            return Err(Abort::Refused(crate::RuntimeError::TooLarge {
                what: "the input of an exactly-once invocation",
                size: Some(self.input.len() as u64),
                limit: super::PAYLOAD_MAX as u64,
            }));
        }
        self.svc.register_book(self.book).await?;
        let init =
            Step::Init { id: self.id.clone(), function: self.function.clone(), root: self.root, input: self.input.clone() };
        let tags = [self.step_tag, record::instances_tag()];
        let log = &self.svc.log;
        match log.cond_append(ctx, self.book, &tags, record::encode(&init), self.step_tag, 0).await {
            Ok(s) => {
                self.steps.push(Recorded { seqnum: s.0, step: init });
                self.effect()?;
            }
            Err(LogError::Conflict { .. }) => self.load_steps(ctx, 0).await?,
            Err(e) => return Err(e.into()),
        }
        // Offset 0 is taken, yet nothing is left: garbage collection took the step log
        // of an invocation that finished longer ago than `results_kept_ms`.
        let first = self.steps.first().ok_or_else(|| {
            Abort::Refused(crate::RuntimeError::Conflict(format!(
                "invocation {:?} finished and its result is no longer kept; use a new idempotency key",
                self.id
            )))
        })?;
        match &first.step {
            Step::Init { id, function, input, .. } if *id == self.id => {
                // Only a client reusing an idempotency key for another request gets here.
                if *function != self.function || *input != self.input {
                    return Err(Abort::Refused(crate::RuntimeError::Conflict(format!(
                        "invocation {:?} was started with another function or input; \
                         an idempotency key names one request",
                        self.id
                    ))));
                }
            }
            other => return Err(Abort::internal(format!("step log of {:?} starts with {other:?}", self.id))),
        }
        self.cursor = first.seqnum;
        self.init_cursor = first.seqnum;
        self.next = 1;
        Ok(self.steps.iter().find_map(|r| match &r.step {
            Step::Result { outcome } => Some(outcome.clone()),
            _ => None,
        }))
    }

    /// Reads the step log from seqnum `from` on into `steps`.
    async fn load_steps(&mut self, ctx: &mut Context, from: u64) -> Result<(), Abort> {
        let mut at = from;
        let known = self.steps.last().map(|r| r.seqnum);
        while let Some(r) = self.svc.log.read_next(ctx, self.book, self.step_tag, SeqNum(at)).await? {
            at = r.seqnum.0 + 1;
            if known.is_some_and(|k| r.seqnum.0 <= k) {
                continue;
            }
            let step = record::decode("step", &r.data)?;
            self.steps.push(Recorded { seqnum: r.seqnum.0, step });
        }
        Ok(())
    }

    /// Moves past a step taken now or recorded earlier.
    fn take(&mut self, seqnum: u64) {
        self.next += 1;
        if seqnum > self.cursor {
            self.cursor = seqnum;
            self.counter = 0;
        }
    }

    /// The recorded step `next`, if the log has it, checked against `kind`.
    fn recorded(&self, kind: &str) -> Result<Option<Recorded>, Abort> {
        match self.steps.get(self.next) {
            Some(r) if r.step.kind() == kind => Ok(Some(r.clone())),
            Some(r) => Err(Abort::NonDeterministic(format!(
                "step {} of {:?} was {} and is now {kind}",
                self.next,
                self.id,
                r.step.kind()
            ))),
            None => Ok(None),
        }
    }

    /// Logs `step` as step `next` (with `extra` tags besides the step log's), or takes
    /// what is recorded there: from an earlier execution, or from a peer that won the
    /// race for the position.
    async fn log_step(&mut self, ctx: &mut Context, step: Step, extra: &[Tag]) -> Result<Recorded, Abort> {
        let kind = step.kind();
        if let Some(r) = self.recorded(kind)? {
            self.take(r.seqnum);
            return Ok(r);
        }
        let mut tags = Vec::with_capacity(1 + extra.len());
        tags.push(self.step_tag);
        tags.extend_from_slice(extra);
        let data = record::encode(&step);
        let position = self.next as u64;
        match self.svc.log.cond_append(ctx, self.book, &tags, data, self.step_tag, position).await {
            Ok(s) => {
                self.steps.push(Recorded { seqnum: s.0, step });
                self.take(s.0);
                self.effect()?;
                Ok(self.steps[self.next - 1].clone())
            }
            Err(LogError::Conflict { holder: Some(h) }) => {
                self.load_steps(ctx, h.0).await?;
                let r = self
                    .recorded(kind)?
                    .ok_or_else(|| Abort::internal(format!("step {position} of {:?} is held but unreadable", self.id)))?;
                self.take(r.seqnum);
                Ok(r)
            }
            Err(LogError::Conflict { holder: None }) => {
                Err(Abort::internal(format!("step {position} of {:?} was trimmed", self.id)))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The protocol of `table` for this instance: the declared one for `unsafe` tables,
    /// otherwise what the table's transition log says as of the instance's start.
    async fn protocol(&mut self, ctx: &mut Context, table: &str) -> Result<Effective, Abort> {
        if let Some(&p) = self.protocols.get(table) {
            return Ok(p);
        }
        let declared =
            self.declared.get(table).or_else(|| self.svc.config.tables.get(table)).copied().unwrap_or(self.svc.config.protocol);
        let effective = if declared == Protocol::Unsafe {
            Effective::Unsafe
        } else {
            self.init_checked(ctx).await?;
            match self.transition_at(ctx, table, declared).await? {
                Transition::End { protocol, .. } => effective(protocol),
                Transition::Begin { .. } => Effective::Transitional,
            }
        };
        self.protocols.insert(table.to_string(), effective);
        Ok(effective)
    }

    /// The transition record in effect for `table` at this instance's start, creating
    /// the table's first one (with the declared protocol) if it has none.
    async fn transition_at(&self, ctx: &mut Context, table: &str, declared: Protocol) -> Result<Transition, Abort> {
        let tag = transition_tag(table);
        let log = &self.svc.log;
        let found = match log.read_prev(ctx, self.book, tag, SeqNum(self.init_cursor)).await? {
            Some(r) => Some(r),
            None => log.read_next(ctx, self.book, tag, SeqNum(0)).await?,
        };
        let record = match found {
            Some(r) => r,
            None => {
                let first = Transition::End {
                    table: table.to_string(),
                    protocol: if declared == Protocol::Auto { Protocol::ReadOptimized } else { declared },
                    auto: declared == Protocol::Auto,
                };
                // Listed first, so that no table escapes garbage collection.
                self.svc.register_table(self.book, table).await?;
                match log.cond_append(ctx, self.book, &[tag], record::encode(&first), tag, 0).await {
                    Ok(_) => return Ok(first),
                    Err(LogError::Conflict { .. }) => log
                        .read_next(ctx, self.book, tag, SeqNum(0))
                        .await?
                        .ok_or_else(|| Abort::internal(format!("the transition log of {table:?} vanished")))?,
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let t: Transition = record::decode("transition", &record.data)?;
        if t.table() != table {
            return Err(Abort::internal(format!("tables {table:?} and {:?} share a transition tag", t.table())));
        }
        Ok(t)
    }

    /// `init` for a state operation: an invocation that finished already cannot be
    /// running one.
    async fn init_checked(&mut self, ctx: &mut Context) -> Result<(), Abort> {
        match self.init(ctx).await? {
            None => Ok(()),
            Some(_) => Err(Abort::internal(format!("{:?} runs again after its result was logged", self.id))),
        }
    }

    fn store_table(&self, table: &str) -> String {
        format!("{:x}/{table}", self.book.0)
    }

    pub async fn get(&mut self, ctx: &mut Context, table: &str, key: &[u8]) -> Result<Option<Bytes>, Abort> {
        super::check_object(table, key, None)?;
        let st = self.store_table(table);
        let protocol = self.protocol(ctx, table).await?;
        self.svc.observe(self.book, table, protocol, false);
        let store = &self.svc.store;
        match protocol {
            Effective::Unsafe => Ok(store.get_latest(&st, key).await?.and_then(|(_, v)| v)),
            Effective::ReadOptimized => {
                let visible = visible_write(&self.svc.log, ctx, self.book, table, key, self.cursor).await?;
                match visible {
                    Some(w) => Ok(version_value(&**store, &st, table, key, w.version).await?),
                    None => Ok(None),
                }
            }
            Effective::WriteOptimized | Effective::Symmetric | Effective::Transitional => {
                let value = match self.recorded("read")? {
                    Some(_) => None,
                    None if protocol == Effective::Transitional => {
                        fresher_value(&self.svc, ctx, self.book, &st, table, key).await?
                    }
                    None => store.get_latest(&st, key).await?.and_then(|(_, v)| v),
                };
                match self.log_step(ctx, Step::Read { value }, &[]).await?.step {
                    Step::Read { value } => Ok(value),
                    _ => unreachable!("log_step checks the kind"),
                }
            }
        }
    }

    /// Sets (or, with `None`, deletes) the value of `(table, key)`.
    pub async fn put(&mut self, ctx: &mut Context, table: &str, key: &[u8], value: Option<Bytes>) -> Result<(), Abort> {
        super::check_object(table, key, value.as_deref())?;
        let st = self.store_table(table);
        let store = self.svc.store.clone();
        let protocol = self.protocol(ctx, table).await?;
        self.svc.observe(self.book, table, protocol, true);
        match protocol {
            Effective::Unsafe => {
                store.put_latest(&st, key, value).await?;
                self.effect()
            }
            Effective::ReadOptimized | Effective::Transitional => {
                // The version comes from the instance ID and the step (Halfmoon §4.1), the
                // same in every execution: it is stored before the write-log record that
                // makes it visible, without a log append of its own.
                let step = self.next;
                let version = version_of(&self.id, step);
                if self.steps.len() <= step {
                    store.put_version(&st, key, version, value.clone()).await?;
                    self.effect()?;
                }
                let key_bytes = Bytes::copy_from_slice(key);
                let write = Step::Write { table: table.to_string(), key: key_bytes, version, migrated_from: None };
                let logged = self.log_step(ctx, write, &[object_tag(table, key)]).await?.seqnum;
                if protocol == Effective::Transitional {
                    // Visible to write-optimized readers too, ordered by the write log.
                    store.put_if_newer(&st, key, Version { cursor: logged, counter: 0 }, value).await?;
                    self.effect()?;
                }
                Ok(())
            }
            Effective::WriteOptimized => {
                self.counter += 1;
                let version = Version { cursor: self.cursor, counter: self.counter };
                store.put_if_newer(&st, key, version, value).await?;
                self.effect()
            }
            Effective::Symmetric => {
                let step = Step::LoggedWrite { table: table.to_string(), key: Bytes::copy_from_slice(key), value };
                let r = self.log_step(ctx, step, &[]).await?;
                let Step::LoggedWrite { value, .. } = r.step else { unreachable!("log_step checks the kind") };
                store.put_if_newer(&st, key, Version { cursor: r.seqnum, counter: 0 }, value).await?;
                self.effect()
            }
        }
    }

    /// Before a child invocation: the logged outcome if an earlier execution finished
    /// it, otherwise the child's instance ID.
    pub async fn child(&mut self, ctx: &mut Context) -> Result<Result<Outcome, String>, Abort> {
        self.init_checked(ctx).await?;
        if let Some(r) = self.recorded("invoke")? {
            self.take(r.seqnum);
            let Step::Invoke { outcome } = r.step else { unreachable!("recorded checks the kind") };
            return Ok(Ok(outcome));
        }
        Ok(Err(format!("{}.{}", self.id, self.next)))
    }

    /// After a child invocation finished for good: logs its outcome (or takes a peer's).
    pub async fn child_finished(&mut self, ctx: &mut Context, outcome: Outcome) -> Result<Outcome, Abort> {
        match self.log_step(ctx, Step::Invoke { outcome }, &[]).await?.step {
            Step::Invoke { outcome } => Ok(outcome),
            _ => unreachable!("log_step checks the kind"),
        }
    }

    /// Logs `outcome` as the result of an invocation that keeps failing, after whatever
    /// steps its attempts logged (or takes the result a peer logged meanwhile).
    pub async fn give_up(&mut self, ctx: &mut Context, outcome: Outcome) -> Result<Outcome, Abort> {
        if let Some(logged) = self.init(ctx).await? {
            return Ok(logged);
        }
        self.next = self.steps.len();
        self.finish(ctx, outcome).await
    }

    /// Logs the invocation's final outcome (or takes a peer's) and returns it.
    pub async fn finish(&mut self, ctx: &mut Context, outcome: Outcome) -> Result<Outcome, Abort> {
        match self.log_step(ctx, Step::Result { outcome }, &[record::instances_tag()]).await?.step {
            Step::Result { outcome } => Ok(outcome),
            _ => unreachable!("log_step checks the kind"),
        }
    }
}

/// The version a read-optimized write at `step` of instance `id` stores: a hash, so
/// versions of one object are unique but not ordered (the write log orders them).
fn version_of(id: &str, step: usize) -> u64 {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(id.as_bytes());
    h.update([0]);
    h.update((step as u64).to_be_bytes());
    u64::from_be_bytes(h.finalize()[..8].try_into().expect("8 bytes"))
}

fn effective(p: Protocol) -> Effective {
    match p {
        Protocol::ReadOptimized | Protocol::Auto => Effective::ReadOptimized,
        Protocol::WriteOptimized => Effective::WriteOptimized,
        Protocol::Symmetric => Effective::Symmetric,
        Protocol::Unsafe => Effective::Unsafe,
    }
}
