//! Boki's libraries across crashes: objects and their transactions, keyed invocations,
//! locks, queues, and the streams' checkpoints.

use super::*;

/// Runs `script` on book `book` under idempotency key `key`, crashing it after
/// `crash_after` effects first when given (then running it again under the key): its
/// output, as the first execution to finish reported it.
async fn script_once(h: &Harness, book: u64, script: &str, key: &str, crash_after: Option<u64>) -> String {
    let input = format!("script {script}");
    if crash_after.is_some() {
        match h.invoke(book, &input, key, crash_after).await {
            Ok(out) => return out,
            Err(RuntimeError::InjectedCrash) => {}
            Err(e) => panic!("{script}: {e}"),
        }
    }
    h.invoke(book, &input, key, None).await.unwrap_or_else(|e| panic!("{script}: {e}"))
}

/// A counter of the objects test, as the guest reads it (0 when never written).
async fn object_counter(h: &Harness, book: u64, object: &str) -> i64 {
    let out = h.node.runtime.invoke("steps", BookId(book), Bytes::from(format!("script oget {object} /n"))).await.expect("read");
    let text = String::from_utf8(out).unwrap();
    if text == "none" {
        0
    } else {
        text.parse().unwrap_or_else(|_| panic!("{object} holds {text}"))
    }
}

/// Boki §7.5's counters: 48 transactions at once on 32 counters, each adding to a few
/// of them (some reading one first, so that they conflict; some aborting), a third
/// crashed partway and run again. Every counter must hold the sum of the committed
/// transactions' additions: a commit counted twice, an aborted or conflicting one that
/// left a write, or a lost commit shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_on_counters_take_effect_whole_once_or_not_at_all_under_crashes() {
    let h = Arc::new(Harness::start(StoreKind::Rocksdb).await);
    const BOOK: u64 = 1300;
    const COUNTERS: u64 = 32;
    let mut tasks = Vec::new();
    for t in 0..48u64 {
        let h = h.clone();
        tasks.push(tokio::spawn(async move {
            let s = t.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 7;
            let counters: Vec<u64> = (0..1 + s % 3).map(|i| (s / 7 + i * 11) % COUNTERS).collect();
            let by = 1 + (s / 3) % 9;
            let mut ops = vec!["begin".to_string()];
            if t % 3 == 0 {
                ops.push(format!("oget c{} /n", counters[0]));
            }
            ops.extend(counters.iter().map(|c| format!("oinc c{c} /n {by}")));
            ops.push(if t % 7 == 3 { "abort" } else { "commit" }.to_string());
            let crash = (t % 3 == 1).then_some(1 + s % 4);
            let out = script_once(&h, BOOK, &ops.join(";"), &format!("txn-{t}"), crash).await;
            let committed = out.ends_with("committed");
            (counters, by as i64, committed, out)
        }));
    }
    let mut want = vec![0i64; COUNTERS as usize];
    let (mut committed, mut conflicted, mut aborted) = (0, 0, 0);
    for task in tasks {
        let (counters, by, ok, out) = task.await.unwrap();
        match out.rsplit(',').next() {
            Some("committed") => committed += 1,
            Some("conflict") => conflicted += 1,
            Some("ok") => aborted += 1,
            other => panic!("a transaction ended {other:?}: {out}"),
        }
        if ok {
            for c in counters {
                want[c as usize] += by;
            }
        }
    }
    for c in 0..COUNTERS {
        assert_eq!(object_counter(&h, BOOK, &format!("c{c}")).await, want[c as usize], "counter c{c}");
    }
    eprintln!("{committed} committed, {conflicted} conflicted, {aborted} aborted");
    assert!(committed > 20 && aborted > 0, "{committed} committed, {aborted} aborted");
}

/// Keyed invocations (`?key=`): 64 concurrent read-modify-write increments of one state
/// key, addressed to one key, lose nothing (unkeyed, they would: the guest reads, then
/// writes); the guest sees its key, and a shared one runs beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_invocations_never_lose_an_update_of_one_key() {
    let h = Arc::new(Harness::start(StoreKind::Rocksdb).await);
    const BOOK: u64 = 1301;
    let keyed =
        |exclusive: bool| InvokeOptions { key: Some(InvocationKey::new("hot".into(), exclusive).unwrap()), ..Default::default() };
    let mut tasks = Vec::new();
    for i in 0..64 {
        let (h, opts) = (h.clone(), keyed(true));
        tasks.push(tokio::spawn(async move {
            let input = Bytes::from_static(b"script inc r hits;key");
            let out = h.node.runtime.invoke_with("steps", BookId(BOOK), input, opts).await;
            (i, out.map(|o| String::from_utf8(o).unwrap()))
        }));
    }
    let shared = h.node.runtime.invoke_with("steps", BookId(BOOK), Bytes::from_static(b"script key"), keyed(false)).await;
    assert_eq!(shared.map(|o| String::from_utf8(o).unwrap()).unwrap(), "hot");
    let mut seen = std::collections::BTreeSet::new();
    for task in tasks {
        let (i, out) = task.await.unwrap();
        // One that waited for the key past its time limit is answered as suspended.
        let out = match out {
            Err(RuntimeError::Suspended { id, .. }) => {
                String::from_utf8(outcome(&h.node.runtime, BOOK, &id).await.unwrap().to_vec()).unwrap()
            }
            other => other.unwrap_or_else(|e| panic!("increment {i}: {e}")),
        };
        let (n, key) = out.split_once(',').unwrap();
        assert_eq!(key, "hot");
        assert!(seen.insert(n.parse::<u64>().unwrap()), "two increments saw {n}");
    }
    assert_eq!(h.read(BOOK, "r", "hits").await, "64");
    assert_eq!(seen, (1..=64).collect());
    let unkeyed = h.node.runtime.invoke("steps", BookId(BOOK), Bytes::from_static(b"script key")).await.unwrap();
    assert_eq!(unkeyed, b"none");
}

/// A lock is held by one invocation at a time; one whose holder crashed holding it is
/// released once the holder runs again (a waiter runs it), and finishing releases what
/// the guest did not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_is_exclusive_and_released_after_its_holder_crashes() {
    let h = Arc::new(Harness::start(StoreKind::Rocksdb).await);
    const BOOK: u64 = 1302;
    // The holder crashes right after taking the lock (its effects: Init, the try).
    let crashed = h.invoke(BOOK, "script lock L 1000;inc r held;unlock L", "holder", Some(2)).await;
    assert!(matches!(crashed, Err(RuntimeError::InjectedCrash)), "{crashed:?}");
    let status = h.node.runtime.libraries().lock_holder(&mut Default::default(), BookId(BOOK), "L").await.unwrap();
    assert!(status.is_some(), "the crashed holder holds L");
    // A short wait times out; a long one gets it once the waiter has run the holder again.
    assert_eq!(script_once(&h, BOOK, "lock L 50", "short", None).await, "false");
    assert_eq!(script_once(&h, BOOK, "lock L 8000;unlock L", "long", None).await, "true,ok");
    assert_eq!(h.read(BOOK, "r", "held").await, "1");
    // 16 at once, half of them leaving the release to their end.
    let mut tasks = Vec::new();
    for i in 0..16 {
        let h = h.clone();
        let script = if i % 2 == 0 { "lock L 20000;inc r z;unlock L" } else { "lock L 20000;inc r z" };
        tasks.push(tokio::spawn(async move { script_once(&h, BOOK, script, &format!("many-{i}"), None).await }));
    }
    for task in tasks {
        assert!(task.await.unwrap().starts_with("true,"));
    }
    assert_eq!(h.read(BOOK, "r", "z").await, "16");
    let free = h.node.runtime.libraries().lock_holder(&mut Default::default(), BookId(BOOK), "L").await.unwrap();
    assert_eq!(free, None);
}

/// Producers push in order while consumers pop, some crashed partway and run again:
/// every message is popped exactly once, and one consumer sees a producer's messages in
/// the order they were pushed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_messages_are_popped_once_in_order_across_consumer_crashes() {
    let h = Arc::new(Harness::start(StoreKind::Rocksdb).await);
    const BOOK: u64 = 1303;
    let mut tasks = Vec::new();
    for p in 0..4 {
        let h = h.clone();
        let script = (0..5).map(|j| format!("qpush jobs p{p}-{j}")).collect::<Vec<_>>().join(";");
        tasks.push(tokio::spawn(async move { script_once(&h, BOOK, &script, &format!("producer-{p}"), None).await }));
    }
    for c in 0..4u64 {
        let h = h.clone();
        let script = ["qpop jobs 300"; 6].join(";");
        let crash = (c % 2 == 0).then_some(2 + c);
        tasks.push(tokio::spawn(async move { script_once(&h, BOOK, &script, &format!("consumer-{c}"), crash).await }));
    }
    let mut popped: Vec<Vec<String>> = Vec::new();
    for task in tasks {
        let out = task.await.unwrap();
        if out.contains("qpush") || out.starts_with("ok") {
            continue;
        }
        popped.push(out.split(',').filter(|m| *m != "none").map(str::to_string).collect());
    }
    for d in 0.. {
        let out = script_once(&h, BOOK, "qpop jobs 50", &format!("drain-{d}"), None).await;
        if out == "none" {
            break;
        }
        popped.push(vec![out]);
    }
    let mut all: Vec<String> = popped.iter().flatten().cloned().collect();
    all.sort();
    let mut want: Vec<String> = (0..4).flat_map(|p| (0..5).map(move |j| format!("p{p}-{j}"))).collect();
    want.sort();
    assert_eq!(all, want, "every message once");
    for got in &popped {
        for p in 0..4 {
            let order: Vec<&String> = got.iter().filter(|m| m.starts_with(&format!("p{p}-"))).collect();
            assert!(order.windows(2).all(|w| w[0] < w[1]), "a consumer saw {order:?}");
        }
    }
    let shards = h.node.runtime.libraries().queue(&mut Default::default(), BookId(BOOK), "jobs").await.unwrap();
    assert_eq!(shards.iter().map(|s| s.pending).sum::<u64>(), 0);
}

/// Garbage collection of the libraries (Boki §5.5): object, queue and lock streams are
/// checkpointed and trimmed while they are used, and read the same afterwards, from
/// the checkpoints once nothing newer is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn library_streams_are_checkpointed_and_trimmed_and_read_the_same() {
    let h = Harness::start_with(StoreKind::Rocksdb, |c| {
        c.state.gc_interval_ms = 100;
        c.state.recovery_interval_ms = 50;
        c.state.history_kept_ms = 0;
    })
    .await;
    const BOOK: u64 = 1306;
    let book = BookId(BOOK);
    let d = h.node.runtime.durable().clone();
    let mut ctx = tally_logsvc::Context::default();
    let mut pushed = Vec::new();
    let mut popped = Vec::new();
    for round in 0..3i64 {
        for i in 0..30 {
            let script = format!(
                "oinc c /n 1;begin;oget c /n;oinc c /n 1;oset t /r{round} {i};commit;qpush q m{round}-{i};lock L 1000;unlock L"
            );
            let out = script_once(&h, BOOK, &script, &format!("w{round}-{i}"), (i % 5 == 0).then_some(3)).await;
            assert!(out.ends_with(",committed,ok,true,ok"), "{out}");
            pushed.push(format!("m{round}-{i}"));
        }
        for i in 0..20 {
            popped.push(script_once(&h, BOOK, "qpop q 1000", &format!("p{round}-{i}"), None).await);
        }
        // Collection catches up within a few of its intervals: nothing but the queue's
        // pending pushes (from its oldest on) is left.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let all = d.libraries().records(&mut ctx, book, None).await.unwrap();
            let c = d.libraries().records(&mut ctx, book, Some("c")).await.unwrap();
            if all == 0 && c == 0 {
                break;
            }
            assert!(Instant::now() < deadline, "round {round}: {all} library records and {c} of c left");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(object_counter(&h, BOOK, "c").await, 60 * (round + 1));
        let t = d.libraries().object(&mut ctx, book, "t", &format!("/r{round}")).await.unwrap();
        assert_eq!(t.as_deref(), Some("29"));
        let shards = d.libraries().queue(&mut ctx, book, "q").await.unwrap();
        assert_eq!(shards.iter().map(|s| s.pending).sum::<u64>(), 10 * (round as u64 + 1));
        assert_eq!(d.libraries().lock_holder(&mut ctx, book, "L").await.unwrap(), None);
    }
    for i in 0.. {
        match script_once(&h, BOOK, "qpop q 50", &format!("drain-{i}"), None).await.as_str() {
            "none" => break,
            m => popped.push(m.to_string()),
        }
    }
    popped.sort();
    pushed.sort();
    assert_eq!(popped, pushed, "every message popped once, the ones pushed before a collection too");
}

/// Malformed names, paths and JSON are the guest's errors to handle, not the
/// invocation's end; and the platform's own streams stay out of reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn library_calls_refuse_bad_names_paths_and_json_to_the_guest() {
    let h = Harness::start(StoreKind::Rocksdb).await;
    let long = "x".repeat(300);
    let script = format!(
        "oset o bad 1;oset o /a {{;oset {long} /a 1;qpush {long} m;lock {long} 1;oinc o /s 1;oset o /s \"t\";oinc o /s 1;commit;unlock L;oget o ."
    );
    let out = script_once(&h, 1304, &script, "bad", None).await;
    let want = [
        "error:invalid_argument",
        "error:invalid_argument",
        "error:invalid_argument",
        "error:invalid_argument",
        "error:invalid_argument",
        "ok",
        "ok",
        "error:invalid_argument",
        "error:invalid_argument",
        "error:invalid_argument",
        "{\"s\":\"t\"}",
    ];
    assert_eq!(out.split(',').collect::<Vec<_>>(), want, "{out}");
    // A transaction of as many objects as a commit record has tags for commits; one
    // more object is refused, and the transaction still commits without it.
    let writes: Vec<String> = (0..61).map(|i| format!("oset big{i} . {i}")).collect();
    let out = script_once(&h, 1304, &format!("begin;{};commit;oget big59 .", writes.join(";")), "many", None).await;
    let got: Vec<&str> = out.split(',').collect();
    assert_eq!(got[61], "error:invalid_argument", "{out}");
    assert_eq!(got[62..], ["committed", "59"], "{out}");
}
