//! An invocation's steps as people and queries read them: each logged step with its
//! seqnum, kind, table and key, the table's protocol at that point (its transition log
//! says), the value it read, wrote, returned or pushed, the child it called and the
//! attempt that logged it (its retry stream says); and a table's protocol history.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::Serialize;
use tally_log_core::{BookId, Context, SeqNum};

use crate::abort::check_book;
use crate::core::Core;
use crate::error::{Error, Result};
use crate::id::InstanceId;
use crate::node::Invocations;
use crate::record::meta::{meta_of, Meta};
use crate::record::{self, kind, Awaited, Outcome, Step, Transition};
use crate::tags::shadow;

/// One logged step of an invocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepView {
    /// The seqnum of the record that holds it (a group holds several steps).
    pub seqnum: u64,
    /// Its number in the step log (the Init is 0).
    pub step: u64,
    /// What it is: `init`, `read`, `write`, `call`, `result`, ... ([`kind_name`]).
    pub kind: &'static str,
    pub table: Option<String>,
    pub key: Option<Bytes>,
    /// The table's protocol when the step was logged, a switch under way as
    /// `from->to`.
    pub protocol: Option<String>,
    /// What it read, wrote, returned, pushed or was given (an Init's input).
    pub value: Option<Bytes>,
    /// A failure it records (a result's or a child's error).
    pub error: Option<String>,
    /// The child a call ran, and its function.
    pub child: Option<String>,
    pub function: Option<String>,
    /// The attempt that logged it (1 unless the invocation trapped and was retried).
    pub attempt: u32,
    /// The step as the platform's errors name it.
    pub detail: String,
}

/// A page of an invocation's steps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Steps {
    pub steps: Vec<StepView>,
    /// The step to start the next page at, if there may be more.
    pub next: Option<u64>,
    /// The trailers of its Init and Result records.
    pub began: Option<Meta>,
    pub ended: Option<Meta>,
}

/// Records of a step log one page reads at most.
const RECORDS_MAX: usize = 100_000;

/// The name of a step's kind.
pub fn kind_name(step: &Step) -> &'static str {
    match step {
        Step::Init(_) | Step::InitKeyed(_) => "init",
        Step::Write(_) => "write",
        Step::Put(_) => "put",
        Step::LoggedWrite(_) => "logged-write",
        Step::Read(_) => "read",
        Step::Invoke(_) => "call",
        Step::Result(_) => "result",
        Step::Refused(_) => "refused",
        Step::Clocks(_) => "clocks",
        Step::CondAppend(_) => "cond-append",
        Step::Sleep(_) => "sleep",
        Step::Delay(_) => "delay",
        Step::Promise(_) => "promise",
        Step::Awaited(_) => "await",
        Step::Completed(_) => "completed",
        Step::Cancel(_) => "cancel",
        Step::Cancelled => "cancelled",
        Step::Retry(_) => "retry",
        Step::ObjectWrite(_) => "object-write",
        Step::TxnCommit(_) => "txn-commit",
        Step::QueuePush(_) => "queue-push",
        Step::QueuePop(_) => "queue-pop",
        Step::QueuePopMany(_) => "queue-pop-many",
        Step::LockTry(_) => "lock-try",
        Step::LockRelease(_) => "lock-release",
        Step::Checkpoint(_) => "checkpoint",
        Step::Group(_) => "group",
        Step::Outcall(_) => "outcall",
    }
}

/// A value's bytes as text: `json` if they are a JSON document, `i64` if they are the
/// SDKs' integers (decimal text), `utf8` if they are text, `hex` otherwise.
pub fn decoded(bytes: &[u8]) -> (&'static str, String) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return ("hex", bytes.iter().map(|b| format!("{b:02x}")).collect());
    };
    if !text.is_empty() && text.parse::<i64>().is_ok() && !text.starts_with('+') {
        return ("i64", text.to_string());
    }
    let t = text.trim_start();
    if (t.starts_with('{') || t.starts_with('[') || t.starts_with('"')) && serde_json::from_str::<serde_json::Value>(text).is_ok()
    {
        return ("json", text.to_string());
    }
    ("utf8", text.to_string())
}

/// A table's transition records, oldest first: (seqnum, transition).
pub type History = Vec<(u64, Transition)>;

/// The protocol `history` gives at `seqnum`: `None` before its first record.
pub fn protocol_at(history: &History, seqnum: u64) -> Option<String> {
    let at = history.partition_point(|(s, _)| *s <= seqnum);
    history[..at].last().map(|(_, t)| match t {
        Transition::End { protocol, .. } => protocol.name().to_string(),
        Transition::Begin { from, to, .. } => format!("{}->{}", from.name(), to.name()),
    })
}

impl Core {
    /// Every transition record of `table` of `book` (at most `limit`).
    pub(crate) async fn table_history(&self, ctx: &mut Context, book: BookId, table: &str, limit: usize) -> Result<History> {
        let tag = self.tags.transition(table);
        let mut out = Vec::new();
        let mut at = 0;
        while out.len() < limit {
            let Some(r) = self.log.read_next(ctx, shadow(book), tag, SeqNum(at)).await? else { break };
            at = r.seqnum.0.saturating_add(1);
            if let Ok(t) = record::decode::<Transition>("transition", &r.data) {
                if t.table() == table {
                    out.push((r.seqnum.0, t));
                }
            }
            if at == u64::MAX {
                break;
            }
        }
        Ok(out)
    }
}

impl Invocations<'_> {
    /// The steps of invocation `id` of `book` from step `after` on, at most `limit`, as
    /// of at least `ctx`. An ID this platform cannot have made, or whose step log holds
    /// nothing (never ran, or collected), is not found.
    pub async fn steps(&self, ctx: &mut Context, book: BookId, id: &str, after: u64, limit: usize) -> Result<Steps> {
        let d = self.0;
        check_book(book)?;
        let id = InstanceId::parse(id).map_err(|_| Error::InvocationNotFound(id.to_string()))?;
        let core = &d.core;
        let attempts = self.attempts(ctx, book, &id).await?;
        let mut histories: BTreeMap<String, History> = BTreeMap::new();
        let mut out = Steps { steps: Vec::new(), next: None, began: None, ended: None };
        let (mut at, mut n) = (0u64, 0u64);
        for _ in 0..RECORDS_MAX {
            let Some(r) = core.log.read_next(ctx, shadow(book), core.tags.step(&id), SeqNum(at)).await? else {
                break;
            };
            at = r.seqnum.0.saturating_add(1);
            let steps = record::decode_steps("step", &r.data)?.into_steps();
            if n == 0 && !steps.first().is_some_and(|s| s.is_init() || matches!(s, Step::Refused(_))) {
                return Err(Error::InvocationNotFound(id.to_string()));
            }
            let meta = meta_of::<Step>(&r.data);
            for step in steps {
                if step.is_init() {
                    out.began = meta.clone();
                }
                if matches!(step, Step::Result(_)) {
                    out.ended = meta.clone();
                }
                if n >= after {
                    if out.steps.len() >= limit {
                        out.next = Some(n);
                        return Ok(out);
                    }
                    let attempt = attempts.iter().filter(|(s, _)| *s < r.seqnum.0).map(|(_, a)| *a).max().unwrap_or(1);
                    let mut view = view(&id, r.seqnum.0, n, step, attempt);
                    if let Some(table) = view.table.clone() {
                        if !histories.contains_key(&table) {
                            let h = core.table_history(ctx, book, &table, 1024).await?;
                            histories.insert(table.clone(), h);
                        }
                        view.protocol = protocol_at(&histories[&table], r.seqnum.0);
                    }
                    out.steps.push(view);
                }
                n += 1;
            }
            if at == u64::MAX {
                break;
            }
        }
        if n == 0 {
            return Err(Error::InvocationNotFound(id.to_string()));
        }
        Ok(out)
    }

    /// The attempts after the first of instance `id`: (seqnum of its Retry record,
    /// attempt).
    async fn attempts(&self, ctx: &mut Context, book: BookId, id: &InstanceId) -> Result<Vec<(u64, u32)>> {
        let core = &self.0.core;
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(r) = core.log.read_next(ctx, shadow(book), core.tags.retry(id), SeqNum(at)).await? {
            at = r.seqnum.0.saturating_add(1);
            if let Ok(Step::Retry(kind::Retry { id: of, attempt, .. })) = record::decode::<Step>("retry", &r.data) {
                if of == *id {
                    out.push((r.seqnum.0, attempt));
                }
            }
            if at == u64::MAX || out.len() >= 1024 {
                break;
            }
        }
        Ok(out)
    }
}

/// Step `n` of instance `id`, logged at `seqnum` by `attempt`.
fn view(id: &InstanceId, seqnum: u64, n: u64, step: Step, attempt: u32) -> StepView {
    let mut v = StepView {
        seqnum,
        step: n,
        kind: kind_name(&step),
        table: None,
        key: None,
        protocol: None,
        value: None,
        error: None,
        child: None,
        function: None,
        attempt,
        detail: step.describe(),
    };
    let outcome = |v: &mut StepView, o: Outcome| match o {
        Outcome::Ok(bytes) => v.value = Some(bytes),
        other => v.error = Some(format!("{other:?}")),
    };
    match step {
        Step::Init(kind::Init { function, input, .. }) | Step::InitKeyed(kind::InitKeyed { function, input, .. }) => {
            v.function = Some(function);
            v.value = Some(input);
        }
        Step::Write(kind::Write { table, key, .. }) => (v.table, v.key) = (Some(table), Some(key)),
        Step::Put(kind::Put { table, key, value, .. })
        | Step::LoggedWrite(kind::LoggedWrite { table, key, value })
        | Step::Read(kind::Read { table, key, value }) => (v.table, v.key, v.value) = (Some(table), Some(key), value),
        Step::Invoke(kind::Invoke { function, outcome: o, .. }) => {
            v.child = u32::try_from(n).ok().map(|n| id.child(n).to_string());
            v.function = Some(function);
            outcome(&mut v, o);
        }
        Step::Result(kind::Result { outcome: o }) | Step::Refused(kind::Refused { outcome: o, .. }) => outcome(&mut v, o),
        Step::Awaited(kind::Awaited { outcome: Awaited::Value(bytes), .. })
        | Step::Completed(kind::Completed { value: bytes, .. }) => v.value = Some(bytes),
        Step::QueuePush(kind::QueuePush { message, .. }) => v.value = Some(message),
        Step::Outcall(kind::Outcall { outcome: kind::OutcallOutcome::Response(bytes), .. }) => v.value = Some(bytes),
        Step::Outcall(kind::Outcall { outcome: kind::OutcallOutcome::Failed(why), .. }) => v.error = Some(why),
        _ => {}
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Protocol;

    #[test]
    fn values_decode_as_the_sdks_write_them() {
        assert_eq!(decoded(b"42"), ("i64", "42".to_string()));
        assert_eq!(decoded(b"-7"), ("i64", "-7".to_string()));
        assert_eq!(decoded(b"+7"), ("utf8", "+7".to_string()));
        assert_eq!(decoded(b"99999999999999999999"), ("utf8", "99999999999999999999".to_string()));
        assert_eq!(decoded(br#"{"a":1}"#), ("json", r#"{"a":1}"#.to_string()));
        assert_eq!(decoded(b"[1,2"), ("utf8", "[1,2".to_string()));
        assert_eq!(decoded(b"hello"), ("utf8", "hello".to_string()));
        assert_eq!(decoded(&[0xff, 0x00]), ("hex", "ff00".to_string()));
        assert_eq!(decoded(b""), ("utf8", String::new()));
    }

    #[test]
    fn the_protocol_at_a_seqnum_is_the_last_transition_before_it() {
        let end = |p| Transition::End { table: "t".into(), protocol: p, auto: false };
        let history = vec![
            (10, end(Protocol::ReadOptimized)),
            (
                20,
                Transition::Begin { table: "t".into(), from: Protocol::ReadOptimized, to: Protocol::WriteOptimized, auto: false },
            ),
            (30, end(Protocol::WriteOptimized)),
        ];
        assert_eq!(protocol_at(&history, 5), None);
        assert_eq!(protocol_at(&history, 10).as_deref(), Some("read-optimized"));
        assert_eq!(protocol_at(&history, 25).as_deref(), Some("read-optimized->write-optimized"));
        assert_eq!(protocol_at(&history, u64::MAX).as_deref(), Some("write-optimized"));
    }
}
