//! What a user reads of invocations: the listing with its filters, times and breakdown,
//! and an invocation's steps with their decoded values, under each protocol, with a
//! child; through the HTTP API and the CLI.

mod common;

use std::process::Command;

use common::{guest, node_with, Node};
use serde_json::Value;

fn get(n: &Node, path: &str) -> Value {
    let (status, v) = n.json("GET", path, b"");
    assert_eq!(status, 200, "{path}: {v}");
    v
}

fn post(n: &Node, path: &str, key: &str, body: &str) -> String {
    let a = n.send("POST", path, &[("idempotency-key", key)], body.as_bytes());
    assert_eq!(a.status, 200, "{path}: {}", a.text());
    a.text()
}

#[test]
fn invocations_list_by_function_key_status_and_duration_and_show_their_steps() {
    let (_dir, n) = node_with(&["--table", "wo=write-optimized", "--table", "sym=symmetric"]);
    n.deploy("bank", &guest("bank"), "");
    n.deploy("chain", &guest("chain"), "");
    n.deploy("probe", &guest("probe"), "");
    post(&n, "/v1/functions/bank/invoke?book=3", "open-a", "open alice 100");
    post(&n, "/v1/functions/bank/invoke?book=3", "open-b", "open bob 5");
    assert_eq!(post(&n, "/v1/functions/bank/invoke?book=3", "t1", "transfer alice bob 30"), "ok 70 35");
    assert_eq!(post(&n, "/v1/functions/chain/invoke?book=3", "c1", "hello"), "saw:hello");
    assert_eq!(post(&n, "/v1/functions/probe/invoke?book=3", "slow", "spin 60"), "spun");
    let failed = n.send("POST", "/v1/functions/bank/invoke?book=3", &[("idempotency-key", "bad")], b"transfer a a 1");
    assert_eq!(failed.status, 500, "{}", failed.text());

    let all = get(&n, "/v1/invocations?book=3");
    let listed = all["invocations"].as_array().expect("a list");
    assert_eq!(listed.len(), 6, "{all:#}");
    for i in listed {
        assert!(i["started_at_ms"].as_u64().is_some_and(|s| s > 1_700_000_000_000), "{i}");
        assert!(i["duration_ms"].as_u64().is_some(), "{i}");
        assert_eq!(i["trace_id"].as_str().map(str::len), Some(32), "{i}");
        assert_eq!(i["version"], 1, "the version's number: {i}");
        assert!(i["version_seqnum"].as_u64().is_some_and(|s| s > 1), "{i}");
    }
    let bank = get(&n, "/v1/invocations?book=3&function=bank");
    assert_eq!(bank["invocations"].as_array().unwrap().len(), 4);
    let keyed = get(&n, "/v1/invocations?book=3&key=t1");
    let keyed = keyed["invocations"].as_array().unwrap();
    assert_eq!(keyed.len(), 1);
    assert_eq!(keyed[0]["function"], "bank");
    let failed = get(&n, "/v1/invocations?book=3&status=failed");
    assert_eq!(failed["invocations"].as_array().unwrap().len(), 1);
    let slow = get(&n, "/v1/invocations?book=3&min_ms=50");
    let slow = slow["invocations"].as_array().unwrap();
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!(slow[0]["function"], "probe");
    assert!(slow[0]["breakdown_us"]["guest"].as_u64().unwrap() >= 60_000, "{}", slow[0]);
    let fast = get(&n, "/v1/invocations?book=3&max_ms=50&function=probe");
    assert!(fast["invocations"].as_array().unwrap().is_empty());
    let page = get(&n, "/v1/invocations?book=3&limit=2");
    assert_eq!(page["invocations"].as_array().unwrap().len(), 2);
    let rest = get(&n, &format!("/v1/invocations?book=3&after={}", page["next"]));
    assert_eq!(rest["invocations"].as_array().unwrap().len(), 4);
    // The newest first, paged back: the same six, the other way round.
    let ids = |v: &Value| -> Vec<String> {
        v["invocations"].as_array().unwrap().iter().map(|i| i["invocation_id"].as_str().unwrap().to_string()).collect()
    };
    let mut newest = Vec::new();
    let mut path = "/v1/invocations?book=3&order=newest&limit=4".to_string();
    loop {
        let page = get(&n, &path);
        newest.extend(ids(&page));
        match page["next"].as_u64() {
            Some(before) => path = format!("/v1/invocations?book=3&order=newest&limit=4&before={before}"),
            None => break,
        }
    }
    let mut oldest = ids(&all);
    oldest.reverse();
    assert_eq!(newest, oldest);
    let newest_bank = get(&n, "/v1/invocations?book=3&order=newest&function=bank&limit=1");
    assert_eq!(ids(&newest_bank), ids(&get(&n, "/v1/invocations?book=3&key=bad")), "the failed transfer came last");
    for bad in ["order=newest&after=3", "before=3", "order=sideways"] {
        let a = n.send("GET", &format!("/v1/invocations?book=3&{bad}"), &[], b"");
        assert_eq!(a.status, 400, "{bad}: {}", a.text());
    }

    // The transfer's steps: its reads and writes of `accounts`, values decoded.
    let id = keyed[0]["invocation_id"].as_str().unwrap().to_string();
    let steps = get(&n, &format!("/v1/invocations/{id}/steps?book=3"));
    let list = steps["steps"].as_array().unwrap();
    let kinds: Vec<&str> = list.iter().map(|s| s["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"init"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"result"), "{kinds:?}");
    assert_eq!(list[0]["value"]["text"], "transfer alice bob 30");
    let writes: Vec<&Value> = list.iter().filter(|s| s["kind"] == "put" || s["kind"] == "write").collect();
    assert_eq!(writes.len(), 2, "{list:#?}");
    assert_eq!(writes[0]["table"], "accounts");
    assert_eq!(writes[0]["key"]["text"], "alice");
    assert_eq!(writes[0]["protocol"], "read-optimized");
    assert_eq!((writes[0]["value"]["encoding"].as_str(), writes[0]["value"]["text"].as_str()), (Some("i64"), Some("70")));
    assert_eq!(list.last().unwrap()["value"]["text"], "ok 70 35");
    assert!(list.iter().enumerate().all(|(i, s)| s["step"] == i as u64 && s["attempt"] == 1));
    assert!(steps["breakdown_us"]["guest"].as_u64().is_some(), "{steps}");
    let page = get(&n, &format!("/v1/invocations/{id}/steps?book=3&after=1&limit=1"));
    assert_eq!(page["steps"][0]["step"], 1);
    assert_eq!(page["next"], 2);

    // The chain's call names its child, whose own steps are there too.
    let chain = get(&n, "/v1/invocations?book=3&key=c1");
    let chain_id = chain["invocations"][0]["invocation_id"].as_str().unwrap().to_string();
    let steps = get(&n, &format!("/v1/invocations/{chain_id}/steps?book=3"));
    let call = steps["steps"].as_array().unwrap().iter().find(|s| s["kind"] == "call").expect("a call step").clone();
    assert_eq!(call["function"], "chain");
    assert_eq!(call["value"]["text"], "saw:hello");
    let child = call["child"].as_str().unwrap();
    assert!(child.starts_with(&format!("{chain_id}/")), "{child}");
    let child_steps = get(&n, &format!("/v1/invocations/{}/steps?book=3", child.replace('/', "%2F")));
    let child_status = get(&n, &format!("/v1/invocations/{}?book=3", child.replace('/', "%2F")));
    assert_eq!(child_status["status"], "succeeded", "{child_status}");
    assert_eq!(child_steps["steps"][0]["value"]["text"].as_str().unwrap().split(':').next(), Some("child"));

    // Unknown and malformed IDs are not found; other books do not show them.
    for (path, want) in [
        ("/v1/invocations/abcdef/steps?book=3", 404),
        ("/v1/invocations/NOT-AN-ID/steps?book=3", 404),
        (&format!("/v1/invocations/{id}/steps?book=4") as &str, 404),
        ("/v1/invocations?book=3&status=weird", 400),
        ("/v1/invocations?book=3&min_ms=x", 400),
    ] {
        let a = n.send("GET", path, &[], b"");
        assert_eq!(a.status, want, "{path}: {}", a.text());
    }

    // The CLI shows the same.
    let cli = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_tally"))
            .args(args)
            .env("TALLY_URL", &n.url)
            .env("TALLY_CONFIG_DIR", n.dir.join("cli"))
            .output()
            .expect("running tally");
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let out = cli(&["steps", &id, "--book", "3"]);
    assert!(
        out.contains("accounts") && out.contains("alice") && out.contains("read-optimized") && out.contains("ok 70 35"),
        "{out}"
    );
    let out = cli(&["invocations", "3", "--slower-than", "50ms"]);
    assert!(out.contains("probe") && !out.contains("bank"), "{out}");
}

#[test]
fn steps_show_each_protocol_of_a_table() {
    let (_dir, n) = node_with(&["--table", "accounts=write-optimized"]);
    n.deploy("bank", &guest("bank"), "");
    post(&n, "/v1/functions/bank/invoke?book=1", "o1", "open a 10");
    post(&n, "/v1/functions/bank/invoke?book=1", "o2", "open b 10");
    post(&n, "/v1/functions/bank/invoke?book=1", "t", "transfer a b 3");
    let t = get(&n, "/v1/invocations?book=1&key=t");
    let id = t["invocations"][0]["invocation_id"].as_str().unwrap().to_string();
    let steps = get(&n, &format!("/v1/invocations/{id}/steps?book=1"));
    let reads: Vec<&Value> = steps["steps"].as_array().unwrap().iter().filter(|s| s["kind"] == "read").collect();
    assert_eq!(reads.len(), 2, "write-optimized reads are logged: {steps:#}");
    assert_eq!(reads[0]["protocol"], "write-optimized");
    assert_eq!(reads[0]["value"]["text"], "10");
    assert!(steps["steps"].as_array().unwrap().iter().all(|s| s["kind"] != "put"), "its writes are not");
}
