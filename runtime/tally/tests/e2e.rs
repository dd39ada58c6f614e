//! End to end through HTTP: each test starts the real `tally dev` binary over its own
//! data directory and talks to its gateway, with the example and test components
//! built by `scripts/build-guests.sh` (found in `TALLY_GUESTS_DIR`, by default
//! `~/.cache/tally-guests`).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{guest, node, Node};

#[test]
fn deploy_list_invoke_redeploy_delete() {
    let (_dir, n) = node();
    let v = n.deploy("hello", &guest("hello"), "");
    assert_eq!(v["version"]["version"], 1, "{v}");
    assert_eq!(n.invoke_ok("hello", 0, "hi there"), "hi there");

    let (status, list) = n.json("GET", "/v1/functions", b"");
    assert_eq!(status, 200);
    assert_eq!(list["functions"][0]["name"], "hello", "{list}");

    let v = n.deploy("hello", &guest("hello"), "?timeout_ms=2000");
    assert_eq!(v["version"]["version"], 2, "{v}");
    let (status, info) = n.json("GET", "/v1/functions/hello", b"");
    assert_eq!(status, 200);
    assert_eq!(info["current"]["version"], 2, "{info}");
    assert_eq!(info["current"]["limits"]["timeout_ms"], 2000, "{info}");
    assert_eq!(info["versions"].as_array().map(Vec::len), Some(2));

    let (status, _) = n.request("DELETE", "/v1/functions/hello", b"");
    assert_eq!(status, 204);
    n.expect_error(n.invoke("hello", 0, "x"), 404, "function_not_found");
    n.expect_error(n.request("GET", "/v1/functions/hello", b""), 404, "function_not_found");

    let (status, body) = n.request("GET", "/healthz", b"");
    assert_eq!((status, body.as_slice()), (200, &b"ok\n"[..]));
}

#[test]
fn a_child_reads_what_its_parent_appended() {
    let (_dir, n) = node();
    n.deploy("chain", &guest("chain"), "");
    for i in 0..5 {
        let input = format!("message {i}");
        assert_eq!(n.invoke_ok("chain", 3, &input), format!("saw:{input}"));
    }
    // The records are in the book, under the tag name the guest used.
    let (status, page) = n.json("GET", "/v1/books/3/records?tag=chain", b"");
    assert_eq!(status, 200);
    assert_eq!(page["records"].as_array().map(Vec::len), Some(5), "{page}");
    assert_eq!(page["records"][0]["data"]["text"], "message 0", "{page}");
}

#[test]
fn concurrent_invocations_on_one_book_see_one_total_order() {
    let (_dir, n) = node();
    n.deploy("counter", &guest("counter"), "");
    let (threads, each) = (8, 10);
    let values: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    (0..each)
                        .map(|_| n.invoke_ok("counter", 9, "incr").trim().parse::<u64>().expect("a number"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("no panic")).collect()
    });
    // Each increment returns the counter as of its own record: one total order means
    // every value from 1 to N exactly once.
    let mut sorted = values.clone();
    sorted.sort_unstable();
    let expected: Vec<u64> = (1..=(threads * each) as u64).collect();
    assert_eq!(sorted, expected, "values returned: {values:?}");
    assert_eq!(n.invoke_ok("counter", 9, "get").trim(), (threads * each).to_string());
    // Another book is another counter.
    assert_eq!(n.invoke_ok("counter", 10, "get").trim(), "0");
}

#[test]
fn bad_input_gets_its_error_and_the_node_keeps_serving() {
    let (_dir, n) = node();
    n.expect_error(n.request("PUT", "/v1/functions/junk", b"definitely not wasm"), 400, "invalid_component");
    n.expect_error(n.request("PUT", "/v1/functions/cli", &guest("other-world")), 400, "wrong_world");
    n.expect_error(n.request("PUT", "/v1/functions/Bad%20Name", &guest("hello")), 400, "invalid_argument");
    n.expect_error(n.invoke("nobody", 0, "x"), 404, "function_not_found");
    n.expect_error(n.request("GET", "/v1/books/1/records?tag=0x8000000000000001", b""), 400, "invalid_argument");
    n.expect_error(n.invoke("nobody", 1 << 63, "x"), 404, "function_not_found");

    let limits = "?timeout_ms=1000&memory_bytes=33554432&request_bytes_max=4096&response_bytes_max=65536";
    n.deploy("faulty", &guest("faulty"), limits);
    n.deploy("hello", &guest("hello"), "");
    assert_eq!(n.invoke_ok("faulty", 0, "echo:x"), "x");
    n.expect_error(n.invoke("hello", 1 << 63, "x"), 400, "invalid_argument");
    let message = n.expect_error(n.invoke("faulty", 0, "trap"), 500, "trap");
    assert!(message.contains("trapped on purpose"), "the trap carries the panic message: {message}");
    let started = Instant::now();
    n.expect_error(n.invoke("faulty", 0, "spin"), 504, "timeout");
    assert!(started.elapsed() < Duration::from_secs(10), "the endless loop was stopped near its 1 s limit");
    n.expect_error(n.invoke("faulty", 0, "alloc"), 500, "memory_limit");
    n.expect_error(n.invoke("faulty", 0, &"x".repeat(8192)), 413, "too_large");
    n.expect_error(n.invoke("faulty", 0, "big:100000"), 413, "too_large");
    let guest_view = n.invoke_ok("faulty", 0, "tag-reserved");
    assert!(guest_view.contains("reserved"), "the guest got an invalid-argument error: {guest_view}");
    assert_eq!(n.invoke_ok("faulty", 0, "big:1000").len(), 1000);

    // After all of that, everything still works.
    assert_eq!(n.invoke_ok("hello", 0, "still here"), "still here");
    let (status, metrics) = n.request("GET", "/metrics", b"");
    let metrics = String::from_utf8_lossy(&metrics);
    assert_eq!(status, 200);
    assert!(metrics.contains("tally_invocations_total{function=\"faulty\",outcome=\"trap\"} 1"), "{metrics}");
}

/// An ended instance's memory is reset for the next one by restoring only the pages it
/// wrote, and only those stay resident. hello has 1 MiB of stack and writes a few pages
/// of it: a reset that restored every accessible page (wasmtime 50.0.1, whose dirty-page
/// scan counted untouched pages as written) leaves more than 1 MiB resident per idle slot.
#[test]
fn an_instance_reset_keeps_only_the_pages_it_wrote() {
    let (_dir, n) = node();
    n.deploy("hello", &guest("hello"), "");
    for i in 0..3 {
        assert_eq!(n.invoke_ok("hello", 0, &format!("hi {i}")), format!("hi {i}"));
    }
    // The last instance's slot is reset in a task that runs after its answer, so it
    // may take a moment to be idle under load.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut resident = n.metric("tally_idle_memory_resident_bytes");
    while resident == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        resident = n.metric("tally_idle_memory_resident_bytes");
    }
    assert!(resident > 0, "an idle slot keeps the pages hello wrote resident");
    assert!(resident < 256 << 10, "idle slots hold {resident} bytes resident: more than hello wrote");
}

#[test]
fn asynchronous_invocations_report_their_outcome() {
    let (_dir, n) = node();
    n.deploy("hello", &guest("hello"), "");
    let (status, v) = n.json("POST", "/v1/functions/hello/invoke?book=1&async=true", b"later");
    assert_eq!(status, 202, "{v}");
    let id = v["invocation_id"].as_str().expect("an invocation id").to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, v) = n.json("GET", &format!("/v1/invocations/{id}?book=1"), b"");
        assert_eq!(status, 200, "{v}");
        match v["status"].as_str() {
            Some("succeeded") => {
                assert_eq!(v["output"]["text"], "later", "{v}");
                break;
            }
            Some("running") if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => panic!("unexpected status {v}"),
        }
    }
    n.expect_error(n.request("GET", "/v1/invocations/nope", b""), 404, "invocation_not_found");
    // An ID names an invocation of one book only.
    n.expect_error(n.request("GET", &format!("/v1/invocations/{id}?book=2"), b""), 404, "invocation_not_found");
}

#[test]
fn a_restart_keeps_functions_and_books() {
    let (_dir, n) = node();
    n.deploy("faulty", &guest("faulty"), "");
    n.deploy("hello", &guest("hello"), "");
    let seqnum = n.invoke_ok("faulty", 4, "tag:orders:first order");
    // Compiled artifacts are on disk, so the restart loads rather than recompiles.
    let artifacts = std::fs::read_dir(n.dir.join("artifacts")).expect("an artifact cache").count();
    assert_eq!(artifacts, 2, "one artifact per component");
    let n = n.restart();
    assert_eq!(n.invoke_ok("hello", 0, "back"), "back");
    let (status, page) = n.json("GET", "/v1/books/4/records?tag=orders", b"");
    assert_eq!(status, 200);
    assert_eq!(page["records"][0]["seqnum"].to_string(), seqnum.trim(), "{page}");
    assert_eq!(page["records"][0]["data"]["text"], "first order", "{page}");
    let later = n.invoke_ok("faulty", 4, "tag:orders:second order");
    assert!(later.trim().parse::<u64>().unwrap() > seqnum.trim().parse::<u64>().unwrap());
}

/// Runs the `tally` CLI against the node; returns its stdout, or panics with stderr.
fn cli(n: &Node, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tally")).args(args).env("TALLY_URL", &n.url).output().expect("running tally");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tally {args:?} failed: {stderr}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn the_cli_deploys_invokes_lists_and_reads_books() {
    let (dir, n) = node();
    let component = dir.path().join("faulty.wasm");
    std::fs::write(&component, guest("faulty")).expect("writing the component");
    let path = component.to_str().expect("a UTF-8 path");
    let deployed = cli(&n, &["deploy", path, "--json", "--name", "faulty", "--limit", "timeout_ms=3000"]);
    assert!(deployed.contains("\"timeout_ms\":3000"), "{deployed}");
    assert_eq!(cli(&n, &["invoke", "faulty", "--data", "echo:via the cli"]).trim(), "via the cli");
    let seqnum = cli(&n, &["invoke", "faulty", "--book", "6", "--data", "tag:notes:a note"]);
    let functions = cli(&n, &["functions", "--json"]);
    assert!(functions.contains("\"name\":\"faulty\""), "{functions}");
    // For people: a header, then one aligned row per function.
    let functions = cli(&n, &["functions"]);
    let lines: Vec<&str> = functions.lines().collect();
    assert!(lines[0].starts_with("NAME    VERSION  SIZE") && lines[1].starts_with("faulty  1        "), "{functions}");
    assert!(lines[1].contains("128 MiB  3 s"), "{functions}");
    let page = cli(&n, &["book", "6", "--tag", "notes", "--json"]);
    assert!(page.contains(seqnum.trim()) && page.contains("a note"), "{page}");
    let page = cli(&n, &["book", "6", "--tag", "notes"]);
    let tag = tally_logsvc::Tag::from_name("notes").0.to_string();
    let row = page.lines().nth(1).map(|l| l.split_whitespace().collect::<Vec<_>>());
    assert!(page.starts_with("SEQNUM"), "{page}");
    assert_eq!(row, Some(vec![seqnum.trim(), &tag, "a", "note", "-"]), "{page}");

    // State: a table's protocol at deploy, an idempotent invocation, a switch.
    let bank = dir.path().join("bank.wasm");
    std::fs::write(&bank, guest("bank")).expect("writing the component");
    let bank = bank.to_str().expect("a UTF-8 path");
    let deployed = cli(&n, &["deploy", bank, "--name", "bank", "--table", "accounts=write-optimized"]);
    assert!(deployed.starts_with("deployed bank version 1 ("), "{deployed}");
    assert!(cli(&n, &["functions"]).contains("accounts=write-optimized"));
    for _ in 0..2 {
        let out = cli(&n, &["invoke", "bank", "--book", "4", "--data", "open a 5", "--idempotency-key", "open-a"]);
        assert_eq!(out.trim(), "ok");
    }
    let shown = cli(&n, &["table", "4", "accounts", "--json"]);
    assert!(shown.contains("\"protocol\":\"write-optimized\""), "{shown}");
    assert_eq!(cli(&n, &["table", "4", "accounts"]).lines().next(), Some("table accounts of book 4: write-optimized"));
    let switched = cli(&n, &["table", "4", "accounts", "--protocol", "read-optimized", "--json"]);
    assert!(switched.contains("\"to\":\"read-optimized\"") || switched.contains("\"protocol\":\"read-optimized\""), "{switched}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cli(&n, &["table", "4", "accounts"]).starts_with("table accounts of book 4: read-optimized\n") {
        assert!(Instant::now() < deadline, "the switch did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(cli(&n, &["invoke", "bank", "--book", "4", "--data", "balance a"]).trim(), "5");

    // A failing verb says why and exits non-zero.
    let out = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(["invoke", "nobody"])
        .env("TALLY_URL", &n.url)
        .output()
        .expect("running tally");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("function_not_found"));
}

#[test]
fn a_gateways_retry_key_makes_effects_once_and_a_retry_gets_their_result() {
    // What a cluster's gateway sends with an invocation it may retry on another node.
    let (_dir, n) = node();
    n.deploy("bank", &guest("bank"), "");
    let path = "/v1/functions/bank/invoke?book=3";
    for account in ["a", "b"] {
        assert_eq!(n.post_with(path, format!("open {account} 100").as_bytes(), &[]).0, 200);
    }
    let retry = [("tally-retry-key", "gw-1")];
    let first = n.post_with(path, b"transfer a b 10", &retry);
    let again = n.post_with(path, b"transfer a b 10", &retry);
    assert_eq!((first.0, &first.1[..]), (200, &b"ok 90 110"[..]));
    assert_eq!(again, first, "the retry gets the logged result and moves nothing");
    assert_eq!(n.invoke_ok("bank", 3, "balance a"), "90");
    // A function without effects just runs, under the same key or not.
    n.deploy("hello", &guest("hello"), "");
    for _ in 0..2 {
        let (status, body) = n.post_with("/v1/functions/hello/invoke?book=3", b"hi", &[("tally-retry-key", "gw-2")]);
        assert_eq!((status, &body[..]), (200, &b"hi"[..]));
    }
}
