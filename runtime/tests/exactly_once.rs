//! Exactly-once state and invocations on a real development node in this process (the
//! loopback log cluster over QUIC, RocksDB or a real PostgreSQL for state), with the
//! `steps` test guest: a crash injected after every effect of a multi-step function,
//! then a re-execution, must leave every counter incremented once, under every
//! protocol and on every store; `unsafe`, which logs nothing, must not.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tally_logsvc::BookId;
use tally_runtime::config::{Protocol, StoreKind};
use tally_runtime::dev::DevNode;
use tally_runtime::runtime::{InvocationStatus, InvokeOptions};
use tally_runtime::state::TempPostgres;
use tally_runtime::{Config, RuntimeError};

fn guest(name: &str) -> Bytes {
    let dir = std::env::var_os("TALLY_GUESTS_DIR").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/tally-guests")
    });
    let path = dir.join(format!("{name}.wasm"));
    Bytes::from(std::fs::read(&path).unwrap_or_else(|e| {
        panic!("{}: {e}; build the guests first with scripts/build-guests.sh", path.display())
    }))
}

/// The protocol of each table the `steps` function uses.
fn tables() -> BTreeMap<String, Protocol> {
    [
        ("r", Protocol::ReadOptimized),
        ("w", Protocol::WriteOptimized),
        ("s", Protocol::Symmetric),
        ("u", Protocol::Unsafe),
    ]
    .into_iter()
    .map(|(t, p)| (t.to_string(), p))
    .collect()
}

struct Harness {
    node: DevNode,
    _dir: tempfile::TempDir,
    _postgres: Option<TempPostgres>,
}

impl Harness {
    async fn start(store: StoreKind) -> Harness {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut config = Config { data_dir: dir.path().join("data"), listen: "127.0.0.1:0".into(), ..Config::default() };
        config.state.crash_injection = true;
        config.state.reexecute_after_ms = 100;
        config.state.recovery_interval_ms = 100;
        let postgres = match store {
            StoreKind::Rocksdb => None,
            StoreKind::Postgres => {
                let server = tokio::task::spawn_blocking(TempPostgres::start).await.unwrap().expect("starting postgres");
                config.state.store = StoreKind::Postgres;
                config.state.postgres = server.conninfo();
                Some(server)
            }
        };
        let node = DevNode::start(config).await.expect("starting the node");
        let mut limits = node.runtime.config.limits;
        limits.timeout_ms = 2_000;
        node.runtime.deploy("steps", guest("steps"), limits, tables()).await.expect("deploying steps");
        Harness { node, _dir: dir, _postgres: postgres }
    }

    async fn invoke(&self, book: u64, input: &str, key: &str, crash_after: Option<u64>) -> Result<String, RuntimeError> {
        let opts = InvokeOptions { idempotency_key: Some(key.to_string()), crash_after };
        let out = self.node.runtime.invoke_with("steps", BookId(book), Bytes::from(input.to_string()), opts).await?;
        Ok(String::from_utf8(out).expect("text"))
    }

    /// A key's value as the function reads it (through its table's protocol).
    async fn read(&self, book: u64, table: &str, key: &str) -> String {
        let out = self.node.runtime.invoke("steps", BookId(book), Bytes::from(format!("read {table} {key}"))).await;
        String::from_utf8(out.expect("read")).unwrap()
    }
}

/// Crashes `run <table>` after its 1st, 2nd, ... effect until one run has fewer
/// effects than the crash point, re-executing each crashed run by retrying its key.
/// Returns how many crash points there were and whether every re-execution left the
/// counters right.
async fn crash_everywhere(h: &Harness, book: u64, table: &str) -> (u64, bool) {
    let mut exact = true;
    for k in 1u64.. {
        let key = format!("{table}-{k}");
        let first = h.invoke(book, &format!("run {table}"), &key, Some(k)).await;
        let finished = match first {
            Ok(_) => true,
            Err(RuntimeError::InjectedCrash) => false,
            Err(e) => panic!("{table}: crash after {k}: {e}"),
        };
        let again = h.invoke(book, &format!("run {table}"), &key, None).await.expect("re-execution");
        let want = format!("a={k} b={k} c={k}");
        if again != want {
            exact = false;
        }
        for (counter, value) in [("a", k.to_string()), ("b", k.to_string()), ("c", k.to_string()), ("tmp", "none".into())] {
            if h.read(book, table, counter).await != value {
                exact = false;
            }
        }
        if finished {
            return (k - 1, exact);
        }
    }
    unreachable!()
}

async fn every_protocol_survives_crashes_at_every_step(store: StoreKind) {
    let h = Harness::start(store).await;
    for (book, table) in [(1, "r"), (2, "w"), (3, "s")] {
        let (points, exact) = crash_everywhere(&h, book, table).await;
        assert!(points >= 8, "{store:?}/{table}: only {points} crash points");
        assert!(exact, "{store:?}/{table}: an effect happened twice or not at all");
    }
    // The same function over an unsafe table (no logging): re-executions repeat effects,
    // which is what shows that the check above can fail.
    let (_, exact) = crash_everywhere(&h, 4, "u").await;
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
    let id = "key:steps:lost";
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match rt.invocation(BookId(1), id).await.expect("status") {
            InvocationStatus::Succeeded { output } => {
                assert_eq!(&output[..], b"a=1 b=1 c=1");
                break;
            }
            InvocationStatus::Running => {}
            InvocationStatus::Failed { message, .. } => panic!("the re-execution failed: {message}"),
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
