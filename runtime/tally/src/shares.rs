//! Fair shares of a node's invocations between books, and a rate per token.
//!
//! An invocation from outside (`POST .../invoke`, an HTTP function) is admitted before
//! it starts, so a refusal loses nothing and duplicates nothing: nothing of it was
//! logged, and a retry with the same key is the first attempt.
//!
//! - At most `invocations_max` run at once on the node, and at most
//!   `book_invocations_max` of one book: one book's flood leaves room for the others.
//! - Past those, a request waits in its book's queue (first come, first served within a
//!   book), and freed places go round-robin to the books that wait: a book with one
//!   request waiting gets the next place a flooding book's finished request frees.
//! - A book with `book_queue_max` requests waiting, or a request that waited
//!   `queue_wait_ms`, is answered 429 with `Retry-After`.
//! - A token over `caller_rate_max` requests a second (a bucket of one second's worth)
//!   is answered 429 with `Retry-After` at once.
//!
//! [`Shares`] is the decision, without IO or clocks; [`Admission`] puts it behind a
//! mutex, with a channel per waiting request and a permit that frees its place when
//! dropped.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// What [`Shares::enter`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Enter {
    /// Admitted: run, then [`Shares::leave`].
    Now,
    /// Waiting: [`Shares::leave`] names it when it is admitted.
    Queued,
    /// Its book's queue is full.
    Refused,
}

#[derive(Debug)]
struct Book<W> {
    running: usize,
    waiting: VecDeque<W>,
}

/// Places for invocations, shared fairly between books.
#[derive(Debug)]
pub struct Shares<W> {
    total_max: usize,
    book_max: usize,
    queue_max: usize,
    running: usize,
    books: HashMap<u64, Book<W>>,
    /// Books with requests waiting, in the order their turns come.
    turns: VecDeque<u64>,
}

impl<W: PartialEq> Shares<W> {
    pub fn new(total_max: usize, book_max: usize, queue_max: usize) -> Shares<W> {
        Shares {
            total_max: total_max.max(1),
            book_max: book_max.max(1),
            queue_max,
            running: 0,
            books: HashMap::new(),
            turns: VecDeque::new(),
        }
    }

    /// A request of `book` (`waiter` names it if it must wait).
    pub fn enter(&mut self, book: u64, waiter: W) -> Enter {
        let b = self.books.entry(book).or_insert_with(|| Book { running: 0, waiting: VecDeque::new() });
        if self.running < self.total_max && b.running < self.book_max && b.waiting.is_empty() {
            b.running += 1;
            self.running += 1;
            return Enter::Now;
        }
        if b.waiting.len() >= self.queue_max {
            self.forget_if_idle(book);
            return Enter::Refused;
        }
        if b.waiting.is_empty() {
            self.turns.push_back(book);
        }
        b.waiting.push_back(waiter);
        Enter::Queued
    }

    /// An admitted request of `book` finished; the waiters admitted in its place, each
    /// with its book (one, unless a book's own limit kept the place free before).
    pub fn leave(&mut self, book: u64) -> Vec<(u64, W)> {
        let b = self.books.get_mut(&book).expect("a request that entered");
        assert!(b.running > 0 && self.running > 0, "a leave without an enter");
        b.running -= 1;
        self.running -= 1;
        let admitted = self.admit();
        self.forget_if_idle(book);
        admitted
    }

    /// Takes back a waiter that gave up; `false` if it was admitted already (it then
    /// holds a place, which it must leave).
    pub fn withdraw(&mut self, book: u64, waiter: &W) -> bool {
        let Some(b) = self.books.get_mut(&book) else { return false };
        let Some(i) = b.waiting.iter().position(|w| w == waiter) else { return false };
        b.waiting.remove(i);
        if b.waiting.is_empty() {
            self.turns.retain(|t| *t != book);
        }
        self.forget_if_idle(book);
        true
    }

    /// Admits waiters while there are places, a book at a time in turn.
    fn admit(&mut self) -> Vec<(u64, W)> {
        let mut admitted = Vec::new();
        // Each book in turn at most once without an admission: then all that wait are
        // at their own limit.
        let mut passes = 0;
        while self.running < self.total_max && passes < self.turns.len() {
            let book = self.turns.pop_front().expect("a turn");
            let b = self.books.get_mut(&book).expect("a book with a turn");
            if b.running >= self.book_max {
                self.turns.push_back(book);
                passes += 1;
                continue;
            }
            let w = b.waiting.pop_front().expect("a book with a turn waits");
            b.running += 1;
            self.running += 1;
            if !b.waiting.is_empty() {
                self.turns.push_back(book);
            }
            admitted.push((book, w));
            passes = 0;
        }
        admitted
    }

    fn forget_if_idle(&mut self, book: u64) {
        if self.books.get(&book).is_some_and(|b| b.running == 0 && b.waiting.is_empty()) {
            self.books.remove(&book);
        }
    }

    pub fn running(&self) -> usize {
        self.running
    }
}

/// How a node admits invocations from outside.
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    pub invocations_max: usize,
    pub book_invocations_max: usize,
    pub book_queue_max: usize,
    pub queue_wait: Duration,
    /// Requests a second per token (0: no limit).
    pub caller_rate_max: u32,
}

impl Policy {
    pub fn of(node: &tally_host::NodeLimits) -> Policy {
        Policy {
            invocations_max: node.invocations_max as usize,
            book_invocations_max: node.book_invocations_max as usize,
            book_queue_max: node.book_queue_max as usize,
            queue_wait: Duration::from_millis(node.queue_wait_ms),
            caller_rate_max: node.caller_rate_max,
        }
    }
}

/// Why a request was not admitted: answered 429 with `Retry-After` (whole seconds).
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    pub why: String,
    pub retry_after_s: u64,
}

/// Tokens' buckets kept at most; the least recently used goes first.
const BUCKETS_MAX: usize = 10_000;

struct Bucket {
    level: f64,
    at: Instant,
}

type Waiter = (u64, oneshot::Sender<()>);

struct State {
    shares: Shares<WaiterId>,
    senders: HashMap<WaiterId, oneshot::Sender<()>>,
    next: u64,
    buckets: HashMap<String, Bucket>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WaiterId(u64);

/// [`Shares`] for the gateway's requests.
pub struct Admission {
    policy: Policy,
    state: Arc<Mutex<State>>,
}

/// A place for one invocation; freed when dropped.
pub struct Permit {
    book: u64,
    state: Arc<Mutex<State>>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        release(&self.state, self.book);
    }
}

/// Frees a place of `book` and wakes who takes it; a waiter that went away gives its
/// place back at once.
fn release(state: &Mutex<State>, book: u64) {
    let mut freed = vec![book];
    while let Some(book) = freed.pop() {
        let woken: Vec<Waiter> = {
            let mut s = state.lock().expect("not poisoned");
            let admitted = s.shares.leave(book);
            admitted.into_iter().filter_map(|(book, id)| Some((book, s.senders.remove(&id)?))).collect()
        };
        for (book, tx) in woken {
            if tx.send(()).is_err() {
                freed.push(book);
            }
        }
    }
}

impl Admission {
    pub fn new(policy: Policy) -> Admission {
        let shares = Shares::new(policy.invocations_max, policy.book_invocations_max, policy.book_queue_max);
        let state = State { shares, senders: HashMap::new(), next: 0, buckets: HashMap::new() };
        Admission { policy, state: Arc::new(Mutex::new(state)) }
    }

    /// Takes one request of `caller` from its bucket, or refuses it.
    pub fn rate(&self, caller: &str) -> Result<(), Refusal> {
        let rate = f64::from(self.policy.caller_rate_max);
        if rate == 0.0 {
            return Ok(());
        }
        let now = Instant::now();
        let mut s = self.state.lock().expect("not poisoned");
        if s.buckets.len() >= BUCKETS_MAX && !s.buckets.contains_key(caller) {
            let oldest = s.buckets.iter().min_by_key(|(_, b)| b.at).map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                s.buckets.remove(&k);
            }
        }
        let b = s.buckets.entry(caller.to_string()).or_insert(Bucket { level: rate, at: now });
        b.level = (b.level + now.duration_since(b.at).as_secs_f64() * rate).min(rate);
        b.at = now;
        if b.level < 1.0 {
            let wait = (1.0 - b.level) / rate;
            return Err(Refusal {
                why: format!("the token is over its {} requests a second", self.policy.caller_rate_max),
                retry_after_s: wait.ceil().max(1.0) as u64,
            });
        }
        b.level -= 1.0;
        Ok(())
    }

    /// A place for an invocation of `book`, waiting up to the policy's `queue_wait`.
    pub async fn admit(&self, book: u64) -> Result<Permit, Refusal> {
        let permit = || Permit { book, state: self.state.clone() };
        let (id, rx) = {
            let mut s = self.state.lock().expect("not poisoned");
            let id = WaiterId(s.next);
            s.next += 1;
            match s.shares.enter(book, id) {
                Enter::Now => return Ok(permit()),
                Enter::Refused => {
                    return Err(Refusal {
                        why: format!("book {book} has {} requests waiting already", self.policy.book_queue_max),
                        retry_after_s: 1,
                    })
                }
                Enter::Queued => {
                    let (tx, rx) = oneshot::channel();
                    s.senders.insert(id, tx);
                    (id, rx)
                }
            }
        };
        // Dropped while waiting (the client went away): the channel's send fails when
        // it is admitted, and the place is given back then.
        match tokio::time::timeout(self.policy.queue_wait, rx).await {
            Ok(Ok(())) => Ok(permit()),
            _ => {
                let withdrawn = {
                    let mut s = self.state.lock().expect("not poisoned");
                    s.senders.remove(&id);
                    s.shares.withdraw(book, &id)
                };
                if !withdrawn {
                    // Admitted as it gave up: the place is its own, and is freed now.
                    release(&self.state, book);
                }
                Err(Refusal {
                    why: format!("book {book} waited {:?} for a place among this node's invocations", self.policy.queue_wait),
                    retry_after_s: 1,
                })
            }
        }
    }

    /// Invocations admitted and running now.
    pub fn running(&self) -> usize {
        self.state.lock().expect("not poisoned").shares.running()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A seeded random walk of enters, leaves and withdrawals against an oracle that
    /// knows only the rules: never over a limit, never a place free while a book that
    /// could take it waits, first come first served within a book, and a waiting book
    /// is served before any book is served twice.
    #[test]
    fn shares_keep_their_limits_and_serve_books_in_turn() {
        for seed in 1..200u64 {
            let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut next = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let (total, per_book, queue) = (1 + next() as usize % 6, 1 + next() as usize % 4, next() as usize % 5);
            let mut s: Shares<u64> = Shares::new(total, per_book, queue);
            let mut running: BTreeMap<u64, usize> = BTreeMap::new();
            let mut waiting: BTreeMap<u64, VecDeque<u64>> = BTreeMap::new();
            let mut served_since: BTreeMap<u64, usize> = BTreeMap::new();
            for step in 0..400u64 {
                let book = next() % 4;
                let admitted = match next() % 3 {
                    0 | 1 => match s.enter(book, step) {
                        Enter::Now => {
                            assert!(waiting.get(&book).is_none_or(|w| w.is_empty()), "seed {seed}: passed its own queue");
                            vec![(book, step)]
                        }
                        Enter::Queued => {
                            let q = waiting.entry(book).or_default();
                            if q.is_empty() {
                                // It starts waiting: its turn is counted from here.
                                served_since.insert(book, 0);
                            }
                            q.push_back(step);
                            vec![]
                        }
                        Enter::Refused => {
                            assert_eq!(
                                waiting.get(&book).map_or(0, VecDeque::len),
                                queue,
                                "seed {seed}: refused below the queue's limit"
                            );
                            vec![]
                        }
                    },
                    _ => match running.iter().find(|(_, n)| **n > 0).map(|(b, _)| *b) {
                        Some(b) => {
                            *running.get_mut(&b).unwrap() -= 1;
                            s.leave(b)
                        }
                        None => vec![],
                    },
                };
                for (b, w) in admitted {
                    *running.entry(b).or_default() += 1;
                    if let Some(q) = waiting.get_mut(&b).filter(|q| q.front() == Some(&w)) {
                        q.pop_front();
                        // A book that waits below its own limit sees each other book
                        // served at most once before its turn (four books: three).
                        for (other, q) in &waiting {
                            let below = running.get(other).copied().unwrap_or(0) < per_book;
                            if *other != b && !q.is_empty() && below {
                                *served_since.entry(*other).or_default() += 1;
                            }
                        }
                        served_since.insert(b, 0);
                        assert!(served_since.values().all(|n| *n <= 3), "seed {seed}: a book waited through {served_since:?}");
                    } else if waiting.get(&b).is_some_and(|q| q.contains(&w)) {
                        panic!("seed {seed}: book {b} was not served first come, first served");
                    }
                }
                let total_running: usize = running.values().sum();
                assert!(total_running <= total, "seed {seed}: over the node's limit");
                assert!(running.values().all(|n| *n <= per_book), "seed {seed}: over a book's limit");
                assert_eq!(total_running, s.running(), "seed {seed}");
                if total_running < total {
                    for (b, q) in &waiting {
                        assert!(
                            q.is_empty() || running.get(b).copied().unwrap_or(0) == per_book,
                            "seed {seed}: book {b} waits by a free place"
                        );
                    }
                }
                // Sometimes a waiter gives up.
                if next() % 7 == 0 {
                    if let Some((b, q)) = waiting.iter_mut().find(|(_, q)| !q.is_empty()) {
                        let w = q.pop_back().unwrap();
                        assert!(s.withdraw(*b, &w), "seed {seed}: a waiting request could not give up");
                    }
                }
            }
        }
    }

    #[tokio::test]
    async fn a_flooding_book_leaves_room_and_a_waiter_that_gives_up_frees_nothing_twice() {
        let admission = Admission::new(Policy {
            invocations_max: 2,
            book_invocations_max: 1,
            book_queue_max: 1,
            queue_wait: Duration::from_millis(50),
            caller_rate_max: 0,
        });
        let a = admission.admit(1).await.expect("the first of book 1");
        let waiting = tokio::spawn({
            let admission = Arc::new(admission);
            let again = admission.clone();
            async move { (again.admit(1).await.is_ok(), admission) }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let (admitted, admission) = waiting.await.unwrap();
        assert!(!admitted, "book 1 is at its limit and gave up after queue_wait");
        let b = admission.admit(2).await.expect("book 2 finds the place book 1 may not take");
        assert_eq!(admission.running(), 2);
        drop((a, b));
        assert_eq!(admission.running(), 0, "every place is free again");
    }

    #[test]
    fn a_token_over_its_rate_is_refused_with_a_retry_after() {
        let admission = Admission::new(Policy {
            invocations_max: 8,
            book_invocations_max: 8,
            book_queue_max: 8,
            queue_wait: Duration::from_millis(50),
            caller_rate_max: 5,
        });
        for _ in 0..5 {
            admission.rate("t1").expect("within the burst");
        }
        let refused = admission.rate("t1").expect_err("over the rate");
        assert_eq!(refused.retry_after_s, 1);
        admission.rate("t2").expect("another token has its own bucket");
    }
}
