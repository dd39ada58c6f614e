//! `tally why`: the invocation, step and attempt that wrote a value, under each protocol,
//! for a value a switch carried over, a child's write and a durable object; now and as
//! of a seqnum.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{guest, node_with, Node};
use serde_json::Value;

fn get(n: &Node, path: &str) -> Value {
    let (status, v) = n.json("GET", path, b"");
    assert_eq!(status, 200, "{path}: {v}");
    v
}

fn post(n: &Node, function: &str, key: &str, body: &str) -> String {
    let a = n.send("POST", &format!("/v1/functions/{function}/invoke?book=1"), &[("idempotency-key", key)], body.as_bytes());
    assert_eq!(a.status, 200, "{body}: {}", a.text());
    a.text()
}

/// The ID of the root invocation started with idempotency key `key`.
fn id_of(n: &Node, key: &str) -> String {
    let v = get(n, &format!("/v1/invocations?book=1&key={key}"));
    v["invocations"][0]["invocation_id"].as_str().expect("listed").to_string()
}

fn switched(n: &Node, table: &str, protocol: &str) {
    let path = format!("/v1/books/1/tables/{table}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = get(n, &path);
        if v["protocol"] == protocol && v["switching"].is_null() {
            return;
        }
        assert!(Instant::now() < deadline, "the switch did not end: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn why_names_the_writer_under_every_protocol_and_across_a_switch() {
    let (_dir, n) = node_with(&["--table", "wo=write-optimized", "--table", "sym=symmetric", "--recovery-interval-ms", "100"]);
    n.deploy("bank", &guest("bank"), "");
    n.deploy("steps", &guest("steps"), "");
    post(&n, "bank", "open", "open alice 100");
    post(&n, "bank", "move", "transfer alice bob 30");

    // Read-optimized: the transfer's put, its input and trace, and the value before.
    let v = get(&n, "/v1/books/1/tables/accounts/why?key=alice");
    assert_eq!(v["value"]["text"], "70", "{v:#}");
    assert_eq!(v["protocol"], "read-optimized");
    let w = &v["writer"];
    assert_eq!(w["invocation_id"], id_of(&n, "move").as_str());
    assert_eq!(w["function"], "bank");
    assert_eq!(w["input"]["text"], "transfer alice bob 30");
    assert_eq!(w["attempt"], 1);
    assert_eq!(w["trace_id"].as_str().map(str::len), Some(32));
    assert_eq!(v["previous"]["text"], "100");
    let steps = get(&n, &format!("/v1/invocations/{}/steps?book=1", id_of(&n, "move")));
    let put = steps["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"]["text"] == "alice" && s["kind"] != "read")
        .expect("the put")
        .clone();
    assert_eq!(w["step"], put["step"]);
    assert_eq!(v["written_at"], put["seqnum"]);
    // As of before the transfer: the open wrote 100.
    let before = put["seqnum"].as_u64().unwrap() - 1;
    let v = get(&n, &format!("/v1/books/1/tables/accounts/why?key=alice&as_of={before}"));
    assert_eq!(v["value"]["text"], "100");
    assert_eq!(v["writer"]["input"]["text"], "open alice 100");

    // Write-optimized and symmetric: the root wrote `a`, its child `c`.
    let run = post(&n, "steps", "run-wo", "run wo");
    assert_eq!(run, "a=1 b=1 c=1");
    post(&n, "steps", "run-sym", "run sym");
    let root = id_of(&n, "run-wo");
    let v = get(&n, "/v1/books/1/tables/wo/why?key=a");
    assert_eq!((v["value"]["text"].as_str(), v["protocol"].as_str()), (Some("1"), Some("write-optimized")), "{v:#}");
    assert_eq!(v["writer"]["invocation_id"], root.as_str());
    assert!(v["writer"]["step"].is_null(), "a write-optimized write is not a step: {v:#}");
    let v = get(&n, "/v1/books/1/tables/wo/why?key=c");
    let child = v["writer"]["invocation_id"].as_str().expect("the child wrote c").to_string();
    assert!(child.starts_with(&format!("{root}/")), "{v:#}");
    assert_eq!(v["writer"]["input"]["text"], "child wo");
    let v = get(&n, "/v1/books/1/tables/sym/why?key=b");
    assert_eq!(v["protocol"], "symmetric");
    assert_eq!(v["writer"]["invocation_id"], id_of(&n, "run-sym").as_str());
    assert!(v["writer"]["step"].is_u64(), "a symmetric write is a step: {v:#}");
    // A write-optimized value's past: the entry its write replaced, and its writer.
    let first = get(&n, "/v1/books/1/tables/wo/why?key=a")["written_at"].as_u64().unwrap();
    assert_eq!(post(&n, "steps", "run-wo-2", "run wo"), "a=2 b=2 c=2");
    let v = get(&n, "/v1/books/1/tables/wo/why?key=a");
    assert_eq!((v["value"]["text"].as_str(), v["previous"]["text"].as_str()), (Some("2"), Some("1")), "{v:#}");
    assert_eq!(v["writer"]["invocation_id"], id_of(&n, "run-wo-2").as_str());
    let v = get(&n, &format!("/v1/books/1/tables/wo/why?key=a&as_of={first}"));
    assert_eq!((v["value"]["text"].as_str(), v["written_at"].as_u64()), (Some("1"), Some(first)), "{v:#}");
    assert_eq!(v["writer"]["invocation_id"], root.as_str());
    let v = get(&n, &format!("/v1/books/1/tables/wo/why?key=a&as_of={}", first - 1));
    assert!(v["value"].is_null() && v["writer"].is_null(), "nothing before the first write: {v:#}");

    // A switch to read-optimized carries `b` over: its first writer is still the run.
    let (status, v) = n.json("PUT", "/v1/books/1/tables/wo", br#"{"protocol": "read-optimized"}"#);
    assert_eq!(status, 202, "{v}");
    switched(&n, "wo", "read-optimized");
    let v = get(&n, "/v1/books/1/tables/wo/why?key=b");
    assert_eq!(v["protocol"], "read-optimized", "{v:#}");
    assert_eq!(v["value"]["text"], "2");
    assert!(v["migrated_from"].is_u64(), "{v:#}");
    assert_eq!(v["writer"]["invocation_id"], id_of(&n, "run-wo-2").as_str());

    // The CLI says the same.
    let out = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(["why", "1", "accounts", "alice"])
        .env("TALLY_URL", &n.url)
        .env("TALLY_CONFIG_DIR", n.dir.join("cli"))
        .output()
        .expect("tally why");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("written by") && text.contains("transfer alice bob 30"), "{text}");
}

#[test]
fn why_names_an_objects_last_writer() {
    let (_dir, n) = node_with(&[]);
    n.deploy("steps", &guest("steps"), "");
    post(&n, "steps", "set", r#"script oset cart . {"n":1}"#);
    post(&n, "steps", "inc", "script oinc cart /n 2");
    let v = get(&n, "/v1/books/1/objects/cart/why");
    assert_eq!(v["value"]["text"], r#"{"n":3}"#, "{v:#}");
    assert_eq!(v["writer"]["invocation_id"], id_of(&n, "inc").as_str());
    assert_eq!(v["previous"]["text"], r#"{"n":1}"#);
    let first = v["written_at"].as_u64().unwrap() - 1;
    let v = get(&n, &format!("/v1/books/1/objects/cart/why?as_of={first}"));
    assert_eq!(v["writer"]["invocation_id"], id_of(&n, "set").as_str());
    assert_eq!(v["writer"]["input"]["text"], r#"script oset cart . {"n":1}"#);
    let none = get(&n, "/v1/books/1/objects/nothing/why");
    assert!(none["value"].is_null() && none["writer"].is_null());
}
