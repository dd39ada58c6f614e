//! A cluster of `tally node` processes on loopback, made and run by `tally cluster`
//! (init, up, status --json, down) over a real etcd: deploys through one function node
//! are invoked through another at once, and the bank's keyed transfers stay exact and no
//! acknowledged append on eight books is lost while a physical log is added (the
//! bank's book moves to it), processes of every role are killed with SIGKILL and the
//! whole cluster restarts.

#[path = "../common/mod.rs"]
mod common;
mod harness;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{guest, Node};
use harness::*;
use serde_json::Value;

#[test]
fn a_cluster_of_processes_serves_and_survives_kills_of_every_log_role() {
    // Partial mode (the default): index roles live in the storage and sequencer
    // processes, so the kills of storage-6 and sequencer-3 take index replicas with them;
    // later the aggregator's process, then both replicas of one shard, die.
    let shape = ["--controllers", "2", "--sequencers", "3", "--storage", "3", "--functions", "2", "--gateways", "2"];
    // The metalog is replicated: sequencers acknowledge entries they wrote and did not
    // sync, which a kill of the process keeps.
    let (c, url) = Cluster::up(&[&shape[..], &["--etcd", "3", "--aggregators", "1", "--metalog", "replicated"]].concat());
    let status = c.status();
    let names: Vec<&str> = status.iter().map(|p| p["name"].as_str().unwrap()).collect();
    let mut want = vec!["etcd-0", "etcd-1", "etcd-2", "postgres", "controller-1", "controller-2"];
    want.extend(["sequencer-3", "sequencer-4", "sequencer-5", "storage-6", "storage-7", "storage-8"]);
    want.extend(["function-9", "function-10", "gateway-11", "gateway-12"]);
    assert_eq!(names, want);
    assert!(status.iter().all(|p| p["healthy"] == true && p["pid"].is_u64()), "{status:?}");
    let http = |name: &str| status.iter().find(|p| p["name"] == name).unwrap()["url"].as_str().unwrap().to_string();
    assert_eq!(url, http("gateway-11"), "the URL printed first is the gateway's");

    // Deployed through one node, invoked through the other at once.
    let a = node_at(&http("function-9"));
    let b = node_at(&http("function-10"));
    // Clients go through either gateway, and to the other when one does not answer.
    let urls = vec![url.clone(), http("gateway-12")];
    a.deploy("bank", &guest("bank"), "?timeout_ms=5000");
    // Book 5 is in log 0 of one and in log 1 of two physical logs: it moves.
    let path = "/v1/functions/bank/invoke?book=5";
    assert_eq!(b.post_keyed(path, b"open c0x 1000", "open-c0x").map(|r| r.0), Some(200));

    // Keyed transfers from clients that retry on either node, while processes die.
    const CLIENTS: usize = 3;
    const OPENING: i64 = 1000;
    for c in 0..CLIENTS {
        for side in ["x", "y"] {
            until_ok(&urls, path, &format!("open c{c}{side} {OPENING}"), &format!("open-c{c}{side}"));
        }
    }
    let done = Arc::new(AtomicBool::new(false));
    let transfers = Arc::new(Mutex::new(0usize));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (urls, done, transfers) = (urls.clone(), done.clone(), transfers.clone());
            thread::spawn(move || {
                let (mut x, mut y) = (OPENING, OPENING);
                let mut t = 0;
                while !done.load(Ordering::Relaxed) {
                    let amount = (c * 7 + t * 13) as i64 % 50 + 1;
                    let reply = until_ok(&urls, path, &format!("transfer c{c}x c{c}y {amount}"), &format!("c{c}-t{t}"));
                    x -= amount;
                    y += amount;
                    assert_eq!(reply, format!("ok {x} {y}"), "client {c} transfer {t}");
                    t += 1;
                    *transfers.lock().unwrap() += 1;
                }
                (x, y)
            })
        })
        .collect();
    // Appends on eight books (the counter example appends one increment record per
    // `incr`), from a client that retries on either gateway.
    a.deploy("counter", &guest("counter"), "");
    let appended = Arc::new(Mutex::new([0u64; 8]));
    let appender = {
        let (urls, done, appended) = (urls.clone(), done.clone(), appended.clone());
        thread::spawn(move || {
            let mut k = 0u64;
            while !done.load(Ordering::Relaxed) {
                let book = 20 + k % 8;
                let path = format!("/v1/functions/counter/invoke?book={book}");
                until_ok(&urls, &path, "incr", &format!("incr-{k}"));
                appended.lock().unwrap()[(book - 20) as usize] += 1;
                k += 1;
            }
        })
    };
    let wait_transfers = |n: usize| {
        let start = *transfers.lock().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while *transfers.lock().unwrap() < start + n {
            assert!(Instant::now() < deadline, "no progress after a kill:\n{}", c.logs());
            thread::sleep(Duration::from_millis(20));
        }
    };
    wait_transfers(10);
    // A second physical log, added while transfers run: the bank's book moves to it
    // with its step logs and write logs. A log is never removed.
    let t0 = Instant::now();
    let (ok, out, err) = tally(&["cluster", "grow", "--logs", "2"], c.dir.path());
    assert!(ok && out.contains("2 physical logs"), "cluster grow: {out} {err}");
    wait_transfers(10);
    eprintln!("a log added: 10 more transfers after {:?}", t0.elapsed());
    let (ok, _, err) = tally(&["cluster", "grow", "--logs", "1"], c.dir.path());
    assert!(!ok && err.contains("never removed"), "{err}");
    // A storage node, the leading controller, a sequencer (the primary of log 0 in the
    // first term), a function node, an etcd member of three and a gateway, one after
    // another: after each, transfers go on.
    let leader = c.leader();
    let shards = |tier: &Value| -> Vec<Vec<u64>> {
        let ids = |r: &Value| r.as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
        tier.as_array().expect("partial mode").iter().map(ids).collect()
    };
    let tier = shards(&c.status_json()["index"]);
    assert!(tier.len() == 2 && tier.iter().all(|r| r.len() == 2), "2 shards of 2 (and 2 spares): {tier:?}");
    let t_index = Instant::now();
    for victim in ["storage-6", leader.as_str(), "sequencer-3", "function-9", "etcd-1", "gateway-11"] {
        let t0 = Instant::now();
        c.kill(victim);
        wait_transfers(10);
        eprintln!("{victim} killed: 10 more transfers after {:?}", t0.elapsed());
    }
    // The index roles of storage-6 and sequencer-3 went with them: spares replace them
    // through versions, and transfers go on.
    let lost = [c.index_id("storage-6"), c.index_id("sequencer-3")];
    let deadline = Instant::now() + Duration::from_secs(60);
    let replaced = loop {
        let now = shards(&c.status_json()["index"]);
        if now.iter().flatten().all(|n| !lost.contains(n)) {
            assert!(now.iter().all(|r| r.len() == 2), "{now:?}");
            eprintln!("spares replaced the lost index replicas {:?} after the first kill: {now:?}", t_index.elapsed());
            break now;
        }
        assert!(Instant::now() < deadline, "the lost index replicas {lost:?} were never replaced: {now:?}");
        thread::sleep(Duration::from_millis(500));
    };
    // The spares copied the state of the replica each shard kept, rather than replay;
    // when both lost replicas were one shard's (the layout follows the order processes
    // registered in), the first spare there had nothing to copy and replayed the log.
    let shard_of = |id: u64| tier.iter().position(|r| r.contains(&id));
    let one_shard = shard_of(lost[0]).is_some() && shard_of(lost[0]) == shard_of(lost[1]);
    let started = |log: &str| log.contains("copied a replica's state") || (one_shard && log.contains("replays the log"));
    let spares: Vec<String> = c
        .index_ids()
        .into_iter()
        .filter(|(_, id)| replaced.iter().flatten().any(|n| n == id) && !tier.iter().flatten().any(|n| n == id))
        .map(|(name, _)| name)
        .collect();
    // (A killed process's index role may have been a spare itself: it registered late.)
    let lost_in_tier = lost.iter().filter(|&&id| shard_of(id).is_some()).count();
    assert_eq!(spares.len(), lost_in_tier, "{spares:?} replace {lost:?} of {tier:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !spares.iter().all(|n| started(&c.log_of(n))) {
        assert!(Instant::now() < deadline, "the spares {spares:?} did not start (one shard: {one_shard}):\n{}", c.logs());
        thread::sleep(Duration::from_millis(200));
    }
    wait_transfers(10);
    // Every killed process starts again (two sequencers of three down would stop the
    // metalog). The restarted function node has an empty local index: its reads of
    // older records go through the tier, and the tier through the aggregator.
    c.start();
    let aggregator = c.aggregator_processes();
    assert_eq!(aggregator.len(), 1, "one aggregator: {aggregator:?}");
    let aggregator = &aggregator[0];
    let done_total = |text: &str| -> f64 {
        let found = text.lines().find_map(|l| l.strip_prefix("tally_aggregator_done_total{node=\""));
        found.and_then(|l| l.split_once("} ")).expect("the aggregator's series").1.parse().unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while done_total(&c.metrics_of(aggregator)) == 0.0 {
        assert!(Instant::now() < deadline, "no lookup went through the aggregator:\n{}", c.metrics_of(aggregator));
        thread::sleep(Duration::from_millis(200));
    }
    // The aggregator's process dies: a version drops it in the same term, and the
    // engines aggregate their own lookups.
    c.kill(aggregator);
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.status_json()["aggregators"].as_array().is_some_and(|a| !a.is_empty()) {
        assert!(Instant::now() < deadline, "the dead aggregator stays listed:\n{}", c.logs());
        thread::sleep(Duration::from_millis(200));
    }
    wait_transfers(10);
    c.start();
    // Both replicas of one index shard die together (one with at most one sequencer
    // among them): tier reads wait or fail until spares, with no replica to copy,
    // replay the log; transfers go on and stay exact.
    let now = shards(&c.status_json()["index"]);
    let processes = c.index_ids();
    let host = |id: u64| processes.iter().find(|(_, n)| *n == id).expect("an index role's process").0.clone();
    let shard = now
        .iter()
        .find(|r| r.iter().filter(|&&id| host(id).starts_with("sequencer-")).count() <= 1)
        .expect("a shard with at most one sequencer")
        .clone();
    let t_shard = Instant::now();
    for &id in &shard {
        c.kill(&host(id));
    }
    wait_transfers(10);
    let deadline = Instant::now() + Duration::from_secs(90);
    while shards(&c.status_json()["index"]).iter().flatten().any(|n| shard.contains(n)) {
        assert!(Instant::now() < deadline, "the shard {shard:?} was never replaced:\n{}", c.logs());
        thread::sleep(Duration::from_millis(500));
    }
    wait_transfers(10);
    eprintln!("both replicas {shard:?} of a shard killed: replaced, 20 more transfers after {:?}", t_shard.elapsed());
    done.store(true, Ordering::Relaxed);
    let ledgers: Vec<(i64, i64)> = clients.into_iter().map(|c| c.join().expect("a client")).collect();
    appender.join().expect("the appender");
    let appended = *appended.lock().unwrap();
    assert!(appended.iter().sum::<u64>() > 20, "appends acknowledged: {appended:?}");
    check_appends(&urls, &appended, "before");
    let gw = node_at(&urls[1]);
    for (i, (x, y)) in ledgers.iter().enumerate() {
        assert_eq!(b.invoke_ok("bank", 5, &format!("balance c{i}x")), x.to_string());
        assert_eq!(gw.invoke_ok("bank", 5, &format!("balance c{i}y")), y.to_string());
    }

    // Every sequencer wrote entries unsynced: the journal's boot marker says so.
    for n in ["sequencer-3", "sequencer-4", "sequencer-5"] {
        let dir = c.dir.path().join("nodes").join(n);
        let marked = walk(&dir).into_iter().any(|p| p.file_name().is_some_and(|f| f == "UNSYNCED"));
        assert!(marked, "{n} wrote no metalog entry unsynced under {}", dir.display());
    }

    // The whole cluster stopped and started again: every function and value is there.
    c.down();
    assert!(c.status().iter().all(|p| p["pid"].is_null()), "down stops every process");
    c.start();
    for (i, (x, _)) in ledgers.iter().enumerate() {
        let reply = until_ok(&urls, path, &format!("balance c{i}x"), &format!("after-restart-{i}"));
        assert_eq!(reply, x.to_string());
    }
    check_appends(&urls, &appended, "after-restart");
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        match path.is_dir() {
            true => files.extend(walk(&path)),
            false => files.push(path),
        }
    }
    files
}

/// Every acknowledged increment is in its book's log: each counter is at least the
/// number acknowledged (a retried raw append may be there twice: raw appends are
/// at-least-once).
fn check_appends(urls: &[String], appended: &[u64; 8], when: &str) {
    for (i, &acked) in appended.iter().enumerate() {
        let path = format!("/v1/functions/counter/invoke?book={}", 20 + i);
        let value: u64 = until_ok(urls, &path, "get", &format!("get-{i}-{when}")).parse().unwrap();
        assert!(value >= acked, "book {}: counter {value}, {acked} increments acknowledged", 20 + i);
    }
}

/// POSTs an invocation with an optional `Tally-Position`; returns status, body and the
/// position the response carries.
fn invoke_at(url: &str, path: &str, body: &str, position: Option<&str>) -> (u16, String, String) {
    let mut request = Node::agent().post(format!("{url}{path}"));
    if let Some(p) = position {
        request = request.header("tally-position", p);
    }
    let mut response = request.send(body.as_bytes()).expect("the node answers");
    let status = response.status().as_u16();
    let reached = response.headers().get("tally-position").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (status, response.body_mut().read_to_string().unwrap_or_default(), reached)
}

#[test]
fn positions_give_read_your_writes_and_monotonic_reads_through_a_lagging_node() {
    let dir = init(&["--controllers", "1", "--sequencers", "1", "--storage", "1", "--functions", "2", "--gateways", "0"]);
    // function-5 learns of every metalog entry 1.5 s late.
    let lagging = dir.path().join("nodes/function-5/node.toml");
    let text = std::fs::read_to_string(&lagging).unwrap();
    std::fs::write(&lagging, text.replace("[function]\n", "[function]\nmetalog_delay_ms = 1500\n")).unwrap();
    let c = Cluster { dir };
    c.start();
    let status = c.status();
    let http = |name: &str| status.iter().find(|p| p["name"] == name).unwrap()["url"].as_str().unwrap().to_string();
    let (fresh, slow) = (http("function-4"), http("function-5"));
    let deploy = |name: &str, guest_name: &str| {
        let mut r = Node::agent().put(format!("{fresh}/v1/functions/{name}")).send(&guest(guest_name)[..]).unwrap();
        assert_eq!(r.status().as_u16(), 201, "{}", r.body_mut().read_to_string().unwrap());
        r.headers().get("tally-position").expect("a deploy carries its position").to_str().unwrap().to_string()
    };
    let path = "/v1/functions/f/invoke?book=5";

    // Deployed through one node and invoked at once through the lagging one: without
    // the deploy's position the lagging node does not know the function yet; with it,
    // it reads the registry that far first.
    let position = deploy("f", "hello");
    let deployed = Instant::now();
    let (without, _, _) = invoke_at(&slow, path, "x", None);
    let (status, hello, reached) = invoke_at(&slow, path, "x", Some(&position));
    assert_eq!(status, 200, "{hello}");
    if deployed.elapsed() < Duration::from_millis(1200) {
        assert_eq!(without, 404, "the lagging node knew the function without being told where to look");
    }
    // Monotonic reads: back on the up-to-date node with the position the lagging one
    // returned, and a redeploy seen by the client is the version it runs anywhere.
    assert_eq!(invoke_at(&fresh, path, "x", Some(&reached)).0, 200);
    let position = deploy("f", "bank");
    let (status, opened, _) = invoke_at(&slow, path, "open a 1", Some(&position));
    assert_eq!((status, opened.as_str()), (200, "ok"), "the redeployed version runs, not {hello:?}'s");
    let (status, v, _) = invoke_at(&fresh, path, "balance a", Some(&position));
    assert_eq!((status, v.as_str()), (200, "1"));

    // A malformed position is refused, and changes nothing.
    for bad in ["x", "1.2.3", "70000.1", "1.-4", &"1.1,".repeat(300)] {
        let (status, body, _) = invoke_at(&fresh, path, "balance a", Some(bad));
        assert_eq!(status, 400, "{bad:?}: {body}");
        assert!(body.contains("tally-position"), "{body}");
    }

    // A function node of another cluster (another CA), pointed at this cluster's etcd
    // under this cluster's name: etcd refuses its certificate, as the log's nodes
    // would, so it never registers or gets a configuration, and the cluster serves on.
    let other = init(&["--controllers", "1", "--sequencers", "1", "--storage", "1", "--functions", "1", "--gateways", "0"]);
    let ours = std::fs::read_to_string(c.dir.path().join("nodes/function-4/node.toml")).unwrap();
    let line = |text: &str, key: &str| text.lines().find(|l| l.starts_with(key)).unwrap().to_string();
    let theirs_path = other.path().join("nodes/function-4/node.toml");
    let mut theirs = std::fs::read_to_string(&theirs_path).unwrap();
    for key in ["etcd = ", "controllers = ", "postgres = "] {
        theirs = theirs.replace(&line(&theirs, key), &line(&ours, key));
    }
    theirs = theirs.replace("[function]\nid = 4\n", "[function]\nid = 40\n");
    std::fs::write(&theirs_path, &theirs).unwrap();
    let mut rogue = Command::new(TALLY)
        .args(["node", "--config"])
        .arg(&theirs_path)
        .env("RUST_LOG", "warn,tally::node=info,tally_control=debug")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        assert_eq!(invoke_at(&fresh, path, "balance a", Some(&position)).0, 200, "the cluster serves on");
        thread::sleep(Duration::from_millis(200));
    }
    let _ = rogue.kill();
    let out = rogue.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!log.contains("waiting for the cluster's first configuration"), "the node of another CA reached etcd:\n{log}");
    assert!(!log.contains("node started"), "the node of another CA joined:\n{log}");

    // etcd itself: a client of another CA, or without a certificate, is refused; the
    // cluster's own is served.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let endpoints: Vec<String> =
        toml_endpoints(c.dir.path()).as_array().unwrap().iter().map(|e| e.as_str().unwrap().to_string()).collect();
    let name = "local";
    let theirs = tally::cluster::etcd_tls(&other.path().join("nodes/function-4/certs")).unwrap();
    let ours = tally::cluster::etcd_tls(&c.dir.path().join("nodes/function-4/certs")).unwrap();
    let connect = |tls: Option<&tally_control::EtcdTls>, endpoints: &[String]| {
        rt.block_on(tally_control::ControlPlane::connect_with(endpoints, name, tls)).map(|_| ())
    };
    assert!(connect(Some(&ours), &endpoints).is_ok(), "the cluster's own certificate is served");
    assert!(connect(Some(&theirs), &endpoints).is_err(), "etcd refuses a certificate of another CA");
    let plain: Vec<String> = endpoints.iter().map(|e| e.replace("https://", "http://")).collect();
    assert!(connect(None, &plain).is_err(), "etcd refuses a client without TLS");
}

/// The etcd endpoints of the node files in a cluster directory.
fn toml_endpoints(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("nodes/function-4/node.toml")).unwrap();
    let etcd = text.lines().find(|l| l.starts_with("etcd = ")).unwrap().trim_start_matches("etcd = ");
    serde_json::from_str(etcd).unwrap()
}

/// POSTs once with a key; the status, or `None` when the node did not answer in time.
fn post_once(url: &str, path: &str, body: &str, key: &str, timeout: Duration) -> Option<u16> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .middleware(common::authorize)
        .tls_config(common::tls())
        .build()
        .into();
    agent.post(format!("{url}{path}")).header("idempotency-key", key).send(body.as_bytes()).ok().map(|r| r.status().as_u16())
}

#[test]
fn a_partitioned_minority_stops_writing_and_loses_nothing_on_heal() {
    let shape = ["--controllers", "1", "--sequencers", "3", "--storage", "3", "--functions", "2", "--gateways", "0"];
    let dir = init(&shape);
    // A minority of every log role, and a function node, are cut off together while
    // this file exists: the first sequencer (the primary of log 0), a storage node and
    // function-8. etcd stays reachable to them, as across a partition of the QUIC
    // network only.
    let cut = dir.path().join("partition");
    for node in ["sequencer-2", "storage-5", "function-8"] {
        let path = dir.path().join("nodes").join(node).join("node.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("partition_file = {:?}\n{text}", cut.display().to_string())).unwrap();
    }
    let c = Cluster { dir };
    c.start();
    let status = c.status();
    let http = |name: &str| status.iter().find(|p| p["name"] == name).unwrap()["url"].as_str().unwrap().to_string();
    let (minority, majority) = (http("function-8"), http("function-9"));
    node_at(&majority).deploy("bank", &guest("bank"), "?timeout_ms=3000");
    let path = "/v1/functions/bank/invoke?book=5";
    until_ok(std::slice::from_ref(&majority), path, "open x 1000", "open-x");
    until_ok(std::slice::from_ref(&majority), path, "open y 1000", "open-y");
    // The write stranded on the minority moves money between accounts of its own:
    // concurrent invocations on one account may lose updates (no per-key
    // serialization yet), which is not what this test is about.
    until_ok(std::slice::from_ref(&majority), path, "open s 1000", "open-s");
    until_ok(std::slice::from_ref(&majority), path, "open t 1000", "open-t");
    let (mut x, mut y) = (1000i64, 1000i64);
    let mut transfer = |urls: &[String], t: usize, amount: i64| {
        let reply = until_ok(urls, path, &format!("transfer x y {amount}"), &format!("t{t}"));
        x -= amount;
        y += amount;
        assert_eq!(reply, format!("ok {x} {y}"), "transfer {t}");
    };
    for t in 0..5 {
        transfer(&[minority.clone(), majority.clone()], t, 1);
    }

    std::fs::write(&cut, b"").unwrap();
    thread::sleep(Duration::from_millis(300)); // the nodes look every 100 ms
    let t0 = Instant::now();
    // The minority's function node cannot order anything: its writes do not succeed.
    let stranded = post_once(&minority, path, "transfer s t 100", "stranded", Duration::from_secs(8));
    assert_ne!(stranded, Some(200), "a write through the partitioned minority succeeded");
    let refused = t0.elapsed();
    // The majority reconfigures without the minority and goes on.
    let t0 = Instant::now();
    for t in 5..15 {
        transfer(std::slice::from_ref(&majority), t, 2);
    }
    eprintln!(
        "partitioned: the minority answered its write {stranded:?} after {refused:?}; the majority made 10 transfers in {:?}",
        t0.elapsed()
    );

    std::fs::remove_file(&cut).unwrap();
    thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    // Healed: the minority's node serves writes again.
    for t in 15..20 {
        transfer(std::slice::from_ref(&minority), t, 3);
    }
    eprintln!("healed: 5 transfers through the former minority after {:?}", t0.elapsed());
    // The stranded write, sent again under its key, runs at most once: whatever it did
    // meanwhile (its records may have been ordered after the heal) is what it answers.
    let reply = until_ok(&[minority.clone(), majority.clone()], path, "transfer s t 100", "stranded");
    assert_eq!(reply, "ok 900 1100", "the stranded transfer ran once");
    // Nothing acknowledged was lost, on either side.
    for url in [&minority, &majority] {
        for (account, balance) in [("x", x), ("y", y), ("s", 900), ("t", 1100)] {
            let got = until_ok(std::slice::from_ref(url), path, &format!("balance {account}"), &format!("b{account}{url}"));
            assert_eq!(got, balance.to_string(), "account {account} through {url}");
        }
    }
}

/// Review finding 2: the gateway reserved 128 MiB of its 1 GiB body budget for every
/// request without a Content-Length and held it, with no read timeout, until the node
/// answered: eight idle connections stopped the gateway (and a declared length took its
/// share up front as well). A body now takes its share as its bytes come, and a client
/// that sends nothing is cut off (408).
#[test]
fn idle_uploads_do_not_stop_the_gateway() {
    use std::io::{Read, Write};
    // In the clear: the test speaks HTTP/1.1 over raw sockets.
    let (c, url) = Cluster::up(&[
        "--controllers",
        "1",
        "--sequencers",
        "1",
        "--storage",
        "1",
        "--functions",
        "1",
        "--gateways",
        "1",
        "--plain-http",
    ]);
    let addr = url.trim_start_matches("http://").to_string();
    // Half without a length, half declaring 100 MiB they never send: together more
    // than the whole budget, had each taken its share up front.
    let idle: Vec<std::net::TcpStream> = (0..12)
        .map(|i| {
            let mut s = std::net::TcpStream::connect(&addr).expect("connecting to the gateway");
            let length = if i % 2 == 0 { "Transfer-Encoding: chunked" } else { "Content-Length: 104857600" };
            let head = format!(
                "POST /v1/functions/x/invoke?book=1 HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {}\r\n{length}\r\n\r\n",
                c.admin_token()
            );
            s.write_all(head.as_bytes()).expect("sending the head");
            s
        })
        .collect();
    let started = Instant::now();
    let (status, v) = node_at(&url).json("GET", "/v1/functions", b"");
    assert_eq!(status, 200, "{v}\n{}", c.logs());
    assert!(started.elapsed() < Duration::from_secs(5), "the listing waited {:?}", started.elapsed());
    // The idle uploads are cut off.
    for mut s in idle.into_iter().take(1) {
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("a timeout");
        let mut answer = [0u8; 12];
        s.read_exact(&mut answer).expect("an answer to an idle upload");
        assert_eq!(&answer, b"HTTP/1.1 408", "{}", String::from_utf8_lossy(&answer));
    }
}

/// Each function node keeps the logs of what it ran; the gateway merges them, and its
/// settings' secrets are sealed with the one key every node shares.
#[test]
fn the_gateway_merges_every_function_nodes_logs_and_nodes_share_secrets() {
    let (c, url) =
        Cluster::up(&["--controllers", "1", "--sequencers", "1", "--storage", "1", "--functions", "2", "--gateways", "1"]);
    let gw = node_at(&url);
    let settings = serde_json::json!({ "TOKEN": { "value": "sealed-in-a-cluster", "secret": true } }).to_string();
    let a = gw.send("PUT", "/v1/functions/web", &[("tally-settings", &settings)], &guest("http_probe"));
    assert_eq!(a.status, 201, "{}\n{}", a.text(), c.logs());
    // Round-robin over both function nodes: each prints, and each reads the secret.
    let mut ids = Vec::new();
    for i in 0..6 {
        let key = format!("print-{i}");
        let a = gw.send("POST", "/fn/web/print/1", &[("idempotency-key", key.as_str())], b"");
        assert_eq!(a.status, 200, "{}", a.text());
        let a = gw.send("GET", "/fn/web/env/TOKEN", &[], b"");
        assert_eq!(a.text(), "sealed-in-a-cluster", "every node opens the secret");
        ids.push(key);
    }
    let (status, v) = gw.json("GET", "/v1/logs?function=web&limit=1000", b"");
    assert_eq!(status, 200, "{v}");
    let entries = v["entries"].as_array().expect("entries");
    let nodes: std::collections::BTreeSet<u64> = entries.iter().filter_map(|e| e["node"].as_u64()).collect();
    assert_eq!(nodes.len(), 2, "lines of both nodes: {v}");
    assert_eq!(entries.iter().filter(|e| e["line"] == "line 0").count(), 6, "{v}");
    let times: Vec<u64> = entries.iter().filter_map(|e| e["at_ms"].as_u64()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "in time order: {times:?}");

    // Followed through the gateway: new lines of either node as they come.
    let follow = format!("{url}/v1/logs?function=web&follow=true&limit=1");
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        use std::io::BufRead as _;
        let Ok(response) = Node::agent().get(&follow).call() else { return };
        for line in std::io::BufReader::new(response.into_body().into_reader()).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    for _ in 0..2 {
        rx.recv_timeout(Duration::from_secs(30)).expect("each node's last line");
    }
    for i in 0..4 {
        let a = gw.send("POST", "/fn/web/print/1", &[("idempotency-key", &format!("late-{i}"))], b"");
        assert_eq!(a.status, 200);
    }
    let mut seen = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < 2 && Instant::now() < deadline {
        let line = rx.recv_timeout(Duration::from_secs(30)).expect("a followed line");
        let entry: Value = serde_json::from_str(&line).expect("a JSON line");
        if entry["line"] == "line 0" {
            seen.insert(entry["node"].as_u64().expect("its node"));
        }
    }
    assert_eq!(seen.len(), 2, "new lines of both nodes");

    // Tokens: without one, every route is refused, at the gateway or at a node.
    let none: &[(&str, &str)] = &[("authorization", "")];
    for (method, path) in
        [("GET", "/v1/functions"), ("PUT", "/v1/functions/web"), ("GET", "/metrics"), ("GET", "/fn/web/env/TOKEN")]
    {
        let a = gw.send(method, path, none, b"");
        assert_eq!(a.status, 401, "{method} {path}: {}", a.text());
    }
    let status = c.status();
    let nodes: Vec<Node> = status
        .iter()
        .filter(|p| p["name"].as_str().is_some_and(|n| n.starts_with("function")))
        .filter_map(|p| p["url"].as_str())
        .map(node_at)
        .collect();
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0].send("GET", "/v1/logs", none, b"").status, 401, "a function node asks too");
    // The dashboard through the gateway: its login sets the cookie, which the gateway
    // hands the nodes as the token; a page of another site gets neither.
    // A connection per request: the gateway may close one after refusing a request
    // whose body it did not read, and a pooled POST on it would fail (not what this
    // test is about).
    let browser: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .tls_config(common::tls())
        .max_idle_connections(0)
        .build()
        .into();
    let origin = url.trim_end_matches('/');
    let page = [("origin", origin), ("sec-fetch-site", "same-origin")];
    let send = |method: &str, path: &str, headers: &[(&str, &str)], body: &str| {
        let mut request = ureq::http::Request::builder().method(method).uri(format!("{url}{path}"));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut response = browser.run(request.body(body.as_bytes().to_vec()).unwrap()).expect("an answer");
        let cookies: Vec<String> =
            response.headers().get_all("set-cookie").iter().map(|v| v.to_str().unwrap().to_string()).collect();
        (response.status().as_u16(), cookies, response.body_mut().read_to_string().unwrap_or_default())
    };
    let login = serde_json::json!({ "token": c.admin_token() }).to_string();
    let foreign = [("origin", "http://evil.example"), ("sec-fetch-site", "cross-site")];
    assert_eq!(send("POST", "/ui/login", &foreign, &login).0, 403, "another site logs nobody in");
    let (status, cookies, text) = send("POST", "/ui/login", &page, &login);
    assert_eq!(status, 204, "{text}");
    let cookie = cookies.first().and_then(|c| c.split(';').next()).expect("the cookie").to_string();
    let with_cookie = |headers: &[(&'static str, &'static str)]| {
        send("GET", "/v1/functions", &[headers, &[("cookie", cookie.as_str())]].concat(), "")
    };
    let (status, _, text) = with_cookie(&[("sec-fetch-site", "same-origin")]);
    assert_eq!(status, 200, "the cookie is the token: {text}");
    assert!(text.contains("\"web\""), "{text}");
    assert_eq!(with_cookie(&[("sec-fetch-site", "cross-site")]).0, 403, "not for another site's page");
    assert_eq!(send("GET", "/v1/functions", &page, "").0, 401, "no cookie, no token");
    // A token made through one node works on the other; revoked through one, it is
    // refused by the other as soon as its index has the record.
    let a = gw.send("POST", "/v1/tokens", &[], br#"{"role": "read", "books": [3]}"#);
    assert_eq!(a.status, 201, "{}", a.text());
    let made: Value = serde_json::from_slice(&a.body).unwrap();
    let bearer = format!("Bearer {}", made["token"].as_str().unwrap());
    // With the grant's position, each node knows the token at once (without it, as soon
    // as its index has the record: the loop below shows that for a revocation).
    let made_at = a.header("tally-position")[0].to_string();
    let reader: &[(&str, &str)] = &[("authorization", bearer.as_str()), ("tally-position", made_at.as_str())];
    for n in &nodes {
        assert_eq!(n.send("GET", "/v1/books/3/records", reader, b"").status, 200);
        assert_eq!(n.send("GET", "/v1/books/4/records", reader, b"").status, 403, "book 3's token on book 4");
        assert_eq!(n.send("PUT", "/v1/functions/web", reader, b"").status, 403, "a read token deploys nothing");
    }
    let id = made["grant"]["id"].as_str().unwrap();
    let revoke = nodes[0].send("DELETE", &format!("/v1/tokens/{id}"), &[], b"");
    assert_eq!(revoke.status, 200);
    // With the revocation's position, the other node refuses the token at once.
    let at = revoke.header("tally-position")[0].to_string();
    let with_position: &[(&str, &str)] = &[("authorization", bearer.as_str()), ("tally-position", at.as_str())];
    assert_eq!(nodes[1].send("GET", "/v1/books/3/records", with_position, b"").status, 401, "refused at once");
    // Without it, as soon as its index has the record.
    let (made, bearer) = {
        let a = gw.send("POST", "/v1/tokens", &[], br#"{"role": "read"}"#);
        let made: Value = serde_json::from_slice(&a.body).unwrap();
        let bearer = format!("Bearer {}", made["token"].as_str().unwrap());
        (made, bearer)
    };
    let reader: &[(&str, &str)] = &[("authorization", bearer.as_str())];
    assert_eq!(nodes[1].send("GET", "/v1/books/3/records", reader, b"").status, 200);
    let id = made["grant"]["id"].as_str().unwrap();
    assert_eq!(nodes[0].send("DELETE", &format!("/v1/tokens/{id}"), &[], b"").status, 200);
    let revoked = Instant::now();
    let mut answers = Vec::new();
    loop {
        let status = nodes[1].send("GET", "/v1/books/3/records", reader, b"").status;
        answers.push(status);
        if status == 401 || revoked.elapsed() > Duration::from_secs(2) {
            break;
        }
    }
    eprintln!("the other node refused the revoked token after {:?}: {answers:?}", revoked.elapsed());
    assert_eq!(answers.last(), Some(&401), "{answers:?}");
    assert!(answers.len() <= 2, "refused at once, not eventually: {answers:?}");
}

/// Function nodes join a running partial-mode cluster under load and leave it (the
/// spec's item 8): `tally cluster add` starts them, the configuration's term stays, its
/// version grows, each new node answers at once, and transfers stay exact when they die.
#[test]
fn function_nodes_join_and_leave_a_running_cluster_without_a_new_term() {
    let shape = ["--controllers", "1", "--sequencers", "2", "--storage", "2", "--functions", "1", "--gateways", "1"];
    // One aggregator (none by default): the joined nodes' tier reads go through it. A
    // local index of 256 KiB in every function node, the joined ones included.
    let (c, url) = Cluster::up(&[&shape[..], &["--aggregators", "1", "--local-index-bytes", "262144"]].concat());
    let status = c.status();
    let http = |name: &str| status.iter().find(|p| p["name"] == name).unwrap()["url"].as_str().unwrap().to_string();
    let first = status.iter().find(|p| p["name"].as_str().unwrap().starts_with("function-")).unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    node_at(&http(&first)).deploy("bank", &guest("bank"), "?timeout_ms=5000");
    let urls = vec![url.clone()];
    let path = "/v1/functions/bank/invoke?book=5";
    for side in ["x", "y"] {
        until_ok(&urls, path, &format!("open c0{side} 1000"), &format!("open-c0{side}"));
    }
    let done = Arc::new(AtomicBool::new(false));
    let transfers = Arc::new(Mutex::new(0usize));
    let client = {
        let (urls, done, transfers) = (urls.clone(), done.clone(), transfers.clone());
        thread::spawn(move || {
            let (mut x, mut y, mut t) = (1000i64, 1000i64, 0);
            while !done.load(Ordering::Relaxed) {
                let amount = (t * 13) as i64 % 50 + 1;
                let reply = until_ok(&urls, path, &format!("transfer c0x c0y {amount}"), &format!("c0-t{t}"));
                (x, y) = (x - amount, y + amount);
                assert_eq!(reply, format!("ok {x} {y}"), "transfer {t}");
                t += 1;
                *transfers.lock().unwrap() += 1;
            }
            (x, y)
        })
    };
    let wait_transfers = |n: usize| {
        let start = *transfers.lock().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while *transfers.lock().unwrap() < start + n {
            assert!(Instant::now() < deadline, "no progress:\n{}", c.logs());
            thread::sleep(Duration::from_millis(20));
        }
    };
    wait_transfers(10);
    // Three function nodes join under load (partial mode, the default): a version of
    // the running term, no seal, no replay; they serve at once. Then they die.
    let stamp = |c: &Cluster| {
        let v = c.status_json();
        (v["term"].as_u64().expect("a term"), v["version"].as_u64().expect("a version"))
    };
    let (term, version) = stamp(&c);
    let t0 = Instant::now();
    let (ok, out, err) = tally(&["cluster", "add", "--functions", "3", "--wait-s", "90"], c.dir.path());
    assert!(ok, "cluster add: {out} {err}");
    let added: Vec<String> = out.trim().rsplit_once("added ").expect("the names").1.split(", ").map(String::from).collect();
    assert_eq!(added.len(), 3, "{out}");
    let (term_after, version_after) = stamp(&c);
    assert_eq!(term_after, term, "joins make no new term");
    assert!(version_after > version, "joins make a version: {version} then {version_after}");
    let status = c.status();
    let http = |name: &str| status.iter().find(|p| p["name"] == name).unwrap()["url"].as_str().unwrap().to_string();
    let local = tally_runtime::config::LocalIndexConfig::with_bytes(256 << 10);
    for name in added.iter().chain([&first]) {
        let node = tally::node::NodeConfig::load(&c.dir.path().join("nodes").join(name).join("node.toml")).unwrap();
        assert_eq!(node.function.and_then(|f| f.local_index), Some(local), "{name}'s [function.local_index]");
    }
    for name in &added {
        let balance = node_at(&http(name)).invoke_ok("bank", 5, "balance c0x");
        assert!(balance.parse::<i64>().is_ok(), "{name} read {balance}");
    }
    eprintln!("three function nodes joined and served after {:?}", t0.elapsed());
    wait_transfers(10);
    for name in &added {
        c.kill(name);
    }
    wait_transfers(10);
    assert_eq!(stamp(&c).0, term, "leaves make no new term");
    done.store(true, Ordering::Relaxed);
    let (x, y) = client.join().expect("the client");
    let gw = node_at(&url);
    assert_eq!(gw.invoke_ok("bank", 5, "balance c0x"), x.to_string());
    assert_eq!(gw.invoke_ok("bank", 5, "balance c0y"), y.to_string());
    // Every index node's counters and sizes, on its process's metrics address: the
    // tier (2 x 2) holds the transfers' records and answered the joined nodes' reads.
    let aggregators = c.status_json()["aggregators"].as_array().map_or(0, Vec::len);
    assert_eq!(aggregators, 1, "the cluster lists its aggregator");
    let scraped = c.index_metrics();
    assert_eq!(scraped.len(), 4, "an index role in each storage and sequencer process");
    let value = |text: &str, series: &str, id: u64| -> f64 {
        let line = format!("{series}{{node=\"{id}\"}} ");
        let found = text.lines().find_map(|l| l.strip_prefix(line.as_str()));
        found.unwrap_or_else(|| panic!("no {line} in\n{text}")).parse().unwrap()
    };
    let mut requests = 0.0;
    for (id, text) in &scraped {
        assert!(value(text, "tally_index_node_shard", *id) >= 0.0, "node {id} replicates a shard:\n{text}");
        assert!(value(text, "tally_index_node_stream_table_bytes", *id) > 0.0, "node {id}:\n{text}");
        assert!(value(text, "tally_index_node_postings_bytes", *id) > 0.0, "node {id}:\n{text}");
        requests += value(text, "tally_index_node_requests_total", *id);
    }
    assert!(requests > 0.0, "the joined nodes read through the tier: {scraped:?}");
}
