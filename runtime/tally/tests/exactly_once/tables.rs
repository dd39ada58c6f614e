//! State tables under load: switching protocols without pausing, `auto`, and reads that
//! begin after an answer.

use super::*;

/// Clients of the `bank` example on `book`, each moving money between its own two
/// accounts one transfer at a time (some crashed on purpose and retried), until told
/// to stop. Returns each client's ledger and the instants its transfers finished.
struct Clients {
    stop: Arc<AtomicBool>,
    finished: Arc<Mutex<Vec<Instant>>>,
    tasks: Vec<tokio::task::JoinHandle<(i64, i64)>>,
}

impl Clients {
    async fn start(h: &Harness, book: u64, n: usize) -> Clients {
        let rt = h.node.runtime.clone();
        for c in 0..n {
            for side in ["x", "y"] {
                let opts = InvokeOptions {
                    idempotency_key: Some(format!("open-{c}{side}")),
                    retry_key: None,
                    crash_after: None,
                    delay_ms: 0,
                    key: None,
                };
                rt.invoke_with("bank", BookId(book), Bytes::from(format!("open c{c}{side} 1000")), opts).await.expect("open");
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let finished = Arc::new(Mutex::new(Vec::new()));
        let tasks = (0..n)
            .map(|c| {
                let (rt, stop, finished) = (rt.clone(), stop.clone(), finished.clone());
                tokio::spawn(async move {
                    let (mut x, mut y) = (1000i64, 1000i64);
                    for t in 0u64.. {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let amount = (c as i64 * 3 + t as i64 * 7) % 20 + 1;
                        let input = Bytes::from(format!("transfer c{c}x c{c}y {amount}"));
                        let key = format!("t-{c}-{t}");
                        // Every fifth transfer crashes after a few effects first.
                        let crash = (t % 5 == 2).then_some(1 + t % 6);
                        let opts = InvokeOptions {
                            idempotency_key: Some(key.clone()),
                            retry_key: None,
                            crash_after: crash,
                            delay_ms: 0,
                            key: None,
                        };
                        let mut reply = rt.invoke_with("bank", BookId(book), input.clone(), opts).await;
                        while reply.is_err() {
                            // A pause before each retry, where the task yields: once the
                            // node stops, every invocation fails at once, and a loop that
                            // never yields would hold the test's runtime open after a
                            // failed assertion (the test then hung until its timeout).
                            tokio::time::sleep(Duration::from_millis(2)).await;
                            let opts = InvokeOptions {
                                idempotency_key: Some(key.clone()),
                                retry_key: None,
                                crash_after: None,
                                delay_ms: 0,
                                key: None,
                            };
                            reply = rt.invoke_with("bank", BookId(book), input.clone(), opts).await;
                        }
                        x -= amount;
                        y += amount;
                        assert_eq!(String::from_utf8(reply.unwrap()).unwrap(), format!("ok {x} {y}"), "client {c} transfer {t}");
                        finished.lock().unwrap().push(Instant::now());
                    }
                    (x, y)
                })
            })
            .collect();
        Clients { stop, finished, tasks }
    }

    fn finished_between(&self, from: Instant, to: Instant) -> usize {
        self.finished.lock().unwrap().iter().filter(|&&t| from < t && t < to).count()
    }

    /// Stops the clients and checks every balance against their ledgers.
    async fn check(self, h: &Harness, book: u64) {
        self.stop.store(true, Ordering::Relaxed);
        let rt = &h.node.runtime;
        for (c, task) in self.tasks.into_iter().enumerate() {
            let (x, y) = task.await.expect("a client");
            for (side, want) in [("x", x), ("y", y)] {
                let out = rt.invoke("bank", BookId(book), Bytes::from(format!("balance c{c}{side}"))).await.unwrap();
                assert_eq!(String::from_utf8(out).unwrap(), want.to_string(), "client {c} account {side}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_under_load_keeps_exactly_once_without_pausing() {
    let h = Harness::start(StoreKind::Rocksdb).await;
    let rt = h.node.runtime.clone();
    deploy_bank(&rt, Protocol::ReadOptimized).await;
    let book = 9;
    let clients = Clients::start(&h, book, 3).await;
    let targets = [Protocol::WriteOptimized, Protocol::ReadOptimized, Protocol::WriteOptimized, Protocol::ReadOptimized];
    for (n, to) in targets.into_iter().enumerate() {
        let n = n as i64 + 1;
        // An invocation that started before the switch and lasts a while (it sleeps
        // between its steps) holds the switch open: transfers go on meanwhile.
        let key = format!("long-{n}");
        let slow = {
            let rt = rt.clone();
            let key = key.clone();
            tokio::spawn(async move {
                let opts =
                    InvokeOptions { idempotency_key: Some(key), retry_key: None, crash_after: None, delay_ms: 0, key: None };
                rt.invoke_with("steps", BookId(book), Bytes::from_static(b"run accounts 150"), opts).await
            })
        };
        while !started(&rt, BookId(book), "steps", &key).await {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let began = Instant::now();
        let status = rt.tables().switch(BookId(book), "accounts", to).await.expect("switch");
        assert!(status.switching.is_some(), "{status:?}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while table_status(&h, book, "accounts").await.switching.is_some() {
            assert!(Instant::now() < deadline, "the switch to {to:?} did not finish");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let ended = Instant::now();
        assert_eq!(table_status(&h, book, "accounts").await.protocol, to);
        let during = clients.finished_between(began, ended);
        assert!(during > 0, "no transfer finished during the switch to {to:?}");
        let out = slow.await.unwrap().expect("the long invocation");
        assert_eq!(String::from_utf8(out).unwrap(), format!("a={n} b={n} c={n}"));
        // Only read- and write-optimized switch.
        assert!(rt.tables().switch(BookId(book), "accounts", Protocol::Symmetric).await.is_err());
    }
    let history = table_status(&h, book, "accounts").await.history;
    assert_eq!(history.len(), 1 + 2 * targets.len(), "{history:?}");
    clients.check(&h, book).await;
    h.node.shutdown().await;
}

/// A read that begins after a transfer answered sees the transfer, whatever path the
/// transfer took (one record, or a crash and a retry), with other clients appending
/// meanwhile (in partial mode, the index tier's shards then send their updates out of
/// order), and however far the index lags the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_begun_after_an_answer_sees_it() {
    let h = Harness::start(StoreKind::Rocksdb).await;
    let rt = h.node.runtime.clone();
    deploy_bank(&rt, Protocol::ReadOptimized).await;
    let book = BookId(13);
    let clients = (0..4u64).map(|c| {
        let rt = rt.clone();
        tokio::spawn(async move {
            let (mut x, mut stale) = (0i64, Vec::new());
            for t in 0u64..150 {
                let amount = (t % 20 + 1) as i64;
                let input = Bytes::from(format!("transfer c{c}x c{c}y {amount}"));
                let key = format!("t-{c}-{t}");
                let opts = |crash_after| InvokeOptions { idempotency_key: Some(key.clone()), crash_after, ..Default::default() };
                let mut reply = rt.invoke_with("bank", book, input.clone(), opts((t % 3 == 1).then_some(1 + t % 4))).await;
                while reply.is_err() {
                    reply = rt.invoke_with("bank", book, input.clone(), opts(None)).await;
                }
                x -= amount;
                let out = rt.invoke("bank", book, Bytes::from(format!("balance c{c}x"))).await.unwrap();
                if String::from_utf8(out).unwrap() != x.to_string() {
                    stale.push(t);
                }
            }
            stale
        })
    });
    for (c, client) in clients.collect::<Vec<_>>().into_iter().enumerate() {
        let stale = client.await.unwrap();
        assert!(stale.is_empty(), "client {c}: the reads after transfers {stale:?} missed them");
    }
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_picks_the_protocol_that_costs_less_for_the_order_of_operations() {
    // A synced store write at half an append's cost.
    let h = Harness::start_with(StoreKind::Rocksdb, |c| c.state.auto_sync_cost = 50).await;
    let rt = h.node.runtime.clone();
    deploy_bank(&rt, Protocol::Auto).await;
    let call = |function: &'static str, book: u64, input: String, opts: InvokeOptions| {
        let rt = rt.clone();
        async move {
            let out = rt.invoke_with(function, BookId(book), Bytes::from(input), opts).await.expect("an invocation");
            String::from_utf8(out).unwrap()
        }
    };
    // Writes alone, each invocation started lazily: read-optimized logs each write with
    // the result, write-optimized would log the Init first and sync the write besides.
    // The table stays read-optimized, however many looks `auto` takes (Halfmoon's
    // criterion, writes outnumbering reads, moved it).
    let began = Instant::now();
    let mut i = 0;
    while began.elapsed() < Duration::from_millis(1_500) {
        call("bank", 11, format!("open a{} {i}", i % 10), InvokeOptions::default()).await;
        i += 1;
    }
    assert!(i >= 40, "only {i} writes");
    let st = table_status(&h, 11, "accounts").await;
    assert_eq!((st.protocol, st.auto, st.history.len()), (Protocol::ReadOptimized, true, 1), "{st:?}");
    // Keyed invocations (their Init logged at the start) that write, then read:
    // read-optimized logs the write before the read, an append; write-optimized syncs
    // it, half an append here. `auto` moves.
    let mut limits = rt.config.limits;
    limits.timeout_ms = 2_000;
    let tables = [("a".to_string(), Protocol::Auto)].into_iter().collect();
    rt.deploy("steps-auto", guest("steps"), limits, tables).await.expect("deploying steps");
    // Each its own key, exclusive (a shared run only reads).
    let keyed = |i: u64| InvokeOptions { key: Some(InvocationKey::new(format!("k{i}"), true).unwrap()), ..Default::default() };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = BTreeMap::new();
    for n in 0.. {
        let k = n % 10;
        let out = call("steps-auto", 12, format!("script put a k{k} v{n};get a k{k}"), keyed(n)).await;
        assert_eq!(out, format!("ok,v{n}"));
        last.insert(k, n);
        let st = table_status(&h, 12, "a").await;
        if st.protocol == Protocol::WriteOptimized && st.switching.is_none() {
            assert!(st.auto);
            break;
        }
        assert!(Instant::now() < deadline, "auto never chose write-optimized: {st:?}");
    }
    // Reads alone: no appends either way, and logged reads cost bytes: back to
    // read-optimized, with every value intact.
    loop {
        for (k, n) in &last {
            assert_eq!(call("steps-auto", 12, format!("script get a k{k}"), InvokeOptions::default()).await, format!("v{n}"));
        }
        let st = table_status(&h, 12, "a").await;
        if st.protocol == Protocol::ReadOptimized && st.switching.is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "auto never went back to read-optimized: {st:?}");
    }
    h.node.shutdown().await;
}
