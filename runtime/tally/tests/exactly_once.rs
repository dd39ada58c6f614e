//! Exactly-once state and invocations on a real development node in this process (the
//! loopback log cluster over QUIC, RocksDB or a real PostgreSQL for state), with the
//! `steps` test guest: a crash injected after every effect of a multi-step function,
//! then a re-execution, must leave every counter incremented once, under every
//! protocol and on every store; `unsafe`, which logs nothing, must not.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::Rng;
use tally::dev::DevNode;
use tally_durable::{InstanceId, InvocationKey, InvocationStatus, TableStatus, SLEEP_MAX_MS};
use tally_logsvc::{BookId, Context};
use tally_runtime::config::{Protocol, StoreKind};
use tally_runtime::runtime::InvokeOptions;
use tally_runtime::{Config, Runtime, RuntimeError};
use tally_state::TempPostgres;

fn guest(name: &str) -> Bytes {
    let dir = std::env::var_os("TALLY_GUESTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/tally-guests"));
    let path = dir.join(format!("{name}.wasm"));
    Bytes::from(
        std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; build the guests first with scripts/build-guests.sh", path.display())),
    )
}

/// The protocol of each table the `steps` function uses.
fn tables() -> BTreeMap<String, Protocol> {
    [("r", Protocol::ReadOptimized), ("w", Protocol::WriteOptimized), ("s", Protocol::Symmetric), ("u", Protocol::Unsafe)]
        .into_iter()
        .map(|(t, p)| (t.to_string(), p))
        .collect()
}

/// A directory of compiled components that outlives the tests: the Python and
/// JavaScript ones take seconds each to compile. Artifacts written over a week ago go
/// (a current one is then compiled again), so that components of earlier sources do not
/// pile up on a machine that keeps the directory.
fn shared_artifacts() -> PathBuf {
    let dir = PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/tally-test-artifacts");
    let week = Duration::from_secs(7 * 24 * 3600);
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let old = entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| t.elapsed().is_ok_and(|age| age > week));
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    dir
}

struct Harness {
    node: DevNode,
    _dir: tempfile::TempDir,
    _postgres: Option<TempPostgres>,
}

impl Harness {
    async fn start(store: StoreKind) -> Harness {
        Harness::start_with(store, |_| {}).await
    }

    /// A harness whose node's configuration `tweak` changes last.
    async fn start_with(store: StoreKind, tweak: impl FnOnce(&mut Config)) -> Harness {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut config = Config { data_dir: dir.path().join("data"), listen: "127.0.0.1:0".into(), ..Config::default() };
        config.state.crash_injection = true;
        config.artifacts_dir = Some(shared_artifacts());
        config.state.reexecute_after_ms = 100;
        config.state.recovery_interval_ms = 100;
        config.state.auto_interval_ms = 200;
        // The suite runs in partial mode too (`TALLY_TEST_INDEX=partial`): index nodes in
        // the process, and a local index of 64 KiB.
        if std::env::var("TALLY_TEST_INDEX").is_ok_and(|v| v == "partial") {
            config.index.mode = tally_runtime::config::IndexMode::Partial;
            config.index.local = tally_runtime::config::LocalIndexConfig::with_bytes(64 << 10);
        }
        tweak(&mut config);
        let postgres = match store {
            StoreKind::Rocksdb => None,
            StoreKind::Postgres => {
                let server = tokio::task::spawn_blocking(TempPostgres::start).await.unwrap().expect("starting postgres");
                config.state.store = StoreKind::Postgres;
                config.state.postgres = server.conninfo();
                Some(server)
            }
        };
        let partial = config.index.mode == tally_runtime::config::IndexMode::Partial;
        let node = DevNode::start(config).await.expect("starting the node");
        let tier = node.log_configuration().and_then(|c| c.tier.clone());
        assert_eq!(tier.is_some(), partial, "the log runs in the mode asked for: {tier:?}");
        let mut limits = node.runtime.config.limits;
        limits.timeout_ms = 2_000;
        node.runtime.deploy("steps", guest("steps"), limits, tables()).await.expect("deploying steps");
        Harness { node, _dir: dir, _postgres: postgres }
    }

    async fn invoke(&self, book: u64, input: &str, key: &str, crash_after: Option<u64>) -> Result<String, RuntimeError> {
        self.invoke_fn("steps", book, input, key, crash_after).await
    }

    /// Invokes `function` under an idempotency key.
    async fn invoke_fn(
        &self,
        function: &str,
        book: u64,
        input: &str,
        key: &str,
        crash_after: Option<u64>,
    ) -> Result<String, RuntimeError> {
        let opts = InvokeOptions { idempotency_key: Some(key.to_string()), retry_key: None, crash_after, delay_ms: 0, key: None };
        let out = self.node.runtime.invoke_with(function, BookId(book), Bytes::from(input.to_string()), opts).await?;
        Ok(String::from_utf8(out).expect("text"))
    }

    /// A key's value as the `steps` function reads it (through its table's protocol).
    async fn read(&self, book: u64, table: &str, key: &str) -> String {
        self.read_fn("steps", book, table, key).await
    }

    async fn read_fn(&self, function: &str, book: u64, table: &str, key: &str) -> String {
        let out = self.node.runtime.invoke(function, BookId(book), Bytes::from(format!("read {table} {key}"))).await;
        String::from_utf8(out.expect("read")).unwrap()
    }
}

/// Crashes `run <table>` after its 1st, 2nd, ... effect until one run has fewer
/// effects than the crash point, re-executing each crashed run by retrying its key.
/// Returns how many crash points there were and whether every re-execution left the
/// counters right.
async fn crash_everywhere(h: &Harness, function: &str, book: u64, table: &str) -> (u64, bool) {
    let mut exact = true;
    for k in 1u64.. {
        let key = format!("{table}-{k}");
        let first = h.invoke_fn(function, book, &format!("run {table}"), &key, Some(k)).await;
        let finished = match first {
            Ok(_) => true,
            Err(RuntimeError::InjectedCrash) => false,
            Err(e) => panic!("{function} {table}: crash after {k}: {e}"),
        };
        let again = h.invoke_fn(function, book, &format!("run {table}"), &key, None).await.expect("re-execution");
        let want = format!("a={k} b={k} c={k}");
        if again != want {
            exact = false;
        }
        for (counter, value) in [("a", k.to_string()), ("b", k.to_string()), ("c", k.to_string()), ("tmp", "none".into())] {
            if h.read_fn(function, book, table, counter).await != value {
                exact = false;
            }
        }
        if finished {
            return (k - 1, exact);
        }
    }
    unreachable!()
}

/// The fewest crash points `run <table>` must have, so that the crash tests exercise
/// what they claim to. A read-optimized table's writes go in the step log's records,
/// and store a marker version only the first time a node writes the object, so the
/// runs after the first have no store effect of their own (five crash points, all
/// appends). The others store every write.
fn crash_points_min(table: &str) -> u64 {
    match table {
        "r" => 5,
        _ => 8,
    }
}

async fn every_protocol_survives_crashes_at_every_step(store: StoreKind) {
    let h = Harness::start(store).await;
    for (book, table) in [(1, "r"), (2, "w"), (3, "s")] {
        let (points, exact) = crash_everywhere(&h, "steps", book, table).await;
        assert!(points >= crash_points_min(table), "{store:?}/{table}: only {points} crash points");
        assert!(exact, "{store:?}/{table}: an effect happened twice or not at all");
    }
    // The same function over an unsafe table (no logging): re-executions repeat effects,
    // which is what shows that the check above can fail.
    let (_, exact) = crash_everywhere(&h, "steps", 4, "u").await;
    assert!(!exact, "{store:?}: unsafe re-executions never repeated an effect");
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_at_every_step_on_rocksdb() {
    every_protocol_survives_crashes_at_every_step(StoreKind::Rocksdb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_at_every_step_on_postgres() {
    every_protocol_survives_crashes_at_every_step(StoreKind::Postgres).await;
}

/// In partial mode `/metrics` counts reads by the path that answered them and the
/// local index's bytes, within its bounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_mode_metrics_count_reads_by_path_within_the_bounds() {
    let local = tally_runtime::config::LocalIndexConfig::with_bytes(64 << 10);
    let h = Harness::start_with(StoreKind::Rocksdb, |c| {
        c.index.mode = tally_runtime::config::IndexMode::Partial;
        c.index.local = local;
    })
    .await;
    for round in 1..=3 {
        let out = h.invoke(1, "run r 5", &format!("metrics-{round}"), None).await.expect("run");
        assert_eq!(out, format!("a={round} b={round} c={round}"));
    }
    let text = h.node.runtime.index_metrics();
    let value = |line: &str| -> u64 {
        let l = text.lines().find(|l| l.starts_with(line)).unwrap_or_else(|| panic!("no {line} in\n{text}"));
        l.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value("tally_index_reads_total{path=\"tag_cache\"}") > 0, "{text}");
    assert!(value("tally_index_local_bytes{log=\"0\",structure=\"tag_cache\"}") <= local.tag_cache_bytes as u64, "{text}");
    assert!(value("tally_index_local_bytes{log=\"0\",structure=\"suffix\"}") <= local.suffix_bytes as u64, "{text}");
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_peers_share_one_history() {
    let h = Harness::start(StoreKind::Rocksdb).await;
    for (book, table) in [(1, "r"), (2, "w"), (3, "s")] {
        for round in 1..=3 {
            let key = format!("peers-{table}-{round}");
            let input = format!("run {table} 30");
            let (x, y) = tokio::join!(h.invoke(book, &input, &key, None), h.invoke(book, &input, &key, None));
            let want = format!("a={round} b={round} c={round}");
            assert_eq!(x.expect("first peer"), want, "{table}");
            assert_eq!(y.expect("second peer"), want, "{table}");
        }
    }
    h.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recovery_scan_finishes_a_crashed_invocation() {
    let h = Harness::start(StoreKind::Rocksdb).await;
    let rt = &h.node.runtime;
    // Crash in the middle (after a's increment and inside the child), then wait: the
    // scan runs it again once it is older than the timeout (2 s) plus 100 ms.
    let crashed = h.invoke(1, "run r", "lost", Some(4)).await;
    assert!(matches!(crashed, Err(RuntimeError::InjectedCrash)), "{crashed:?}");
    let id = InstanceId::keyed("steps", "lost").unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match rt.invocation(&mut Context::new(), BookId(1), &id).await.expect("status") {
            InvocationStatus::Finished(Ok(output)) => {
                assert_eq!(&output[..], b"a=1 b=1 c=1");
                break;
            }
            InvocationStatus::Running => {}
            InvocationStatus::Finished(Err(e)) => panic!("the re-execution failed: {e}"),
            InvocationStatus::Sleeping { .. } => panic!("steps never sleeps"),
        }
        assert!(Instant::now() < deadline, "the scan did not re-execute the invocation");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(h.read(1, "r", "a").await, "1");
    // A retry gets the logged result without running again.
    assert_eq!(h.invoke(1, "run r", "lost", None).await.unwrap(), "a=1 b=1 c=1");
    assert_eq!(h.read(1, "r", "a").await, "1");
    h.node.shutdown().await;
}

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

/// Deploys the `bank` example with its table `accounts` under `protocol`.
async fn deploy_bank(rt: &Arc<tally_runtime::Runtime>, protocol: Protocol) {
    let tables = [("accounts".to_string(), protocol)].into_iter().collect();
    rt.deploy("bank", guest("bank"), rt.config.limits, tables).await.expect("deploying bank");
}

async fn table_status(h: &Harness, book: u64, table: &str) -> TableStatus {
    h.node.runtime.tables().status(BookId(book), table).await.expect("status").expect("the table is in use")
}

/// Whether the keyed invocation has started (its Init record is in the log).
async fn started(rt: &tally_runtime::Runtime, book: BookId, function: &str, key: &str) -> bool {
    let id = InstanceId::keyed(function, key).unwrap().to_string();
    match rt.invocation(&mut Context::new(), book, &id).await {
        Ok(_) => true,
        Err(RuntimeError::InvocationNotFound(_)) => false,
        Err(e) => panic!("status of {key}: {e}"),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collection_keeps_storage_bounded() {
    collection_keeps_storage_bounded(Protocol::ReadOptimized).await;
}

/// Write-optimized: the single-version entries each write replaced (kept for reads as of
/// a seqnum) go once the history floor passes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collection_keeps_replaced_entries_bounded() {
    collection_keeps_storage_bounded(Protocol::WriteOptimized).await;
}

/// The entries of `key` the store answers reads at some seqnum from: its versions (a
/// read-optimized table) or its single-version entries, stored and replaced.
async fn entries(rt: &tally_runtime::Runtime, st: &str, key: &str, protocol: Protocol) -> usize {
    let store = rt.durable().store();
    let (mut entries, mut at) = (0, u64::MAX);
    loop {
        let found = match protocol {
            Protocol::ReadOptimized => store.get_at(st, key.as_bytes(), at).await.unwrap().map(|(v, _)| v),
            _ => store.get_latest_at(st, key.as_bytes(), at).await.unwrap().map(|(v, _)| v.cursor),
        };
        let Some(found) = found else { return entries };
        entries += 1;
        match found.checked_sub(1) {
            Some(prev) => at = prev,
            None => return entries,
        }
    }
}

async fn collection_keeps_storage_bounded(protocol: Protocol) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut config = Config { data_dir: dir.path().join("data"), listen: "127.0.0.1:0".into(), ..Config::default() };
    config.state.gc_interval_ms = 100;
    config.state.recovery_interval_ms = 50;
    config.state.results_kept_ms = 0;
    config.state.history_kept_ms = 0;
    let node = DevNode::start(config).await.expect("starting the node");
    let rt = node.runtime.clone();
    deploy_bank(&rt, protocol).await;
    let book = BookId(5);
    let st = format!("{:x}/accounts", book.0);
    let mut last_keys = Vec::new();
    for round in 0..3 {
        for i in 0..40 {
            let key = format!("r{round}-{i}");
            let opts =
                InvokeOptions { idempotency_key: Some(key.clone()), retry_key: None, crash_after: None, delay_ms: 0, key: None };
            rt.invoke_with("bank", book, Bytes::from(format!("open acct{} {i}", i % 4)), opts).await.unwrap();
            last_keys.push(key);
        }
        // Collection catches up within a few of its intervals.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut versions = 0;
            for a in 0..4 {
                versions += entries(&rt, &st, &format!("acct{a}"), protocol).await;
            }
            let first_key = started(&rt, book, "bank", &last_keys[0]).await;
            if versions <= 8 && !first_key {
                break;
            }
            assert!(Instant::now() < deadline, "round {round}: {versions} versions of 4 objects, first step log {first_key:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // A collected result is refused rather than run again.
        let opts = InvokeOptions {
            idempotency_key: Some(last_keys[0].clone()),
            retry_key: None,
            crash_after: None,
            delay_ms: 0,
            key: None,
        };
        let again = rt.invoke_with("bank", book, Bytes::from("open acct0 0"), opts).await;
        assert!(matches!(again, Err(RuntimeError::Conflict(_))), "{again:?}");
        // The values survive collection.
        for a in 0..4u64 {
            let out = rt.invoke("bank", book, Bytes::from(format!("balance acct{a}"))).await.unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), (36 + a).to_string());
        }
    }
    node.shutdown().await;
}

/// What the `script` ops of the `steps` guest do to a map, run once each, in order.
#[derive(Default)]
struct Model {
    values: BTreeMap<(String, String), String>,
}

impl Model {
    fn run(&mut self, ops: &[String]) -> String {
        let mut out = Vec::new();
        for op in ops {
            let w: Vec<&str> = op.split(' ').collect();
            let slot = (w[1].to_string(), w[2].to_string());
            out.push(match w[0] {
                "get" => self.values.get(&slot).cloned().unwrap_or_else(|| "none".into()),
                "put" => {
                    self.values.insert(slot, w[3].to_string());
                    "ok".into()
                }
                "del" => {
                    self.values.remove(&slot);
                    "ok".into()
                }
                "inc" | "child" => {
                    let n = self.values.get(&slot).map_or(0, |v| v.parse::<i64>().unwrap()) + 1;
                    self.values.insert(slot, n.to_string());
                    n.to_string()
                }
                other => unreachable!("{other}"),
            });
        }
        out.join(",")
    }
}

/// Random programs of gets, puts, deletes, increments and child calls over tables of
/// every protocol (and one switched back and forth meanwhile), run one after the other,
/// each plainly, crashed after a random effect and retried, or as two racing peers:
/// every output and the final state must be those of running each program once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_programs_under_crashes_peers_and_switches() {
    let h = Harness::start(StoreKind::Rocksdb).await;
    for seed in 1..=3 {
        random_programs(&h, 20 + seed, seed).await;
    }
    h.node.shutdown().await;
}

async fn random_programs(h: &Harness, book: u64, seed: u64) {
    let rt = h.node.runtime.clone();
    let tables = ["r", "w", "s", "x"];
    let mut rng = Rng(0x5eed_0000_0000_0000 ^ seed);
    let mut model = Model::default();
    for i in 0..80 {
        let ops: Vec<String> = (0..1 + rng.below(6))
            .map(|_| {
                let t = tables[rng.below(4) as usize];
                match rng.below(6) {
                    0 | 1 => format!("get {t} k{}", rng.below(4)),
                    2 => format!("put {t} k{} v{}", rng.below(4), rng.below(1000)),
                    3 => format!("del {t} k{}", rng.below(4)),
                    4 => format!("inc {t} c{}", rng.below(3)),
                    _ => format!("child {t} c{}", rng.below(3)),
                }
            })
            .collect();
        let want = model.run(&ops);
        let input = format!("script {}", ops.join(";"));
        let key = format!("fuzz-{i}");
        let got = match rng.below(4) {
            0 => h.invoke(book, &input, &key, None).await,
            1 => {
                let _ = h.invoke(book, &input, &key, Some(1 + rng.below(12))).await;
                h.invoke(book, &input, &key, None).await
            }
            _ => {
                let crash = (rng.below(2) == 0).then(|| 1 + rng.below(12));
                let (x, y) = tokio::join!(h.invoke(book, &input, &key, crash), h.invoke(book, &input, &key, None));
                if crash.is_none() {
                    assert_eq!(x.as_deref().ok(), Some(want.as_str()), "seed {seed}, peer of program {i}: {input}");
                }
                y
            }
        };
        assert_eq!(got.expect("the program"), want, "seed {seed} program {i}: {input}");
        if i % 9 == 4 {
            let to = if rng.below(2) == 0 { Protocol::WriteOptimized } else { Protocol::ReadOptimized };
            // Refused while the previous switch is still under way: fine.
            let _ = rt.tables().switch(BookId(book), "x", to).await;
        }
    }
    for table in tables {
        for key in ["k0", "k1", "k2", "k3", "c0", "c1", "c2"] {
            let want = model.values.get(&(table.to_string(), key.to_string())).map_or("none", String::as_str);
            let got = h.invoke(book, &format!("script get {table} {key}"), &format!("check-{table}-{key}"), None).await;
            assert_eq!(got.expect("a read"), want, "{table}/{key}");
        }
    }
    let switches = table_status(h, book, "x").await.history.len();
    assert!(switches > 2, "seed {seed}: the table x was never switched ({switches} transition records)");
}

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

/// The `clocks` guest reads its clocks and random numbers between two state writes.
/// The value of `name=` in a guest's space-separated output.
/// The outcome of invocation `id` of `book` once it has one (asked every 20 ms, for
/// at most 20 s).
async fn outcome(rt: &Runtime, book: u64, id: &str) -> Result<Bytes, RuntimeError> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match rt.invocation(&mut Context::new(), BookId(book), id).await.expect("a status") {
            InvocationStatus::Finished(r) => return r,
            status => assert!(Instant::now() < deadline, "{id} on book {book}: {status:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn field(out: &str, name: &str) -> String {
    let prefix = format!("{name}=");
    out.split(' ').find_map(|w| w.strip_prefix(&prefix)).unwrap_or_else(|| panic!("{name} in {out:?}")).to_string()
}

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
