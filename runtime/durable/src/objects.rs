//! Durable JSON objects with transactions across them (BokiStore, Boki §5.2 and §5.4),
//! on the invocation's book: the log is the object store, and an object's state at a
//! seqnum is a pure function of the log up to it.
//!
//! ```text
//!   object stream (derived tag of the name, in the book's shadow):
//!     ObjectWrite{ops}            a plain write: a step of the writer's step log too
//!     TxnCommit{start, reads, writes}   a read-write transaction's commit: a step, and in
//!                                 the stream of every object it writes (alone, or in a
//!                                 group after a deferred Init: instance/snapshot.rs)
//!   state of O at s  = fold of O's effective records <= s, from the newest aux view
//!   TxnCommit at c committed  <=>  no effective write to any object of its read set
//!                                  lies in (start, c)   (recursively: only committed
//!                                  commits count as writes)
//! ```
//!
//! Isolation: transactions are serializable, in the order of their commit records
//! (strictly: a commit is ordered after every record appended before it). A read-write
//! transaction reads a snapshot at its start (the instance's `cursorTS` when it began),
//! buffers its writes and appends one commit record; it commits exactly when none of the
//! objects it read was written, by a plain write or a committed transaction, between
//! its start and its commit record (Tango's and Boki's conflict window, with the read set
//! rather than the write set, so blind writes such as increments never conflict). A
//! read-only transaction reads a consistent snapshot and appends nothing. Plain reads
//! outside a transaction read at the instance's `cursorTS`, as Halfmoon's read-optimized
//! reads do, so a re-execution reads what the first execution read.
//!
//! Operations are applied when the log is replayed, not when they are made: an
//! increment adds to whatever the field holds at its record. An operation that does not
//! fit the object at replay (a concurrent write made the field a string) does nothing.
//! A write checks its operation against the object as the writer sees it, and fails
//! with `invalid-argument` when it does not fit.
//!
//! Views (§5.4): a reader caches the object's state after the newest record it replayed
//! in that record's aux data (with a transaction's outcome), so the next reader on the
//! node replays only what is newer. Aux data is best-effort: a view lost is replayed.
//!
//! A transaction writes at most `TXN_WRITES_MAX` objects, so that its commit record's tags
//! fit the log's limit. Whether a commit committed is decided recursively from the earlier
//! commits in its window, remembered per node and in aux data.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tally_log_core::{BookId, Context, LogRecord, SeqNum};

use crate::abort::{Abort, VALUE_MAX};
use crate::core::{Core, View};
use crate::error::Error;
use crate::record::kind;
use crate::record::{self, Step};
use crate::replay;
use crate::tags::shadow;

/// The longest object name, in bytes.
pub const OBJECT_NAME_MAX: usize = 256;
/// The longest path (a JSON pointer), in bytes.
pub const PATH_MAX: usize = 1024;
/// The largest object, as JSON text: a write that would make it larger is refused,
/// and at replay an operation that would is skipped. A checkpoint of it fits a record.
pub const OBJECT_MAX: usize = 896 << 10;
/// The most objects one transaction writes: its commit record carries a tag per object
/// it writes, its step log's and [`crate::tags::LIBRARIES`], and a record at most
/// [`crate::env::TAGS_MAX`].
pub const TXN_WRITES_MAX: usize = 60;
/// The most objects one transaction reads (their names are in its commit record, and
/// its commit's decision looks at each one's stream).
pub const TXN_READS_MAX: usize = 1024;
/// The most operations one transaction makes.
pub const TXN_OPS_MAX: usize = 4096;
/// The most JSON one transaction reads (its objects' snapshots, which the host holds
/// while it runs).
pub const TXN_BYTES_MAX: usize = 16 << 20;
pub use crate::record::ObjOp;

impl ObjOp {
    fn path(&self) -> &str {
        match self {
            ObjOp::Set { path, .. } | ObjOp::Incr { path, .. } | ObjOp::Push { path, .. } | ObjOp::Remove { path } => path,
        }
    }

    /// The most this operation adds to an object's JSON text.
    fn growth(&self) -> usize {
        match self {
            ObjOp::Set { path, json } | ObjOp::Push { path, json } => path.len() + json.len() + 8,
            ObjOp::Incr { path, .. } => path.len() + 24,
            ObjOp::Remove { .. } => 0,
        }
    }

    /// Checks what can be checked without the object: the path, the JSON, the sizes.
    pub fn check(&self) -> Result<(), Error> {
        parse_path(self.path())?;
        match self {
            ObjOp::Set { json, .. } | ObjOp::Push { json, .. } => {
                if json.len() > VALUE_MAX {
                    return Err(Error::TooLarge { what: "a JSON value", size: Some(json.len() as u64), limit: VALUE_MAX as u64 });
                }
                parse_json(json).map(|_| ())
            }
            _ => Ok(()),
        }
    }
}

/// Checks an object name: 1 to [`OBJECT_NAME_MAX`] bytes of UTF-8 (any characters).
pub fn check_name(name: &str) -> Result<(), Error> {
    check_library_name("an object", name, OBJECT_NAME_MAX)
}

/// Checks the name of a library's thing (`what`): 1 to `max` bytes of UTF-8.
pub(crate) fn check_library_name(what: &str, name: &str, max: usize) -> Result<(), Error> {
    if name.is_empty() || name.len() > max {
        return Err(Error::InvalidArgument(format!("{what} name is 1 to {max} bytes, not {}", name.len())));
    }
    Ok(())
}

fn parse_json(json: &str) -> Result<Value, Error> {
    serde_json::from_str(json).map_err(|e| Error::InvalidArgument(format!("not JSON: {e}")))
}

/// The tokens of a JSON pointer: "" is the whole object, "/a/0/b~1c" is `a`, `0`, `b/c`.
pub fn parse_path(path: &str) -> Result<Vec<String>, Error> {
    if path.len() > PATH_MAX {
        return Err(Error::InvalidArgument(format!("a path is at most {PATH_MAX} bytes")));
    }
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(Error::InvalidArgument(format!("a path is a JSON pointer (\"\" or starting with '/'), not {path:?}")));
    };
    rest.split('/')
        .map(|t| {
            let mut out = String::with_capacity(t.len());
            let mut chars = t.chars();
            while let Some(c) = chars.next() {
                match c {
                    '~' => match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => {
                            return Err(Error::InvalidArgument(format!("{path:?}: '~' is followed by 0 or 1 in a JSON pointer")))
                        }
                    },
                    c => out.push(c),
                }
            }
            Ok(out)
        })
        .collect()
}

fn index_of(token: &str, len: usize) -> Option<usize> {
    if token.is_empty() || (token.len() > 1 && token.starts_with('0')) || !token.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token.parse::<usize>().ok().filter(|i| *i < len)
}

/// The value at `path`, if there is one.
pub fn get<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut at = value;
    for token in path {
        at = match at {
            Value::Object(map) => map.get(token)?,
            Value::Array(items) => items.get(index_of(token, items.len())?)?,
            _ => return None,
        };
    }
    Some(at)
}

/// The parent of `path`'s last token, made as objects where missing (`null` counts as
/// missing), or why it cannot be.
fn parent_mut<'a>(value: &'a mut Value, path: &[String]) -> Result<&'a mut Value, String> {
    let mut at = value;
    for token in &path[..path.len().saturating_sub(1)] {
        if at.is_null() {
            *at = Value::Object(Default::default());
        }
        at = match at {
            Value::Object(map) => map.entry(token.clone()).or_insert(Value::Null),
            Value::Array(items) => {
                let len = items.len();
                items
                    .get_mut(index_of(token, len).ok_or_else(|| format!("no element {token:?} in an array of {len}"))?)
                    .expect("checked")
            }
            other => return Err(format!("{token:?} is inside a {}, not an object or array", kind(other))),
        };
    }
    if at.is_null() && !path.is_empty() {
        *at = Value::Object(Default::default());
    }
    Ok(at)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The slot at `path`'s last token in `parent` (inserting null in an object).
fn slot<'a>(parent: &'a mut Value, last: &str, append: bool) -> Result<&'a mut Value, String> {
    match parent {
        Value::Object(map) => Ok(map.entry(last.to_string()).or_insert(Value::Null)),
        Value::Array(items) => {
            let len = items.len();
            if append && last == "-" {
                items.push(Value::Null);
                return Ok(&mut items[len]);
            }
            Ok(items
                .get_mut(index_of(last, len).ok_or_else(|| format!("no element {last:?} in an array of {len}"))?)
                .expect("checked"))
        }
        other => Err(format!("{last:?} is inside a {}, not an object or array", kind(other))),
    }
}

/// Applies `op` to `value`, or says why it does not fit (then `value` is unchanged:
/// a failure meets an existing value before anything is made, since what is made is
/// an object, and the JSON is parsed first).
pub fn apply(value: &mut Value, op: &ObjOp) -> Result<(), String> {
    let path = parse_path(op.path()).map_err(|e| e.to_string())?;
    let item = match op {
        ObjOp::Set { json, .. } | ObjOp::Push { json, .. } => Some(serde_json::from_str(json).map_err(|e| e.to_string())?),
        _ => None,
    };
    apply_in_place(value, op, &path, item)
}

fn apply_in_place(value: &mut Value, op: &ObjOp, path: &[String], item: Option<Value>) -> Result<(), String> {
    if let ObjOp::Remove { .. } = op {
        let Some((last, init)) = path.split_last() else {
            *value = Value::Null;
            return Ok(());
        };
        let mut at = &mut *value;
        for token in init {
            at = match at {
                Value::Object(map) => match map.get_mut(token) {
                    Some(v) => v,
                    None => return Ok(()),
                },
                Value::Array(items) => {
                    let len = items.len();
                    match index_of(token, len) {
                        Some(i) => &mut items[i],
                        None => return Ok(()),
                    }
                }
                _ => return Ok(()),
            };
        }
        match at {
            Value::Object(map) => {
                map.remove(last);
            }
            Value::Array(items) => {
                if let Some(i) = index_of(last, items.len()) {
                    items.remove(i);
                }
            }
            _ => {}
        }
        return Ok(());
    }
    let target = match path.split_last() {
        None => value,
        Some((last, _)) => slot(parent_mut(value, path)?, last, matches!(op, ObjOp::Set { .. }))?,
    };
    match op {
        ObjOp::Set { .. } => *target = item.expect("parsed"),
        ObjOp::Incr { by, .. } => {
            *target = match &*target {
                Value::Null => Value::from(*by),
                Value::Number(n) => match n.as_i64() {
                    Some(i) => Value::from(i.saturating_add(*by)),
                    None => match n.as_f64().map(|f| f + *by as f64).and_then(serde_json::Number::from_f64) {
                        Some(f) => Value::Number(f),
                        None => return Err("the sum is not a finite number".into()),
                    },
                },
                other => return Err(format!("incrementing a {}", kind(other))),
            }
        }
        ObjOp::Push { .. } => {
            let item = item.expect("parsed");
            match target {
                Value::Null => *target = Value::Array(vec![item]),
                Value::Array(items) => items.push(item),
                other => return Err(format!("pushing to a {}", kind(other))),
            }
        }
        ObjOp::Remove { .. } => unreachable!("handled above"),
    }
    Ok(())
}

/// An object being folded, with a bound on the length of its JSON text.
pub struct Folding {
    pub value: Value,
    bound: usize,
}

impl Folding {
    pub fn new(value: Value, len: usize) -> Folding {
        Folding { value, bound: len }
    }

    /// Applies `op` unless it does not fit or would make the object larger than
    /// [`OBJECT_MAX`] (the same decision on every replay: the exact length is measured
    /// whenever the bound passes the limit). Says why it did not apply.
    pub fn apply(&mut self, op: &ObjOp) -> Result<(), String> {
        let growth = op.growth();
        if self.bound + growth > OBJECT_MAX {
            self.bound = json_len(&self.value);
            if self.bound + growth > OBJECT_MAX {
                return Err(format!("the object would be larger than {OBJECT_MAX} bytes"));
            }
        }
        apply(&mut self.value, op)?;
        self.bound += growth;
        Ok(())
    }
}

pub fn json_len(v: &Value) -> usize {
    serde_json::to_vec(v).map(|v| v.len()).unwrap_or(usize::MAX)
}

/// What a record caches in its aux data: the views of the objects it writes (after it)
/// and, for a commit, its outcome. New fields go last.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuxView {
    pub committed: Option<bool>,
    pub views: Vec<(String, String)>,
}

impl AuxView {
    fn of(record: &LogRecord) -> AuxView {
        record.aux.as_deref().and_then(|a| record::decode::<AuxView>("aux view", a).ok()).unwrap_or_default()
    }
}

/// An [`AuxView`] read in place: its views borrow the record's aux bytes, so a reader
/// of one object's view, or of a commit's outcome, copies none of the other objects'
/// views a record may cache (a commit's caches one per object read at it).
#[derive(Deserialize)]
struct AuxViewRef<'a> {
    committed: Option<bool>,
    #[serde(borrow)]
    views: Vec<(&'a str, &'a str)>,
}

impl<'a> AuxViewRef<'a> {
    fn of(aux: &'a [u8]) -> Option<AuxViewRef<'a>> {
        record::decode::<AuxViewRef>("aux view", aux).ok()
    }

    /// The outcome a commit record caches, if it does.
    fn committed(record: &LogRecord) -> Option<bool> {
        record.aux.as_deref().and_then(AuxViewRef::of).and_then(|a| a.committed)
    }

    fn view(&self, object: &str) -> Option<&'a str> {
        self.views.iter().find(|(o, _)| *o == object).map(|(_, v)| *v)
    }
}

/// What one record of an object's stream does to the object.
enum Effect<'a> {
    /// Nothing (a transaction that only read it, or another object's record).
    None,
    Ops(&'a [ObjOp]),
    /// A commit that writes it, if it committed.
    Commit {
        start: u64,
        reads: &'a [String],
        ops: &'a [ObjOp],
    },
}

fn effect_on<'a>(step: &'a Step, object: &str) -> Effect<'a> {
    match step {
        Step::ObjectWrite(kind::ObjectWrite { object: o, ops }) if o == object => Effect::Ops(ops),
        Step::TxnCommit(kind::TxnCommit { start, reads, writes }) => match writes.iter().find(|(o, _)| o == object) {
            Some((_, ops)) => Effect::Commit { start: *start, reads, ops },
            None => Effect::None,
        },
        // A commit that rode its invocation's deferred Init (`instance/transactions.rs`).
        Step::Group(kind::Group { steps }) => {
            steps.iter().map(|s| effect_on(s, object)).find(|e| !matches!(e, Effect::None)).unwrap_or(Effect::None)
        }
        _ => Effect::None,
    }
}

/// Whether the commit record at `commit` (with its start and read set) committed;
/// `cached` is the outcome its aux data holds, if the caller has it at hand.
///
/// Each object's window `(start, commit)` is scanned; a commit found there is decided
/// first (it is earlier, so this ends). The commits still to decide are an explicit
/// stack, not a recursion, so a long chain of overlapping transactions costs heap, not
/// the node's stack: a frame resumes at the record it stopped at, decided by then.
pub(crate) async fn decide(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    commit: u64,
    start: u64,
    reads: &[String],
    cached: Option<bool>,
) -> Result<bool, Abort> {
    if let Some(c) = core.decisions.get(book, commit).or(cached) {
        return Ok(c);
    }
    struct Frame {
        commit: u64,
        start: u64,
        reads: Vec<String>,
        /// The object of `reads` being scanned, and where its scan is.
        object: usize,
        at: u64,
    }
    // Outcomes decided in this call (the node's cache may drop them meanwhile).
    let mut decided: std::collections::HashMap<u64, bool> = std::collections::HashMap::new();
    let frame =
        |commit: u64, start: u64, reads: Vec<String>| Frame { commit, start, reads, object: 0, at: start.saturating_add(1) };
    let mut stack = vec![frame(commit, start, reads.to_vec())];
    while let Some(top) = stack.last_mut() {
        let mut outcome = None;
        match top.reads.get(top.object) {
            None => outcome = Some(true),
            Some(object) => {
                let tag = core.tags.bokistore(object);
                let found = match top.at < top.commit {
                    true => core.log.read_next(ctx, shadow(book), tag, SeqNum(top.at)).await?,
                    false => None,
                };
                match found {
                    Some(r) if r.seqnum.0 < top.commit => {
                        let step: Step = record::decode("object", &r.data)?;
                        match effect_on(&step, object) {
                            Effect::None => top.at = r.seqnum.0 + 1,
                            Effect::Ops(_) => outcome = Some(false),
                            Effect::Commit { start, reads, .. } => {
                                let seqnum = r.seqnum.0;
                                let known = decided
                                    .get(&seqnum)
                                    .copied()
                                    .or_else(|| core.decisions.get(book, seqnum))
                                    .or_else(|| AuxViewRef::committed(&r));
                                match known {
                                    // A write that took effect in the window: a conflict.
                                    Some(true) => outcome = Some(false),
                                    Some(false) => top.at = seqnum + 1,
                                    None => stack.push(frame(seqnum, start, reads.to_vec())),
                                }
                            }
                        }
                    }
                    _ => {
                        top.object += 1;
                        top.at = top.start.saturating_add(1);
                    }
                }
            }
        }
        if let Some(committed) = outcome {
            let done = stack.pop().expect("the top frame");
            decided.insert(done.commit, committed);
            core.decisions.put(book, done.commit, committed);
        }
    }
    Ok(decided[&commit])
}

/// The state of `object` at seqnum `at` (null if it was never written): the node's
/// parsed view of the object's newest record at or below `at` if it keeps one
/// (`core/views.rs`), else replayed ([`replayed_view_at`]) and kept there.
pub(crate) async fn view_at(core: &Core, ctx: &mut Context, book: BookId, object: &str, at: u64) -> Result<Arc<View>, Abort> {
    if !core.config.aux_views {
        return Ok(Arc::new(replayed_view_at(core, ctx, book, object, at, None).await?.0));
    }
    let tag = core.tags.bokistore(object);
    // Its seqnum first: a kept view needs no record (the log answers from its index).
    let newest = core.log.read_prev_seqnum(ctx, shadow(book), tag, SeqNum(at)).await?;
    if let Some(view) = newest.and_then(|s| core.views.get(book, s.0, object)) {
        return Ok(view);
    }
    let head = match newest {
        Some(_) => core.log.read_prev(ctx, shadow(book), tag, SeqNum(at)).await?,
        None => None,
    };
    // A trim may have taken it since: the replay's head is the one read.
    let newest = head.as_ref().map(|r| r.seqnum.0);
    let (view, first) = replayed_view_at(core, ctx, book, object, at, head).await?;
    let view = Arc::new(view);
    // Kept only as the view after the record the replay began at (a replay that began
    // at a checkpoint covering `at` did not begin at `newest`).
    if let Some(seqnum) = first.filter(|s| Some(*s) == newest) {
        core.views.put(book, seqnum, object, view.clone());
    }
    Ok(view)
}

/// Keeps, after a commit that committed, the views of the objects it wrote, so that
/// their readers on this node find them (`core/views.rs`) instead of replaying the
/// commit: an object's view after the commit is its view after the record before it in
/// its stream, which the node keeps (the transaction read at least that far) or not,
/// with the commit's operations folded in as a reader would. An object with no record
/// before the commit starts from null, unless it has a checkpoint (the collector
/// trimmed its stream). An object whose view is not at hand is left to its readers.
pub(crate) async fn keep_committed(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    commit: u64,
    writes: &[(String, Vec<ObjOp>)],
) -> Result<(), Abort> {
    let Some(before) = commit.checked_sub(1).filter(|_| core.config.aux_views) else { return Ok(()) };
    for (object, ops) in writes {
        let tag = core.tags.bokistore(object);
        let mut view = match core.log.read_prev_seqnum(ctx, shadow(book), tag, SeqNum(before)).await? {
            Some(s) => match core.views.get(book, s.0, object) {
                Some(view) => Folding::new(view.value.clone(), view.len()),
                None => continue,
            },
            None => match replay::checkpoint(core, ctx, book, tag).await? {
                None => Folding::new(Value::Null, 4),
                Some(_) => continue,
            },
        };
        fold(&mut view, ops);
        core.views.put(book, commit, object, Arc::new(View::new(view.value)));
    }
    Ok(())
}

/// The state of `object` at seqnum `at`, replaying from the newest view cached at or
/// below `at` (from `head`, the stream's newest record there, if the caller read it),
/// and the record the replay began at; caches the view of the newest record in its aux
/// data.
async fn replayed_view_at(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    object: &str,
    at: u64,
    head: Option<LogRecord>,
) -> Result<(View, Option<u64>), Abort> {
    let tag = core.tags.bokistore(object);
    let relevant = |step: &Step| !matches!(effect_on(step, object), Effect::None);
    let cached = |a: &[u8]| {
        let view = AuxViewRef::of(a)?.view(object)?;
        Some((serde_json::from_str::<Value>(view).ok()?, Box::<str>::from(view)))
    };
    let (base, mut newer) = replay::since_view(core, ctx, book, tag, at, relevant, cached, true, head).await?;
    let (mut base, mut text) = match base {
        Some((value, text)) => (Folding::new(value, text.len()), Some(text)),
        None => (Folding::new(Value::Null, 4), None),
    };
    let mut newest: Option<(LogRecord, Option<bool>)> = None;
    while let Some((r, step)) = newer.next(core, ctx, book).await? {
        let mut outcome = None;
        match effect_on(&step, object) {
            Effect::None => {}
            Effect::Ops(ops) => fold(&mut base, ops),
            Effect::Commit { start, reads, ops } => {
                let committed = decide(core, ctx, book, r.seqnum.0, start, reads, AuxViewRef::committed(&r)).await?;
                outcome = Some(committed);
                if committed {
                    fold(&mut base, ops);
                }
            }
        }
        newest = Some((r, outcome));
    }
    if let Some((r, outcome)) = newest {
        text = cache_view(core, ctx, book, &r, object, outcome, &base.value).await;
    }
    let view = match text {
        Some(text) => View::with_text(base.value, text),
        None => View::new(base.value),
    };
    Ok((view, newer.first))
}

fn fold(base: &mut Folding, ops: &[ObjOp]) {
    for op in ops {
        // An operation that does not fit at replay does nothing (module doc).
        let _ = base.apply(op);
    }
}

/// Best effort: a failure only costs a later reader a replay. Returns the view's JSON
/// text.
async fn cache_view(
    core: &Core,
    ctx: &mut Context,
    book: BookId,
    r: &LogRecord,
    object: &str,
    outcome: Option<bool>,
    value: &Value,
) -> Option<Box<str>> {
    let text = serde_json::to_string(value).ok()?;
    if text.len() <= OBJECT_MAX {
        let mut aux = AuxView::of(r);
        aux.committed = aux.committed.or(outcome);
        aux.views.retain(|(o, _)| o != object);
        aux.views.push((object.to_string(), text.clone()));
        replay::cache(core, ctx, book, r.seqnum, record::encode(&aux)).await;
    }
    Some(text.into_boxed_str())
}

/// A transaction in progress in an instance.
pub(crate) struct Txn {
    /// Its snapshot: the instance's cursor when it began.
    pub start: u64,
    pub read_only: bool,
    pub reads: BTreeSet<String>,
    /// Every object it touched, at its snapshot with its own writes applied.
    pub views: BTreeMap<String, TxnView>,
    pub writes: BTreeMap<String, Vec<ObjOp>>,
    pub ops: usize,
    /// The JSON text its snapshots hold.
    pub bytes: usize,
}

impl Txn {
    pub fn new(start: u64, read_only: bool) -> Txn {
        Txn { start, read_only, reads: BTreeSet::new(), views: BTreeMap::new(), writes: BTreeMap::new(), ops: 0, bytes: 0 }
    }

    /// The commit step: the read set, and the writes in the order of their objects.
    pub fn commit_step(&self) -> kind::TxnCommit {
        kind::TxnCommit {
            start: self.start,
            reads: self.reads.iter().cloned().collect(),
            writes: self.writes.iter().map(|(o, ops)| (o.clone(), ops.clone())).collect(),
        }
    }
}

/// The JSON text of the value at `path` in `value`, if there is one.
pub fn text_at(value: &Value, path: &str) -> Result<Option<String>, Error> {
    let path = parse_path(path)?;
    Ok(get(value, &path).filter(|v| !v.is_null() || !path.is_empty()).map(|v| v.to_string()))
}

/// [`text_at`] of a view: the whole object's text is the view's, serialized once.
pub(crate) fn view_text_at(view: &View, path: &str) -> Result<Option<String>, Error> {
    match path.is_empty() {
        true => Ok((!view.value.is_null()).then(|| view.text().to_owned())),
        false => text_at(&view.value, path),
    }
}

/// An object as a transaction sees it: its view at the snapshot, copied only once the
/// transaction writes it.
pub(crate) struct TxnView {
    view: Arc<View>,
    written: Option<Folding>,
}

impl TxnView {
    pub fn new(view: Arc<View>) -> TxnView {
        TxnView { view, written: None }
    }

    pub fn text_at(&self, path: &str) -> Result<Option<String>, Error> {
        match &self.written {
            Some(folding) => text_at(&folding.value, path),
            None => view_text_at(&self.view, path),
        }
    }

    /// [`Folding::apply`] on the transaction's copy.
    pub fn apply(&mut self, op: &ObjOp) -> Result<(), String> {
        let view = &self.view;
        self.written.get_or_insert_with(|| Folding::new(view.value.clone(), view.len())).apply(op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(path: &str, json: &str) -> ObjOp {
        ObjOp::Set { path: path.into(), json: json.into() }
    }

    #[test]
    fn pointers_parse_with_escapes_and_refuse_what_is_not_one() {
        assert_eq!(parse_path("").unwrap(), Vec::<String>::new());
        assert_eq!(parse_path("/a/0/b~1c~0").unwrap(), vec!["a", "0", "b/c~"]);
        assert_eq!(parse_path("/").unwrap(), vec![""]);
        assert!(parse_path("a").is_err());
        assert!(parse_path("/a~2").is_err());
        assert!(parse_path("/a~").is_err());
        assert!(parse_path(&format!("/{}", "x".repeat(PATH_MAX))).is_err());
    }

    #[test]
    fn operations_make_parents_and_refuse_what_does_not_fit_without_changing_anything() {
        let mut v = Value::Null;
        apply(&mut v, &set("/user/name", "\"ada\"")).unwrap();
        apply(&mut v, &ObjOp::Incr { path: "/user/posts".into(), by: 2 }).unwrap();
        apply(&mut v, &ObjOp::Push { path: "/tweets".into(), json: "1".into() }).unwrap();
        apply(&mut v, &ObjOp::Push { path: "/tweets".into(), json: "{\"a\":2}".into() }).unwrap();
        apply(&mut v, &set("/tweets/-", "3")).unwrap();
        apply(&mut v, &set("/tweets/1/a", "4")).unwrap();
        assert_eq!(v, serde_json::json!({"user": {"name": "ada", "posts": 2}, "tweets": [1, {"a": 4}, 3]}));
        let before = v.clone();
        assert!(apply(&mut v, &ObjOp::Incr { path: "/user/name".into(), by: 1 }).is_err());
        assert!(apply(&mut v, &ObjOp::Push { path: "/user".into(), json: "1".into() }).is_err());
        assert!(apply(&mut v, &set("/tweets/7", "1")).is_err());
        assert!(apply(&mut v, &set("/tweets/01", "1")).is_err());
        assert!(apply(&mut v, &set("/user/name/x/y", "1")).is_err());
        assert!(apply(&mut v, &set("/a", "{")).is_err());
        assert_eq!(v, before);
        apply(&mut v, &ObjOp::Remove { path: "/tweets/0".into() }).unwrap();
        apply(&mut v, &ObjOp::Remove { path: "/nothing/here".into() }).unwrap();
        apply(&mut v, &ObjOp::Incr { path: "/user/posts".into(), by: i64::MAX }).unwrap();
        assert_eq!(get(&v, &parse_path("/user/posts").unwrap()), Some(&Value::from(i64::MAX)));
        assert_eq!(text_at(&v, "/tweets").unwrap().as_deref(), Some("[{\"a\":4},3]"));
        assert_eq!(text_at(&v, "/missing").unwrap(), None);
        apply(&mut v, &ObjOp::Remove { path: "".into() }).unwrap();
        assert_eq!(text_at(&v, "").unwrap(), None, "a removed object is no object");
    }

    #[test]
    fn folding_skips_what_would_pass_the_size_limit_the_same_way_from_any_start() {
        let big = format!("\"{}\"", "x".repeat(OBJECT_MAX / 3));
        let ops: Vec<ObjOp> = (0..5).map(|_| ObjOp::Push { path: "/a".into(), json: big.clone() }).collect();
        let mut from_null = Folding::new(Value::Null, 4);
        let applied: Vec<bool> = ops.iter().map(|op| from_null.apply(op).is_ok()).collect();
        assert_eq!(applied, [true, true, false, false, false]);
        // From a view cached after the first push: the same outcome.
        let mut one = Value::Null;
        apply(&mut one, &ops[0]).unwrap();
        let mut from_view = Folding::new(one.clone(), json_len(&one));
        let later: Vec<bool> = ops[1..].iter().map(|op| from_view.apply(op).is_ok()).collect();
        assert_eq!(later, applied[1..]);
        assert_eq!(from_view.value, from_null.value);
    }
}
