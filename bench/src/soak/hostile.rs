//! The hostile clients: a task per kind that sends its kind's probes in turn, each on a
//! fresh connection, and checks every answer against the documented one; and the
//! flood, many connections of one token on one book, whose increments must count
//! exactly once like an honest client's.
//!
//! Every hostile task works only while the [`Gate`] is open: the suite opens it for the
//! slices the honest clients run beside the hostile ones, and closing it waits until no
//! hostile request is in flight, so that a slice alone is alone.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, RwLock, RwLockReadGuard};
use tokio::time::{sleep, Instant};

use super::wire::{self, Answer, Conn};

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long writing a request may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an answer may take, unless a probe says otherwise.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Mismatches kept per kind, to show.
const SHOWN_MAX: usize = 3;
/// A flooding connection's pause after a refusal: it does not honour `Retry-After`.
const FLOOD_PAUSE: Duration = Duration::from_millis(20);
/// How long the flood may take, once the gate is closed for good, to have its
/// unacknowledged increments acknowledged.
const FLOOD_DRAIN: Duration = Duration::from_secs(30);

/// Whether the hostile clients work now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Off,
    On,
    Stop,
}

/// Opens and closes the hostile clients' work.
pub(crate) struct Gate {
    phase: watch::Sender<Phase>,
    /// Held shared by every request in flight; taken exclusively to wait them out.
    work: RwLock<()>,
}

impl Gate {
    pub(crate) fn new() -> Gate {
        Gate { phase: watch::Sender::new(Phase::Off), work: RwLock::new(()) }
    }

    /// Waits until the gate is open and holds it open for one request; `None` once it
    /// is closed for good.
    pub(crate) async fn enter(&self) -> Option<RwLockReadGuard<'_, ()>> {
        let mut phase = self.phase.subscribe();
        loop {
            let now = *phase.borrow_and_update();
            match now {
                Phase::Stop => return None,
                Phase::Off => phase.changed().await.ok()?,
                Phase::On => {
                    let guard = self.work.read().await;
                    // A close that came while this waited for the lock wins.
                    if *self.phase.borrow() == Phase::On {
                        return Some(guard);
                    }
                }
            }
        }
    }

    /// Sets the phase; closing returns once no request is in flight.
    pub(crate) async fn set(&self, phase: Phase) {
        self.phase.send_replace(phase);
        if phase != Phase::On {
            drop(self.work.write().await);
        }
    }
}

/// The answers of one kind of request.
#[derive(Default)]
pub(crate) struct KindTally {
    pub requests: u64,
    /// Answers by label (`Answer::label`).
    pub answers: BTreeMap<String, u64>,
    /// Answers other than the documented one.
    pub mismatches: u64,
    pub shown: Vec<String>,
}

/// Every kind's answers.
#[derive(Clone, Default)]
pub(crate) struct Ledger(Arc<Mutex<BTreeMap<&'static str, KindTally>>>);

/// An answer's label for the report: its status, and for a 429 why (`429-rate`, the
/// token's rate; `429-queue`, the book's queue was full; `429-wait`, it waited its
/// longest), from the message `shares.rs` gives.
pub(crate) fn label(status: u16, body: &[u8]) -> String {
    if status != 429 {
        return status.to_string();
    }
    let body = String::from_utf8_lossy(body);
    let why = if body.contains("requests a second") {
        "rate"
    } else if body.contains("waiting already") {
        "queue"
    } else if body.contains("waited") {
        "wait"
    } else {
        "other"
    };
    format!("429-{why}")
}

impl Ledger {
    pub(crate) fn note(&self, kind: &'static str, probe: &str, answer: &Answer, documented: bool) {
        let mut kinds = self.0.lock().expect("not poisoned");
        let tally = kinds.entry(kind).or_default();
        tally.requests += 1;
        let shown = match answer {
            Answer::Status { status, body, .. } => label(*status, body),
            _ => answer.label(),
        };
        *tally.answers.entry(shown).or_default() += 1;
        if !documented {
            tally.mismatches += 1;
            if tally.shown.len() < SHOWN_MAX {
                tally.shown.push(format!("{probe}: {}", answer.shown()));
            }
        }
    }

    pub(crate) fn take(&self) -> BTreeMap<&'static str, KindTally> {
        std::mem::take(&mut *self.0.lock().expect("not poisoned"))
    }
}

/// The documented answer to a probe.
#[derive(Clone, Debug)]
pub(crate) struct Expect {
    statuses: Vec<u16>,
    /// A closed connection is as good an answer.
    closed: bool,
    /// The `Tally-Error` code the answer must carry.
    code: Option<&'static str>,
    /// Text the answer's body must contain.
    body_has: Option<String>,
    /// A `Retry-After` of at least a second.
    retry_after: bool,
    pub deadline: Duration,
}

impl Expect {
    pub(crate) fn status(statuses: &[u16]) -> Expect {
        Expect {
            statuses: statuses.to_vec(),
            closed: false,
            code: None,
            body_has: None,
            retry_after: false,
            deadline: ANSWER_TIMEOUT,
        }
    }

    pub(crate) fn or_closed(self) -> Expect {
        Expect { closed: true, ..self }
    }

    pub(crate) fn code(self, code: &'static str) -> Expect {
        Expect { code: Some(code), ..self }
    }

    pub(crate) fn body_has(self, text: impl Into<String>) -> Expect {
        Expect { body_has: Some(text.into()), ..self }
    }

    pub(crate) fn accepts(&self, answer: &Answer) -> bool {
        match answer {
            Answer::Closed => self.closed,
            Answer::Status { status, .. } => {
                let retry_after = || answer.header("retry-after").and_then(|v| v.parse::<u64>().ok()).is_some_and(|s| s >= 1);
                self.statuses.contains(status)
                    && self.code.is_none_or(|code| answer.header("tally-error") == Some(code))
                    && self.body_has.as_ref().is_none_or(|text| String::from_utf8_lossy(answer.body()).contains(text.as_str()))
                    && (!self.retry_after || retry_after())
            }
            Answer::TimedOut | Answer::Refused => false,
        }
    }
}

/// How a probe's bytes go out.
pub(crate) enum Send {
    Whole(Vec<u8>),
    /// The head, then the body `piece` bytes at a time, one piece every `every`.
    Dribble {
        head: Vec<u8>,
        body: Vec<u8>,
        piece: usize,
        every: Duration,
    },
    /// The bytes, then an end of stream (the node sees a truncated request).
    ThenHalfClose(Vec<u8>),
}

/// One hostile request and its documented answer.
pub(crate) struct Probe {
    pub name: String,
    pub send: Send,
    pub expect: Expect,
}

/// A kind of hostile client: its probes, sent in turn, `pace` apart.
pub(crate) struct Kind {
    pub name: &'static str,
    pub probes: Vec<Probe>,
    pub pace: Duration,
    /// Tasks sending them at once.
    pub tasks: usize,
}

/// Sends one probe on a fresh connection; its answer.
pub(crate) async fn send(addr: &str, probe: &Probe) -> Answer {
    let Some(mut conn) = Conn::open(addr, CONNECT_TIMEOUT).await else { return Answer::Refused };
    // A write the node cut short is no failure: it may have answered (431, 413) before
    // it closed, and the answer is read all the same.
    match &probe.send {
        Send::Whole(bytes) => {
            conn.write(bytes, WRITE_TIMEOUT).await;
        }
        Send::Dribble { head, body, piece, every } => {
            if conn.write(head, WRITE_TIMEOUT).await {
                for part in body.chunks(*piece) {
                    sleep(*every).await;
                    if !conn.write(part, WRITE_TIMEOUT).await {
                        break;
                    }
                }
            }
        }
        Send::ThenHalfClose(bytes) => {
            conn.write(bytes, WRITE_TIMEOUT).await;
            conn.half_close().await;
        }
    }
    conn.answer(probe.expect.deadline).await
}

/// Task `index` of `kind`: its probes in turn, starting at a different one per task,
/// while the gate is open. Ends when the gate closes for good.
pub(crate) async fn run_kind(addr: String, kind: Arc<Kind>, index: usize, gate: Arc<Gate>, ledger: Ledger) {
    let mut next = index * kind.probes.len() / kind.tasks.max(1);
    loop {
        let probe = &kind.probes[next % kind.probes.len()];
        next += 1;
        {
            let Some(_open) = gate.enter().await else { return };
            let answer = send(&addr, probe).await;
            ledger.note(kind.name, &probe.name, &answer, probe.expect.accepts(&answer));
        }
        sleep(kind.pace).await;
    }
}

/// One flooding connection: increments of the flood's book with its token, each with
/// a key of its own that its retries repeat.
pub(crate) struct Flooder {
    addr: String,
    target: String,
    auth: String,
    prefix: String,
    conn: Option<Conn>,
    begun: u64,
    /// The increment sent and not acknowledged yet.
    pending: Option<String>,
    pub acked: u64,
}

/// What a flood's requests must be answered: done, or refused with a `Retry-After`.
fn flood_expect() -> Expect {
    Expect { retry_after: true, ..Expect::status(&[429]).code("busy") }
}

impl Flooder {
    pub(crate) fn new(addr: &str, book: u64, token: &str, prefix: String) -> Flooder {
        Flooder {
            addr: addr.to_string(),
            target: format!("/v1/functions/counter/invoke?book={book}"),
            auth: format!("Authorization: Bearer {token}\r\n"),
            prefix,
            conn: None,
            begun: 0,
            pending: None,
            acked: 0,
        }
    }

    /// Whether an increment is still unacknowledged.
    pub(crate) fn unresolved(&self) -> bool {
        self.pending.is_some()
    }

    /// One attempt: the pending increment again, or a new one. `true` if acknowledged.
    async fn attempt(&mut self, ledger: &Ledger) -> bool {
        let key = match &self.pending {
            Some(key) => key.clone(),
            None => {
                self.begun += 1;
                let key = format!("{}-{}", self.prefix, self.begun);
                self.pending = Some(key.clone());
                key
            }
        };
        if self.conn.is_none() {
            self.conn = Conn::open(&self.addr, CONNECT_TIMEOUT).await;
        }
        let answer = match &mut self.conn {
            None => Answer::Refused,
            Some(conn) => {
                let request = wire::request("POST", &self.target, &format!("{}Idempotency-Key: {key}\r\n", self.auth), b"incr");
                if conn.write(&request, WRITE_TIMEOUT).await {
                    conn.answer(ANSWER_TIMEOUT).await
                } else {
                    Answer::Closed
                }
            }
        };
        let acked =
            answer.status() == Some(200) && std::str::from_utf8(answer.body()).is_ok_and(|b| b.trim().parse::<u64>().is_ok());
        ledger.note("flood", &format!("increment {key}"), &answer, acked || flood_expect().accepts(&answer));
        if !matches!(answer, Answer::Status { .. }) {
            self.conn = None;
        }
        if acked {
            self.pending = None;
            self.acked += 1;
        }
        acked
    }
}

/// Floods while the gate is open; once it is closed for good, has its last increment
/// acknowledged (alone now, it is admitted at once), so that every increment it began
/// is acknowledged exactly once or counted unresolved.
pub(crate) async fn flood(mut flooder: Flooder, gate: Arc<Gate>, ledger: Ledger) -> Flooder {
    loop {
        let acked = {
            let Some(_open) = gate.enter().await else { break };
            flooder.attempt(&ledger).await
        };
        if !acked {
            sleep(FLOOD_PAUSE).await;
        }
    }
    let deadline = Instant::now() + FLOOD_DRAIN;
    while flooder.unresolved() && Instant::now() < deadline {
        if !flooder.attempt(&ledger).await {
            sleep(FLOOD_PAUSE).await;
        }
    }
    flooder
}
