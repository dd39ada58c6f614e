//! Boki's workloads end to end through HTTP against a real `tally dev`, with crashes
//! injected (`Tally-Crash-After`) and every crashed invocation run again under its
//! `Idempotency-Key`:
//!
//! - `examples/retwis`: concurrent tweets by users with overlapping followers, two
//!   clients of one user among them, while a reader reads timelines. Every committed
//!   tweet must be on its author's and every follower's timeline exactly once, each
//!   user's count must equal its tweets, numbered 1, 2, 3, ... in commit order, every
//!   timeline must list tweets in one order (the commit order), and every timeline read
//!   must name only tweets that exist in its snapshot.
//! - `examples/pipeline`: producers, relays and consumers running at once: every
//!   message reaches the end once, through exactly one relay.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{guest, node_with, Node};
use serde_json::Value;

/// Invocations `keyed` saw stopped by an injected crash, so that a test can check that
/// its crashes happened (each test runs in a process of its own under nextest).
static CRASHED: AtomicU64 = AtomicU64::new(0);

/// Runs `input` on `function` under `key`, first with a crash injected after `crash`
/// effects if given (the invocation may also finish before it), then again under the
/// same key until it succeeds; its answer, parsed.
fn keyed(url: &str, function: &str, book: u64, input: &str, key: &str, crash: Option<u64>) -> Value {
    let path = format!("/v1/functions/{function}/invoke?book={book}");
    if let Some(after) = crash {
        let (status, body) = Node::attach(url).post_with(
            &path,
            input.as_bytes(),
            &[("idempotency-key", key), ("tally-crash-after", &after.to_string())],
        );
        let body = String::from_utf8_lossy(&body);
        if status == 200 {
            return serde_json::from_str(&body).unwrap_or_else(|_| Value::String(body.into_owned()));
        }
        assert!(status == 500 && body.contains("injected_crash"), "{input:?} crashed after {after}: {status} {body}");
        CRASHED.fetch_add(1, Ordering::SeqCst);
    }
    let body = common::until_ok(|| url.to_owned(), &path, input, key, Duration::from_millis(20));
    serde_json::from_str(&body).unwrap_or(Value::String(body))
}

// --- retwis -------------------------------------------------------------------------

const USERS: u64 = 12;
/// Each user is followed by the next 3 (modulo `USERS`).
const FOLLOWERS: u64 = 3;
/// The authors of the concurrent phase, each a client of its own, and user 0 a second
/// client, whose tweets race its first client's for the user's tweet count.
const AUTHORS: u64 = 6;
const TWEETS_PER_CLIENT: u64 = 5;
/// A timeline's length (`TIMELINE_LEN` of the example).
const TIMELINE_LEN: usize = 32;

fn followers(user: u64) -> Vec<u64> {
    (1..=FOLLOWERS).map(|k| (user + k) % USERS).collect()
}

/// A tweet as `timeline` shows it: (id, author, seq).
fn tweets_of(timeline: &Value) -> Vec<(String, u64, u64)> {
    timeline["tweets"]
        .as_array()
        .unwrap_or_else(|| panic!("a timeline: {timeline}"))
        .iter()
        .map(|t| {
            assert!(t.is_object(), "a timeline names a tweet its snapshot does not hold: {timeline}");
            (
                t["id"].as_str().expect("an id").to_owned(),
                t["author"].as_u64().expect("an author"),
                t["seq"].as_u64().expect("a seq"),
            )
        })
        .collect()
}

/// What every timeline read must show, whenever it is read: existing tweets only
/// (checked by `tweets_of`), no tweet twice, each author's tweets newest first.
fn check_snapshot(user: u64, timeline: &Value) -> Vec<(String, u64, u64)> {
    let tweets = tweets_of(timeline);
    let ids: BTreeSet<&String> = tweets.iter().map(|(id, _, _)| id).collect();
    assert_eq!(ids.len(), tweets.len(), "user {user}'s timeline lists a tweet twice: {timeline}");
    let mut last_seq: BTreeMap<u64, u64> = BTreeMap::new();
    for (_, author, seq) in &tweets {
        if let Some(newer) = last_seq.insert(*author, *seq) {
            assert!(newer > *seq, "user {user}'s timeline has {author}'s tweet {seq} after its tweet {newer}: {timeline}");
        }
    }
    tweets
}

#[test]
fn retwis_tweets_keep_timelines_and_counts_under_crashes() {
    let (_dir, n) = node_with(&["--crash-injection", "true"]);
    n.deploy("retwis", &guest("retwis"), "?timeout_ms=5000");
    let book = 21;
    let url = n.url.clone();
    let init = keyed(&url, "retwis", book, &format!("init 0 {USERS} {FOLLOWERS}"), "init", Some(3));
    assert_eq!(init["created"].as_u64().unwrap_or(0) + init["existing"].as_u64().unwrap_or(0), USERS, "{init}");
    // A second init changes nothing.
    assert_eq!(keyed(&url, "retwis", book, &format!("init 0 {USERS} {FOLLOWERS}"), "init-again", None)["existing"], USERS);
    assert_eq!(n.invoke_ok("retwis", book, "login 4 pw4"), "ok");
    assert_eq!(n.invoke_ok("retwis", book, "login 4 pw5"), "denied");
    assert_eq!(n.invoke_ok("retwis", book, "login 99 pw99"), "denied");

    // The concurrent phase: every author's clients tweet, every fourth tweet crashed
    // first, after its first effect (on `tally dev`, one record of its Init and its
    // commit, which a re-execution replays by reading where the first one read; a tweet
    // is answered after it, before its Result), while a reader checks timeline
    // snapshots.
    let committed: Arc<Mutex<Vec<(String, u64, u64)>>> = Arc::default();
    let writing = Arc::new(AtomicBool::new(true));
    let reads = Arc::new(AtomicU64::new(0));
    let reader = thread::spawn({
        let (url, writing, reads) = (url.clone(), writing.clone(), reads.clone());
        move || {
            let n = Node::attach(&url);
            while writing.load(Ordering::SeqCst) {
                for user in 0..USERS {
                    let timeline: Value =
                        serde_json::from_str(&n.invoke_ok("retwis", book, &format!("timeline {user} 32"))).unwrap();
                    check_snapshot(user, &timeline);
                    reads.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    });
    let clients: Vec<(u64, u64)> = (0..AUTHORS).map(|a| (a, 0)).chain([(0, 1)]).collect();
    let threads: Vec<_> = clients
        .into_iter()
        .map(|(author, client)| {
            let (url, committed) = (url.clone(), committed.clone());
            thread::spawn(move || {
                for t in 0..TWEETS_PER_CLIENT {
                    let crash = (t % 4 == 1).then_some(1);
                    let input = format!("tweet {author} tweet {t} of client {client} of user {author}");
                    let reply = keyed(&url, "retwis", book, &input, &format!("tweet-{author}-{client}-{t}"), crash);
                    let (id, seq) = (reply["tweet"].as_str(), reply["seq"].as_u64());
                    let (id, seq) = (id.unwrap_or_else(|| panic!("a tweet: {reply}")), seq.expect("a seq"));
                    committed.lock().unwrap().push((id.to_owned(), author, seq));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a tweeting client");
    }
    writing.store(false, Ordering::SeqCst);
    reader.join().expect("the reader");
    assert!(reads.load(Ordering::SeqCst) > 0, "no timeline was read during the writes");
    assert!(CRASHED.load(Ordering::SeqCst) >= 5, "only {} tweets crashed", CRASHED.load(Ordering::SeqCst));

    let committed = committed.lock().unwrap().clone();
    // Each author's tweets are numbered 1..=N and its count is N.
    for author in 0..USERS {
        let mut seqs: Vec<u64> = committed.iter().filter(|(_, a, _)| *a == author).map(|(_, _, s)| *s).collect();
        seqs.sort_unstable();
        let count = seqs.len() as u64;
        assert_eq!(seqs, (1..=count).collect::<Vec<_>>(), "user {author}'s tweets are not numbered 1..={count}");
        let profile: Value = serde_json::from_str(&n.invoke_ok("retwis", book, &format!("profile {author}"))).unwrap();
        assert_eq!(profile["tweets"], count, "user {author}: {profile}");
        assert_eq!(profile["followers"], serde_json::json!(followers(author)), "user {author}: {profile}");
    }
    // Every timeline holds exactly the tweets of its user and of whom it follows.
    let mut orders = Vec::new();
    for user in 0..USERS {
        let timeline: Value = serde_json::from_str(&n.invoke_ok("retwis", book, &format!("timeline {user} 32"))).unwrap();
        let tweets = check_snapshot(user, &timeline);
        let want: BTreeSet<&String> =
            committed.iter().filter(|(_, a, _)| *a == user || followers(*a).contains(&user)).map(|(id, _, _)| id).collect();
        assert!(want.len() < TIMELINE_LEN, "user {user}'s timeline would overflow: the test checks every tweet on it");
        let got: BTreeSet<&String> = tweets.iter().map(|(id, _, _)| id).collect();
        assert_eq!(got, want, "user {user}'s timeline");
        for (id, author, seq) in &tweets {
            assert!(committed.contains(&(id.clone(), *author, *seq)), "user {user}'s timeline shows {id} as {author}'s {seq}");
        }
        orders.push(tweets.into_iter().map(|(id, _, _)| id).collect::<Vec<_>>());
    }
    // One order on every timeline: any two tweets on two timelines are in the same order.
    for (i, a) in orders.iter().enumerate() {
        let position: BTreeMap<&String, usize> = a.iter().enumerate().map(|(p, id)| (id, p)).collect();
        for b in &orders[i + 1..] {
            let common: Vec<usize> = b.iter().filter_map(|id| position.get(id).copied()).collect();
            assert!(common.windows(2).all(|w| w[0] < w[1]), "two timelines list common tweets in different orders");
        }
    }

    // The bound: 40 more tweets of one user leave its timeline at the newest 32.
    let author = USERS - 1;
    let before = committed.iter().filter(|(_, a, _)| *a == author).count() as u64;
    for t in 0..40 {
        keyed(&url, "retwis", book, &format!("tweet {author} more {t}"), &format!("more-{t}"), None);
    }
    let timeline: Value = serde_json::from_str(&n.invoke_ok("retwis", book, &format!("timeline {author} 32"))).unwrap();
    let seqs: Vec<u64> = check_snapshot(author, &timeline).into_iter().map(|(_, _, seq)| seq).collect();
    let newest = before + 40;
    assert_eq!(seqs, (newest - 31..=newest).rev().collect::<Vec<_>>(), "{timeline}");
    let timeline: Value = serde_json::from_str(&n.invoke_ok("retwis", book, &format!("timeline {author}"))).unwrap();
    assert_eq!(tweets_of(&timeline).len(), 8, "a timeline read shows 8 tweets by default: {timeline}");

    // Following: once, however often asked; a tweet then reaches the new follower.
    for _ in 0..2 {
        assert_eq!(n.invoke_ok("retwis", book, "follow 5 0"), "ok");
    }
    let profile: Value = serde_json::from_str(&n.invoke_ok("retwis", book, "profile 0")).unwrap();
    assert_eq!(profile["followers"], serde_json::json!([1, 2, 3, 5]), "{profile}");
    let tweet = keyed(&url, "retwis", book, "tweet 0 for my new follower", "for-5", None);
    let timeline: Value = serde_json::from_str(&n.invoke_ok("retwis", book, "timeline 5 1")).unwrap();
    assert_eq!(timeline["tweets"][0]["id"], tweet["tweet"], "{timeline}");
    n.expect_error(n.invoke("retwis", book, "follow 5 5"), 500, "function_error");
}

// --- pipeline -----------------------------------------------------------------------

const PRODUCERS: u64 = 3;
const MESSAGES_PER_PRODUCER: u64 = 20;
const RELAYS: u64 = 2;
const CONSUMERS: u64 = 2;

/// Invokes `input(i)` under keys `<name>-<i>` (every third crashed first) until the sum
/// of `field` over the answers reaches `total`; the answers.
fn stage(
    url: String,
    book: u64,
    name: String,
    input: String,
    field: &'static str,
    done: Arc<AtomicU64>,
    total: u64,
) -> Vec<Value> {
    let mut answers = Vec::new();
    let mut i = 0;
    while done.load(Ordering::SeqCst) < total {
        // A stage pops many with one record: it makes few effects (its pop, the pushes
        // riding its next record, its result), so crash after one or two.
        let crash = (i % 3 == 1).then_some(1 + i % 2);
        let answer = keyed(&url, "pipeline", book, &input, &format!("{name}-{i}"), crash);
        done.fetch_add(answer[field].as_u64().unwrap_or_else(|| panic!("{input}: {answer}")), Ordering::SeqCst);
        answers.push(answer);
        i += 1;
        assert!(i < 1_000, "{name} ran 1,000 times, and {} of {total} are through", done.load(Ordering::SeqCst));
    }
    answers
}

#[test]
fn pipeline_stages_pass_every_message_once_under_crashes() {
    let (_dir, n) = node_with(&["--crash-injection", "true"]);
    n.deploy("pipeline", &guest("pipeline"), "?timeout_ms=5000");
    let book = 22;
    let url = n.url.clone();
    let total = PRODUCERS * MESSAGES_PER_PRODUCER;
    let (relayed, consumed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut threads = Vec::new();
    for r in 0..RELAYS {
        let (url, relayed) = (url.clone(), relayed.clone());
        threads.push(thread::spawn(move || {
            stage(url, book, format!("relay{r}"), "relay raw cooked 4 100".into(), "relayed", relayed, total);
            Vec::new()
        }));
    }
    for c in 0..CONSUMERS {
        let (url, consumed) = (url.clone(), consumed.clone());
        threads.push(thread::spawn(move || {
            stage(url, book, format!("consumer{c}"), "consume cooked 4 100".into(), "popped", consumed, total)
        }));
    }
    for p in 0..PRODUCERS {
        let crash = (p == 1).then_some(7);
        let answer =
            keyed(&url, "pipeline", book, &format!("produce raw {MESSAGES_PER_PRODUCER} 64"), &format!("producer-{p}"), crash);
        assert_eq!(answer["pushed"], MESSAGES_PER_PRODUCER, "{answer}");
    }
    let answers: Vec<Value> = threads.into_iter().flat_map(|t| t.join().expect("a stage")).collect();
    assert!(CRASHED.load(Ordering::SeqCst) >= 5, "only {} stages crashed", CRASHED.load(Ordering::SeqCst));
    assert_eq!(relayed.load(Ordering::SeqCst), total, "relayed in all");
    assert_eq!(consumed.load(Ordering::SeqCst), total, "consumed in all");
    // Every message once, from every producer, through one relay, with its latency.
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    for answer in &answers {
        let (ids, hops, pushed) = (answer["ids"].as_array(), answer["hops"].as_array(), answer["pushed_us"].as_array());
        let (ids, hops, pushed) = (ids.expect("ids"), hops.expect("hops"), pushed.expect("push times"));
        assert_eq!((ids.len(), hops.len(), pushed.len()), (ids.len(), ids.len(), ids.len()), "{answer}");
        assert!(hops.iter().all(|h| h == 1), "a message took other than one relay: {answer}");
        let now_us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_micros() as u64;
        let latency = |t: &Value| t.as_u64().map(|t| now_us.saturating_sub(t));
        assert!(pushed.iter().all(|t| latency(t).is_some_and(|l| l < 60_000_000)), "{answer}");
        for id in ids {
            *seen.entry(id.as_str().expect("an id").to_owned()).or_default() += 1;
        }
    }
    assert!(seen.values().all(|&times| times == 1), "messages consumed twice: {seen:?}");
    assert_eq!(seen.len() as u64, total);
    let mut per_producer: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for id in seen.keys() {
        let (producer, i) = id.rsplit_once(':').unwrap_or_else(|| panic!("an id {id}"));
        per_producer.entry(producer).or_default().insert(i.parse().expect("an index"));
    }
    assert_eq!(per_producer.len() as u64, PRODUCERS, "{per_producer:?}");
    for indices in per_producer.values() {
        assert_eq!(*indices, (0..MESSAGES_PER_PRODUCER).collect(), "{per_producer:?}");
    }
    for queue in ["raw", "cooked"] {
        let (status, v) = n.json("GET", &format!("/v1/books/{book}/queues/{queue}"), b"");
        assert_eq!((status, v["pending"].as_u64()), (200, Some(0)), "{queue}: {v}");
    }
}
