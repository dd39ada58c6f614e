//! Invocations across crashes: every language, clocks, appends, sleeps, delays, traps,
//! cancellation, promises, chains, and shutting down.

use super::*;

/// The SDK languages besides Rust, whose `steps` guests (`<lang>-steps.wasm`, built by
/// `scripts/build-guests.sh` with `tally build`) implement `tests/guests/STEPS.md` as
/// the Rust one does.
const LANGUAGES: [&str; 4] = ["python", "js", "go", "c"];

impl Harness {
    /// Deploys a language's `steps` guest as `steps-<lang>`, with the tables of `steps`.
    /// `steps` and the steps function of every other language, by name.
    async fn steps_in_every_language(&self) -> Vec<String> {
        let mut functions = vec!["steps".to_string()];
        for lang in LANGUAGES {
            functions.push(self.deploy_steps(lang).await);
        }
        functions
    }

    async fn deploy_steps(&self, lang: &str) -> String {
        let name = format!("steps-{lang}");
        let mut limits = self.node.runtime.config.limits;
        limits.timeout_ms = 5_000;
        self.node.runtime.deploy(&name, guest(&format!("{lang}-steps")), limits, tables()).await.expect("deploying");
        name
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_language_survives_crashes_at_every_step() {
    let h = Harness::start(StoreKind::Rocksdb).await;
    for (i, lang) in LANGUAGES.into_iter().enumerate() {
        let function = h.deploy_steps(lang).await;
        for (j, table) in ["r", "w", "s"].into_iter().enumerate() {
            let book = 100 + 10 * i as u64 + j as u64;
            let (points, exact) = crash_everywhere(&h, &function, book, table).await;
            assert!(points >= crash_points_min(table), "{lang}/{table}: only {points} crash points");
            assert!(exact, "{lang}/{table}: an effect happened twice or not at all");
        }
    }
    h.node.shutdown().await;
}

/// The value of `name=` in a guest's space-separated output.
fn field(out: &str, name: &str) -> String {
    let prefix = format!("{name}=");
    out.split(' ').find_map(|w| w.strip_prefix(&prefix)).unwrap_or_else(|| panic!("{name} in {out:?}")).to_string()
}

/// The `clocks` guest reads its clocks and random numbers between two state writes.
/// Crashed after each of its effects and run again under the same key, every
/// execution must see what the first saw: the re-execution returns the values the
/// crashed one stored, under every exactly-once protocol. Over an unsafe table nothing
/// is logged, so there a re-execution reads the clocks anew: the check can fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_executions_read_the_clocks_and_random_numbers_the_first_read() {
    let h = Harness::start(StoreKind::Rocksdb).await;
    let limits = h.node.runtime.config.limits;
    h.node.runtime.deploy("clocks", guest("clocks"), limits, tables()).await.expect("deploying clocks");
    let mut randoms = std::collections::BTreeSet::new();
    for (book, table) in [(201, "r"), (202, "w"), (203, "s"), (204, "u")] {
        let mut same = true;
        for k in 1u64.. {
            let key = format!("clocks-{table}-{k}");
            let input = format!("run {table}");
            let before = h.read_fn("clocks", book, table, "first").await;
            let first = h.invoke_fn("clocks", book, &input, &key, Some(k)).await;
            // What the crashed run stored, if it got that far: the re-execution must
            // read the same.
            let crashed = h.read_fn("clocks", book, table, "first").await;
            let again = h.invoke_fn("clocks", book, &input, &key, None).await.expect("re-execution");
            if crashed != before {
                same &= crashed == field(&again, "first");
            }
            let stored = [h.read_fn("clocks", book, table, "first").await, h.read_fn("clocks", book, table, "second").await];
            same &= stored == [field(&again, "first"), field(&again, "second")];
            let wall_ns: u128 = stored[0].split(':').next().and_then(|w| w.parse().ok()).expect("a wall clock reading");
            let now_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            assert!(now_ns.abs_diff(wall_ns) < 600_000_000_000, "{table}: the wall clock read {wall_ns}, now is {now_ns}");
            randoms.insert(stored[0].split(':').nth(1).expect("a random number").to_string());
            match first {
                Ok(out) => {
                    same &= out == again;
                    // Read-optimized: the Init and the result, which holds both writes
                    // (their markers are stored only by the first run of this node).
                    let min = if table == "r" { 2 } else { 3 };
                    assert!(k >= min || table == "u", "{table}: only {k} effects");
                    break;
                }
                Err(RuntimeError::InjectedCrash) => {}
                Err(e) => panic!("{table}: crash after {k}: {e}"),
            }
        }
        if table == "u" {
            assert!(!same, "unsafe re-executions read the same clocks: the check cannot fail");
        } else {
            assert!(same, "{table}: a re-execution read other clocks or random numbers than the execution it continued");
        }
    }
    assert!(randoms.len() > 8, "invocations drew the same random numbers: {randoms:?}");
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_and_conditional_appends_take_effect_once_across_crashes() {
    // `log TABLE` appends `a`, reads the stream, cond-appends `b` at its end, appends
    // `c`, storing seqnums between (effects to crash after). Crashed after each effect
    // and run again under its key, each invocation, on a book of its own, must leave
    // exactly a, b, c in its stream and return the seqnums the crashed run stored.
    let h = Harness::start(StoreKind::Rocksdb).await;
    let limits = h.node.runtime.config.limits;
    h.node.runtime.deploy("clocks", guest("clocks"), limits, tables()).await.expect("deploying clocks");
    for table in ["w", "r"] {
        for k in 1u64.. {
            let book = if table == "w" { 400 + k } else { 500 + k };
            let key = format!("log-{table}-{k}");
            let input = format!("log {table}");
            let first = h.invoke_fn("clocks", book, &input, &key, Some(k)).await;
            let crashed = [h.read_fn("clocks", book, table, "a").await, h.read_fn("clocks", book, table, "b").await];
            let again = h.invoke_fn("clocks", book, &input, &key, None).await.expect("re-execution");
            for (name, stored) in ["a", "b"].iter().zip(&crashed) {
                if stored != "none" {
                    assert_eq!(*stored, field(&again, name), "{table}, crash after {k}: {name} changed");
                }
            }
            assert_ne!(field(&again, "b"), "conflict", "{table}, crash after {k}: b lost to its own a: {again}");
            assert_eq!(field(&again, "n"), "1", "{table}, crash after {k}: {again}");
            let events = h.node.runtime.invoke("clocks", BookId(book), Bytes::from_static(b"events")).await.expect("events");
            assert_eq!(String::from_utf8(events).unwrap(), "a,b,c", "{table}, crash after {k}");
            match first {
                Ok(out) => {
                    assert_eq!(out, again, "{table}: a retry after the answer runs nothing again");
                    assert!(k >= 5, "{table}: only {k} effects");
                    break;
                }
                Err(RuntimeError::InjectedCrash) => {}
                Err(e) => panic!("{table}: crash after {k}: {e}"),
            }
        }
    }
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_sleep_outlasts_the_time_limit_and_wakes_once_across_crashes() {
    // `nap 1200` sleeps past the 500 ms time limit, then appends to `naps`. Crashed
    // after each effect and asked again under its key, every invocation (on a book of
    // its own) answers 202 while it sleeps, wakes no earlier than its logged wake time,
    // and leaves exactly one record.
    let h = Harness::start(StoreKind::Rocksdb).await;
    let mut limits = h.node.runtime.config.limits;
    limits.timeout_ms = 500;
    h.node.runtime.deploy("clocks", guest("clocks"), limits, tables()).await.expect("deploying clocks");
    let mut suspended = 0;
    for k in 1u64.. {
        let book = 600 + k;
        let key = format!("nap-{k}");
        let first = h.invoke_fn("clocks", book, "nap 1200", &key, Some(k)).await;
        let wake = loop {
            match h.invoke_fn("clocks", book, "nap 1200", &key, None).await {
                Err(RuntimeError::Suspended { id, wake_ms }) => {
                    suspended += 1;
                    let status = h.node.runtime.invocation(&mut Context::new(), BookId(book), &id).await.expect("a status");
                    assert!(
                        matches!(status, InvocationStatus::Sleeping { wake_ms: w } if w == wake_ms)
                            || matches!(status, InvocationStatus::Finished(_)),
                        "crash after {k}: {status:?}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(out) => break out,
                Err(e) => panic!("crash after {k}: {e}"),
            }
        };
        let woke: u64 = field(&wake, "woke").parse().expect("a wall clock reading");
        assert!(wake.ends_with("naps=0"), "crash after {k}: {wake}");
        let naps = h.node.runtime.invoke("clocks", BookId(book), Bytes::from_static(b"naps")).await.expect("naps");
        assert_eq!(String::from_utf8(naps).unwrap(), "1", "crash after {k}: the nap was appended once");
        match first {
            Err(RuntimeError::InjectedCrash) => {}
            Err(RuntimeError::Suspended { wake_ms, .. }) => {
                assert!(woke >= wake_ms, "woke at {woke}, before the wake time {wake_ms}");
                break;
            }
            other => panic!("crash after {k}: {other:?}"),
        }
    }
    assert!(suspended > 0);
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_invocation_starts_after_its_delay_once() {
    // `doze 0` answers the wall-clock time it ran at. Delayed by 1.5 s (past the
    // in-place limit), a synchronous invocation is answered 202 and runs at its start
    // time; a retry of its key after a crash keeps the start time the first logged, even
    // asking for none; so does a background one.
    let h = Harness::start(StoreKind::Rocksdb).await;
    let limits = h.node.runtime.config.limits;
    h.node.runtime.deploy("clocks", guest("clocks"), limits, tables()).await.expect("deploying clocks");
    let now_ms = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let invoke = |key: &'static str, delay_ms: u64, crash_after: Option<u64>| {
        let opts = InvokeOptions { idempotency_key: Some(key.to_string()), retry_key: None, crash_after, delay_ms, key: None };
        h.node.runtime.invoke_with("clocks", BookId(700), Bytes::from_static(b"doze 0"), opts)
    };
    let ran_at = |out: Vec<u8>| -> u64 { field(&String::from_utf8(out).unwrap(), "woke").parse().unwrap() };
    let rt = h.node.runtime.clone();
    let finished = |id: String| {
        let rt = rt.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                match rt.invocation(&mut Context::new(), BookId(700), &id).await.expect("a status") {
                    InvocationStatus::Finished(r) => return r.expect("a result").to_vec(),
                    status => assert!(Instant::now() < deadline, "{status:?}"),
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    // Crashed after its Init and Delay records, then retried without a delay.
    let asked = now_ms();
    assert!(matches!(invoke("delayed", 1_500, Some(2)).await, Err(RuntimeError::InjectedCrash)));
    let (id, wake) = match invoke("delayed", 0, None).await {
        Err(RuntimeError::Suspended { id, wake_ms }) => (id, wake_ms),
        other => panic!("{other:?}"),
    };
    assert!(wake >= asked + 1_500, "the retry's start time {wake} is not the first request's");
    assert!(matches!(
        h.node.runtime.invocation(&mut Context::new(), BookId(700), &id).await,
        Ok(InvocationStatus::Sleeping { .. })
    ));
    let ran = ran_at(finished(id).await);
    assert!(ran >= wake, "ran at {ran}, before its start time {wake}");
    // In the background.
    let asked = now_ms();
    let id = h
        .node
        .runtime
        .invoke_async(&mut Context::new(), "clocks".into(), BookId(700), Bytes::from_static(b"doze 0"), None, 1_200, None)
        .await
        .unwrap();
    let ran = ran_at(finished(id).await);
    assert!(ran >= asked + 1_200, "ran at {ran}, {} ms after it was asked", ran - asked);
    // A delay past the limit is refused.
    assert!(matches!(invoke("too-late", SLEEP_MAX_MS + 1, None).await, Err(RuntimeError::InvalidArgument(_))));
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_language_sleeps_durably() {
    // `nap 6000` sleeps past the steps functions' 5 s time limit: in every language the
    // invocation suspends (Suspended, status sleeping) and answers after its wake time.
    let h = Harness::start(StoreKind::Rocksdb).await;
    let functions = h.steps_in_every_language().await;
    let mut asleep = Vec::new();
    for (i, function) in functions.iter().enumerate() {
        let book = BookId(800 + i as u64);
        match h.invoke_fn(function, book.0, "script nap 6000; id", &format!("nap-{function}"), None).await {
            Err(RuntimeError::Suspended { id, wake_ms }) => asleep.push((function, book, id, wake_ms)),
            other => panic!("{function}: {other:?}"),
        }
    }
    for (function, book, id, wake_ms) in asleep {
        let deadline = Instant::now() + Duration::from_secs(30);
        let output = loop {
            match h.node.runtime.invocation(&mut Context::new(), book, &id).await.expect("a status") {
                InvocationStatus::Finished(r) => break r.unwrap_or_else(|e| panic!("{function}: {e}")),
                status => assert!(Instant::now() < deadline, "{function}: {status:?}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        assert!(now >= wake_ms, "{function} answered before its wake time");
        assert_eq!(String::from_utf8_lossy(&output), format!("ok,{id}"), "{function}");
    }
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_journey_survives_a_crash_at_every_step_under_each_protocol() {
    // `journey T 600` reads the clock and a random number, stores them, appends the
    // reading, sleeps past the 500 ms time limit (suspending), creates a promise and
    // awaits it for 50 ms. Crashed after each effect and asked again under its key (on
    // a book of its own each time), every invocation answers what it stored and
    // appended, once, with the same output every time it is asked.
    let h = Harness::start(StoreKind::Rocksdb).await;
    let mut limits = h.node.runtime.config.limits;
    limits.timeout_ms = 500;
    h.node.runtime.deploy("clocks", guest("clocks"), limits, tables()).await.expect("deploying clocks");
    let rt = h.node.runtime.clone();
    for (base, table) in [(700, "r"), (720, "w"), (740, "s")] {
        let mut crashes = 0;
        for k in 1u64.. {
            let (book, key, input) = (base + k, format!("journey-{table}-{k}"), format!("journey {table} 600"));
            let first = h.invoke_fn("clocks", book, &input, &key, Some(k)).await;
            let out = loop {
                match h.invoke_fn("clocks", book, &input, &key, None).await {
                    Ok(out) => break out,
                    // Asleep; or its time limit ran out after a wait in place: ask again.
                    Err(RuntimeError::Suspended { .. } | RuntimeError::Timeout(_)) => {
                        tokio::time::sleep(Duration::from_millis(100)).await
                    }
                    Err(e) => panic!("{table}: crash after {k}: {e}"),
                }
            };
            let stored = field(&out, "first");
            assert!(out.ends_with(" await=timeout"), "{table}: crash after {k}: {out}");
            assert_eq!(h.read_fn("clocks", book, table, "first").await, stored, "{table}: crash after {k}");
            let mut ctx = tally_logsvc::Context::new();
            let tag = tally_logsvc::Tag::from_name("journey");
            let r = rt.log().read_next(&mut ctx, BookId(book), tag, tally_logsvc::SeqNum(0)).await.unwrap().expect("the record");
            assert_eq!(String::from_utf8_lossy(&r.data), stored, "{table}: crash after {k}");
            let next = tally_logsvc::SeqNum(r.seqnum.0 + 1);
            assert!(rt.log().read_next(&mut ctx, BookId(book), tag, next).await.unwrap().is_none(), "{table}: appended twice");
            assert_eq!(h.invoke_fn("clocks", book, &input, &key, None).await.expect("the logged answer"), out);
            match first {
                Err(RuntimeError::InjectedCrash) => crashes += 1,
                Err(RuntimeError::Suspended { .. }) | Ok(_) => break,
                // The time limit ran out before effect k (a loaded machine): no crash
                // here, and what was asked again above checked out; on to the next.
                Err(RuntimeError::Timeout(_)) => assert!(k < 64, "{table}: every attempt timed out"),
                Err(e) => panic!("{table}: crash after {k}: {e}"),
            }
        }
        assert!(crashes >= 3, "{table}: only {crashes} crash points");
    }
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_invocation_is_retried_as_its_function_says() {
    // `flaky N` traps until its N-th attempt. Each function has its own policy: how
    // many attempts, and a backoff that doubles up to a cap (waited in place when short,
    // suspended when long).
    let h = Harness::start(StoreKind::Rocksdb).await;
    let rt = h.node.runtime.clone();
    let deploy = |name: &'static str, attempts: u32, backoff_ms: u64, backoff_max_ms: u64| {
        let rt = rt.clone();
        async move {
            let mut limits = rt.config.limits;
            (limits.retry_attempts, limits.retry_backoff_ms, limits.retry_backoff_max_ms) =
                (attempts, backoff_ms, backoff_max_ms);
            rt.deploy(name, guest("clocks"), limits, tables()).await.expect("deploying");
        }
    };
    deploy("flaky", 4, 200, 300).await;
    deploy("once", 1, 0, 0).await;
    deploy("patient", 2, 1_500, 1_500).await;
    // Waits of 200 and 300 ms (400 capped) before attempts 2 and 3.
    let started = Instant::now();
    let out = h.invoke_fn("flaky", 860, "flaky 3", "third", None).await.expect("the third attempt succeeds");
    assert!(out.starts_with("attempt=3 "), "{out}");
    assert!(started.elapsed() >= Duration::from_millis(500), "{:?}", started.elapsed());
    // Past its attempts, the trap is the outcome (after waits of 200, 300, 300 ms).
    let started = Instant::now();
    let r = h.invoke_fn("flaky", 860, "flaky 9", "never", None).await;
    assert!(matches!(&r, Err(RuntimeError::Trap(m)) if m.contains("flaky attempt 4 of 9")), "{r:?}");
    assert!(started.elapsed() >= Duration::from_millis(800), "{:?}", started.elapsed());
    let r = h.invoke_fn("once", 860, "flaky 2", "once", None).await;
    assert!(matches!(&r, Err(RuntimeError::Trap(m)) if m.contains("flaky attempt 1 of 2")), "{r:?}");
    // A wait past the in-place limit suspends the invocation until its retry.
    let r = h.invoke_fn("patient", 860, "flaky 2", "patient", None).await;
    let Err(RuntimeError::Suspended { id, wake_ms }) = r else { panic!("{r:?}") };
    assert!(matches!(rt.invocation(&mut Context::new(), BookId(860), &id).await, Ok(InvocationStatus::Sleeping { .. })));
    let out = String::from_utf8(outcome(&rt, 860, &id).await.expect("the retry succeeds").to_vec()).unwrap();
    let at: u64 = out.strip_prefix("attempt=2 at=").and_then(|t| t.parse().ok()).unwrap_or_else(|| panic!("{out}"));
    assert!(at >= wake_ms, "retried at {at}, before its wake time {wake_ms}");
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_a_tree_mid_flight_and_a_finished_invocation_refuses_it() {
    let h = Harness::start(StoreKind::Rocksdb).await;
    let rt = h.node.runtime.clone();
    let finished = |book: u64, id: String| {
        let rt = rt.clone();
        async move { outcome(&rt, book, &id).await }
    };
    let start = |book: u64, input: &str, key: &str| {
        let rt = rt.clone();
        let (input, key) = (Bytes::from(input.to_string()), key.to_string());
        async move {
            rt.invoke_async(&mut Context::new(), "steps".into(), BookId(book), input, Some(key), 0, None).await.expect("started")
        }
    };
    // A tree asleep: the root called a child that sleeps durably past the time limit.
    // Cancelled, the child wakes to a `cancelled` error, the root gets it from its call
    // and again from its next step; what ran before stays done, nothing after runs.
    let id = start(841, "script inc t before; call steps script nap 60000; inc t after", "tree").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !matches!(
        rt.invocation(&mut Context::new(), BookId(841), &id).await.expect("a status"),
        InvocationStatus::Sleeping { .. }
    ) {
        assert!(Instant::now() < deadline, "the tree never slept");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rt.invocations().cancel(&mut Context::new(), BookId(841), &id).await.expect("cancelling");
    rt.invocations().cancel(&mut Context::new(), BookId(841), &id).await.expect("cancelling twice is cancelling once");
    let r = finished(841, id.clone()).await;
    assert!(matches!(r, Err(RuntimeError::Cancelled)), "{r:?}");
    assert_eq!(h.invoke_fn("steps", 841, "script get t before; get t after", "look", None).await.unwrap(), "1,none");
    // Once it ended cancelled, cancelling again is still cancelling once (a client's
    // retried DELETE); a finished invocation that ran to its end refuses a
    // cancellation; an unknown one is not found.
    rt.invocations().cancel(&mut Context::new(), BookId(841), &id).await.expect("cancelling a cancelled invocation");
    let done = start(842, "script inc t x", "done").await;
    assert!(finished(842, done.clone()).await.is_ok());
    let again = rt.invocations().cancel(&mut Context::new(), BookId(842), &done).await;
    assert!(matches!(&again, Err(RuntimeError::Conflict(m)) if m.contains("succeeded")), "{again:?}");
    let unknown = rt.invocations().cancel(&mut Context::new(), BookId(842), &"0".repeat(32)).await;
    assert!(matches!(unknown, Err(RuntimeError::InvocationNotFound(_))), "{unknown:?}");
    // Running (not asleep): it sees the cancellation at its next step.
    let id = start(843, "script inc t x; sleep 400; inc t y", "running").await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    rt.invocations().cancel(&mut Context::new(), BookId(843), &id).await.expect("cancelling");
    let r = finished(843, id).await;
    assert!(matches!(r, Err(RuntimeError::Cancelled)), "{r:?}");
    assert_eq!(h.invoke_fn("steps", 843, "script get t x; get t y", "look", None).await.unwrap(), "1,none");
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_language_awaits_promises_created_elsewhere() {
    // In every language: one invocation creates a promise, another awaits it with no
    // timeout (it suspends, as a waiter of the promise) and is woken by the completion
    // (not by the recovery scan's rare look); a short await times out; an unknown or
    // malformed ID is refused.
    let h = Harness::start(StoreKind::Rocksdb).await;
    let functions = h.steps_in_every_language().await;
    let rt = h.node.runtime.clone();
    for (i, function) in functions.iter().enumerate() {
        let book = 820 + i as u64;
        let run = |input: String, key: String| {
            let h = &h;
            let function = function.clone();
            async move { h.invoke_fn(&function, book, &input, &key, None).await }
        };
        let promise = run("script promise".into(), format!("make-{function}")).await.expect("a promise");
        let id = match run(format!("script await {promise}"), format!("wait-{function}")).await {
            Err(RuntimeError::Suspended { id, .. }) => id,
            other => panic!("{function}: {other:?}"),
        };
        rt.invocations()
            .complete_promise(&mut Context::new(), BookId(book), &promise, Bytes::from(format!("v-{function}")))
            .await
            .expect("completing");
        // Not woken by the completion, it would still sleep when `outcome` gives up.
        let output = outcome(&rt, book, &id).await.unwrap_or_else(|e| panic!("{function}: {e}"));
        assert_eq!(String::from_utf8_lossy(&output), format!("v-{function}"), "{function}");
        let out = run("script promise; await $1 50".into(), format!("short-{function}")).await.expect("an answer");
        assert!(out.ends_with(",error:timeout"), "{function}: {out}");
        let zeros = "0".repeat(32);
        let out = run(format!("script await {zeros}; await nope"), format!("unknown-{function}")).await.expect("an answer");
        assert_eq!(out, "error:not_found,error:invalid_argument", "{function}");
    }
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promises_complete_once_before_during_and_after_the_wait() {
    // `approve WAIT TIMEOUT` creates a promise, appends its ID under `promises`, sleeps
    // WAIT, then awaits the promise (for at most TIMEOUT, 0: no timeout).
    let h = Harness::start(StoreKind::Rocksdb).await;
    let mut limits = h.node.runtime.config.limits;
    limits.timeout_ms = 1_000;
    h.node.runtime.deploy("clocks", guest("clocks"), limits, tables()).await.expect("deploying clocks");
    let rt = h.node.runtime.clone();
    let promise_of = |book: u64| {
        let rt = rt.clone();
        async move {
            let mut ctx = tally_logsvc::Context::new();
            let tag = tally_logsvc::Tag::from_name("promises");
            let r = rt.log().read_next(&mut ctx, BookId(book), tag, tally_logsvc::SeqNum(0)).await.unwrap();
            String::from_utf8(r.expect("the promise's ID").data.to_vec()).unwrap()
        }
    };
    let finished = |book: u64, id: String| {
        let rt = rt.clone();
        async move { String::from_utf8(outcome(&rt, book, &id).await.expect("a result").to_vec()).unwrap() }
    };
    let suspended = |r: Result<String, RuntimeError>| match r {
        Err(RuntimeError::Suspended { id, .. }) => id,
        other => panic!("{other:?}"),
    };
    // Completed during the wait (no timeout): the invocation wakes with the value; a
    // second completion is refused.
    let id = suspended(h.invoke_fn("clocks", 901, "approve 0 0", "during", None).await);
    let promise = promise_of(901).await;
    rt.invocations()
        .complete_promise(&mut Context::new(), BookId(901), &promise, Bytes::from_static(b"yes"))
        .await
        .expect("completing");
    assert_eq!(finished(901, id).await, "approved:yes");
    let again = rt.invocations().complete_promise(&mut Context::new(), BookId(901), &promise, Bytes::from_static(b"no")).await;
    assert!(matches!(again, Err(RuntimeError::Conflict(_))), "{again:?}");
    // Completed before the await (while the invocation sleeps first).
    let id = suspended(h.invoke_fn("clocks", 902, "approve 2000 0", "before", None).await);
    rt.invocations()
        .complete_promise(&mut Context::new(), BookId(902), &promise_of(902).await, Bytes::from_static(b"early"))
        .await
        .expect("completing");
    assert_eq!(finished(902, id).await, "approved:early");
    // Never completed: the await times out; a completion after that is accepted and
    // changes nothing, and the key answers with the logged outcome.
    let id = suspended(h.invoke_fn("clocks", 903, "approve 0 1500", "late", None).await);
    assert_eq!(finished(903, id).await, "timeout");
    rt.invocations()
        .complete_promise(&mut Context::new(), BookId(903), &promise_of(903).await, Bytes::from_static(b"late"))
        .await
        .expect("completing");
    assert_eq!(h.invoke_fn("clocks", 903, "approve 0 1500", "late", None).await.expect("the logged answer"), "timeout");
    // Promises that no invocation of the book created.
    for (book, id) in [(901, "0".repeat(32)), (902, promise.clone()), (901, "not-a-promise".to_string())] {
        let r = rt.invocations().complete_promise(&mut Context::new(), BookId(book), &id, Bytes::new()).await;
        assert!(matches!(r, Err(RuntimeError::PromiseNotFound(_))), "{book} {id}: {r:?}");
    }
    h.node.shutdown().await;
}

/// Inputs of `STEPS.md` that every SDK call is in, run in order on one fresh book.
const SCRIPTS: &[&str] = &[
    "script tag orders; tag counter; tag ünïcödé; tag 日本語; tag a,b; tag *",
    // The log: tagged appends and reads both ways, tails, a won and a lost conditional
    // append, aux data, a trim of one stream, untagged and numbered tags, refusals.
    "script append a,b one; append a two; next a 0; prev a max; tail b; tags a 0; tags a $2; \
     cond c 0 x; cond c 0 y; cond c 1 y; aux $1 snap; next a $1; next b 0; trim a $2; next a 0; \
     prev a $1; next zz 0; tail zz; append - untagged; tail *; rawappend 5 five; tags * $21; \
     rawappend 9223372036854775808 x; cond * 0 z; trim0 0; next a max; prev a 0",
    // State through the integer helpers and a child call.
    "script get t k; put t k v; get t k; inc t n; inc t n; del t n; get t n; child t c; child t c; get t c",
    "script call nosuch x; sleep 1; get t never",
    // A state op the platform refuses fails the whole script.
    "script put t k v; get Bad! k",
    "run r",
    "run r",
    "child s",
    "read r a",
    "read r nothing",
    // Objects (a transaction that commits, a read-only one, an abort, a refused write
    // and a malformed path), a queue and a lock, and the key (none here).
    "script oget u .; oset u /name \"ada\"; oinc u /posts 2; opush u /tags \"x\"; oget u .; begin; oget u /posts; \
     oinc u /posts 1; oget u /posts; commit; beginro; oget u /posts; oset u /a 1; commit; begin; oset u /gone 1; abort; \
     oget u /gone; orm u /tags; oget u .; oinc u /name 1; oget u bad; qpush q one; qpush q two; qpop q 0; qpop q 0; \
     qpop q 0; qpush q three; qpush q four; qpush q five; qpopn q 2 0; qpopn q 5 0; qpopn q 5 0; qpopn q 0 0; \
     qpopn q 4294967296 0; lock L 0; lock L 0; unlock L; unlock L; key",
];

/// An output with every seqnum replaced by `#1`, `#2`, ... in the order they first
/// appear: seqnums depend on where a book's records land in the log, not on the guest.
/// Seqnums are the numbers of 2^32 or more; tags are too, so the named tags the scripts
/// use are left alone.
fn normalized(output: &str) -> String {
    let tags: Vec<String> = ["a", "b", "c", "orders", "counter", "ünïcödé", "日本語", "a,b", "zz"]
        .into_iter()
        .map(|name| tally_logsvc::Tag::from_name(name).0.to_string())
        .collect();
    let mut seen: Vec<String> = Vec::new();
    let mut out = String::new();
    let mut digits = String::new();
    let mut flush = |digits: &mut String, out: &mut String| {
        let big = digits.parse::<u128>().is_ok_and(|n| n >= 1 << 32);
        if big && !tags.contains(digits) {
            let i = seen.iter().position(|s| s == digits).unwrap_or_else(|| {
                seen.push(digits.clone());
                seen.len() - 1
            });
            out.push_str(&format!("#{}", i + 1));
        } else {
            out.push_str(digits);
        }
        digits.clear();
    };
    for c in output.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_language_answers_as_the_rust_guest_does() {
    let h = Harness::start(StoreKind::Rocksdb).await;
    let rt = &h.node.runtime;
    let answer = |function: String, book: u64, input: String| async move {
        match rt.invoke(&function, BookId(book), Bytes::from(input)).await {
            Ok(out) => normalized(&String::from_utf8_lossy(&out)),
            Err(e) => format!("error {}", e.code()),
        }
    };
    // What the Rust guest answers is the reference; a few answers are checked outright
    // so that a reference gone wrong cannot pass.
    let mut reference = Vec::new();
    for script in SCRIPTS {
        reference.push(answer("steps".into(), 1000, script.to_string()).await);
    }
    let orders = tally_logsvc::Tag::from_name("orders").0;
    assert!(reference[0].starts_with(&format!("{orders},")), "{}", reference[0]);
    assert!(reference[0].ends_with(",0"), "{}", reference[0]);
    assert!(reference[1].starts_with("#1,#2,#1:one:none,#2:two:none,#1:one:none,"), "{}", reference[1]);
    assert!(reference[1].contains(",#3,error:conflict:#3,#4,ok,#1:one:snap,"), "{}", reference[1]);
    assert!(reference[1].ends_with(",error:invalid_argument,error:invalid_argument,ok,none,none"), "{}", reference[1]);
    assert_eq!(reference[2], "none,ok,v,1,2,ok,none,1,2,2");
    assert_eq!(reference[3], "error:not_found,ok,none");
    assert_eq!(reference[4], "error function_error");
    assert_eq!(reference[5..10], ["a=1 b=1 c=1", "a=2 b=2 c=2", "1", "2", "none"]);
    assert_eq!(
        reference[10],
        "none,ok,ok,ok,{\"name\":\"ada\",\"posts\":2,\"tags\":[\"x\"]},ok,2,ok,3,committed,ok,3,error:invalid_argument,\
         committed,ok,ok,ok,none,ok,{\"name\":\"ada\",\"posts\":3},error:invalid_argument,error:invalid_argument,ok,ok,one,\
         two,none,ok,ok,ok,three+four,five,none,error:invalid_argument,error:invalid_argument,true,true,ok,\
         error:invalid_argument,none"
    );

    for (l, lang) in LANGUAGES.into_iter().enumerate() {
        let function = h.deploy_steps(lang).await;
        let book = 2000 + l as u64;
        for (script, want) in SCRIPTS.iter().zip(&reference) {
            let got = answer(function.clone(), book, script.to_string()).await;
            assert_eq!(&got, want, "{lang}: {script}");
        }
        // What differs by function and book, and values near the size limit.
        assert_eq!(answer(function.clone(), book, "script ctx".into()).await, format!("{function}/{book}/1"));
        let id = answer(function.clone(), book, "script id".into()).await;
        assert!(!id.is_empty() && !id.starts_with("error"), "{lang}: id {id:?}");
        let big = "x".repeat(500 << 10);
        let got = answer(function.clone(), book, format!("script put t big {big}; get t big")).await;
        assert!(got == format!("ok,{big}"), "{lang}: a 500 KiB value came back as {} bytes", got.len());
    }
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_language_reports_guest_errors_and_crashes_with_their_statuses() {
    let h = Harness::start(StoreKind::Rocksdb).await;
    let url = h.node.url();
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let post = |function: &str, input: &str| {
        let mut response =
            agent.post(format!("{url}/v1/functions/{function}/invoke?book=7")).send(input.as_bytes()).expect("an answer");
        let status = response.status().as_u16();
        let body: serde_json::Value =
            serde_json::from_str(&response.body_mut().read_to_string().expect("a body")).expect("a JSON error");
        (status, body["error"]["code"].as_str().unwrap_or_default().to_string(), body["error"]["message"].to_string())
    };
    let mut functions = vec!["steps".to_string()];
    for lang in LANGUAGES {
        functions.push(h.deploy_steps(lang).await);
    }
    for function in &functions {
        let (status, code, message) = post(function, "script fail the dog ate it");
        assert_eq!((status, code.as_str()), (500, "function_error"), "{function}: {message}");
        assert!(message.contains("the dog ate it"), "{function}: {message}");
        let (status, code, message) = post(function, "no such command");
        assert_eq!((status, code.as_str()), (500, "function_error"), "{function}: {message}");
        let (status, code, message) = post(function, "script crash");
        assert_eq!((status, code.as_str()), (500, "trap"), "{function}: {message}");
        // The node serves on after each.
        assert_eq!(h.invoke_fn(function, 8, "read r a", &format!("after-{function}"), None).await.unwrap(), "none");
    }
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_across_languages_is_exactly_once_under_crashes() {
    // Python calls Go, which calls Rust, on one book: each link appends its name to the
    // stream `chain` once (a conditional append) and counts itself in table `chain`.
    let h = Harness::start(StoreKind::Rocksdb).await;
    for lang in ["python", "go"] {
        h.deploy_steps(lang).await;
    }
    let input = "script chain chain steps-go steps";
    // Each link sees what the links before it appended, and after its call, what the
    // links after it did.
    let all = "steps-python+steps-go+steps";
    let want = format!("steps-python:- > steps-go:steps-python > steps:steps-python+steps-go < {all} < {all}");
    for k in 1u64.. {
        let book = 3000 + k;
        let key = format!("chain-{k}");
        let finished = match h.invoke_fn("steps-python", book, input, &key, Some(k)).await {
            Ok(_) => true,
            Err(RuntimeError::InjectedCrash) => false,
            Err(e) => panic!("crash after {k}: {e}"),
        };
        let again = h.invoke_fn("steps-python", book, input, &key, None).await.expect("re-execution");
        assert_eq!(again, want, "crash after {k}");
        for function in ["steps-python", "steps-go", "steps"] {
            assert_eq!(h.read_fn("steps", book, "chain", function).await, "1", "crash after {k}: {function} counted");
        }
        if finished {
            assert!(k >= 6, "only {k} crash points");
            break;
        }
    }
    h.node.shutdown().await;
}

/// A dev node shut down while something still holds its runtime (an embedder, a bench's
/// in-process instances) ends its background loops: they no longer scan a log that is
/// gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shut_down_node_ends_its_background_loops_though_still_referenced() {
    let h = Harness::start(StoreKind::Rocksdb).await;
    assert_eq!(h.invoke(1, "run r", "loops", None).await.expect("an invocation"), "a=1 b=1 c=1");
    let runtime = h.node.runtime.clone();
    let durable = runtime.durable().clone();
    // The core names the node above it weakly (`Invoker`, for child calls): one reference
    // that is no loop.
    let loops = |durable: &Arc<tally_durable::Durable>| Arc::weak_count(durable) - 1;
    assert!(loops(&durable) > 0 && Arc::weak_count(&runtime) > 0, "the loops hold the node");
    h.node.shutdown().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while loops(&durable) > 0 || Arc::weak_count(&runtime) > 0 {
        assert!(
            Instant::now() < deadline,
            "background loops still run after shutdown: {} on the exactly-once core, {} on the runtime",
            loops(&durable),
            Arc::weak_count(&runtime)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
