//! Exactly-once state and invocations on a real development node in this process (the
//! loopback log cluster over QUIC, RocksDB or a real PostgreSQL for state), with the
//! `steps` test guest: a crash injected after every effect of a multi-step function,
//! then a re-execution, must leave every counter incremented once, under every
//! protocol and on every store; `unsafe`, which logs nothing, must not.

#[path = "../common/mod.rs"]
mod common;
mod invocations;
mod libraries;
mod tables;

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
