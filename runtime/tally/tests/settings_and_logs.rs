//! A function's settings and secrets (set at deploy, changed without a redeploy, read
//! through the environment by tests/guests/http-probe, the same in every execution of an
//! invocation, a secret never shown) and the logs of functions (what a guest prints, per
//! invocation, followed, bounded; refusals as the platform's lines), on a real `tally dev`.

mod common;

use std::io::BufRead as _;
use std::time::Duration;

use common::{guest, node, Node};
use serde_json::{json, Value};

const SECRET: &str = "s3cr3t-6f1d9a2e-never-shown";

/// Deploys http-probe as `web` with `settings` (the `Tally-Settings` header).
fn deploy_with_settings(n: &Node, settings: &Value) {
    let a = n.send("PUT", "/v1/functions/web", &[("tally-settings", &settings.to_string())], &guest("http_probe"));
    assert_eq!(a.status, 201, "{}", a.text());
}

fn configure(n: &Node, change: Value) -> (u16, Value) {
    n.json("PATCH", "/v1/functions/web/config", change.to_string().as_bytes())
}

/// Every file under `dir`, searched for `needle`'s bytes.
fn files_holding(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if std::fs::read(&path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle)) {
            found.push(path);
        }
    }
    found
}

#[test]
fn settings_reach_the_next_invocation_and_a_secret_is_never_shown() {
    let (dir, n) = node();
    deploy_with_settings(&n, &json!({ "GREETING": { "value": "hello" }, "TOKEN": { "value": SECRET, "secret": true } }));
    assert_eq!(n.send("GET", "/fn/web/env/GREETING", &[], b"").text(), "hello");
    assert_eq!(n.send("GET", "/fn/web/env/TOKEN", &[], b"").text(), SECRET, "the function reads its secret");

    // Changed without a redeploy: the next invocation reads the change.
    let (status, listed) = configure(&n, json!({ "set": { "GREETING": { "value": "bye" } } }));
    assert_eq!(status, 200, "{listed}");
    assert_eq!(n.send("GET", "/fn/web/env/GREETING", &[], b"").text(), "bye");
    let (status, _) = configure(&n, json!({ "unset": ["GREETING"] }));
    assert_eq!(status, 200);
    assert_eq!(n.send("GET", "/fn/web/env/GREETING", &[], b"").status, 404);

    // A listing says a secret is set, never what it is.
    let (status, listed) = n.json("GET", "/v1/functions/web/config", b"");
    assert_eq!(status, 200);
    assert_eq!(listed["settings"], json!([{ "key": "TOKEN", "secret": true }]), "{listed}");

    // Bad changes are refused with a clear error and change nothing.
    let (status, v) = configure(&n, json!({ "set": { "NOT A KEY": { "value": "x" } } }));
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_argument")), "{v}");
    let (status, _) = n.json("PATCH", "/v1/functions/web/config", b"{\"set\": 7}");
    assert_eq!(status, 400);
    let (status, v) = n.json("PATCH", "/v1/functions/nobody/config", b"{}");
    assert_eq!((status, v["error"]["code"].as_str()), (404, Some("function_not_found")), "{v}");
    assert_eq!(n.send("GET", "/fn/web/env/TOKEN", &[], b"").text(), SECRET);

    // Nowhere else: not in a listing, the functions' logs, the metrics, nor in any file
    // of the node's data (sealed at rest).
    for path in ["/v1/functions/web/config", "/v1/functions/web", "/v1/logs?limit=10000", "/metrics"] {
        let (_, body) = n.request("GET", path, b"");
        assert!(!String::from_utf8_lossy(&body).contains(SECRET), "{path} shows the secret");
    }
    let holding = files_holding(dir.path(), SECRET.as_bytes());
    assert!(holding.is_empty(), "the secret is in the clear in {holding:?}");
    // Deleting the function forgets its settings: a new one of that name starts bare.
    assert_eq!(n.request("DELETE", "/v1/functions/web", b"").0, 204);
    n.deploy("web", &guest("http_probe"), "");
    assert_eq!(n.send("GET", "/fn/web/env/TOKEN", &[], b"").status, 404);
}

/// An invocation reads a setting, sleeps durably (suspended: it runs again at its wake
/// time, replaying to there), and reads it again; the setting changes while it sleeps.
/// Every execution reads what the first one read.
#[test]
fn a_reexecution_reads_the_settings_its_first_execution_read() {
    let (_dir, n) = node();
    let settings = json!({ "GREETING": { "value": "before" } }).to_string();
    let a = n.send("PUT", "/v1/functions/cfg", &[("tally-settings", &settings)], &guest("clocks"));
    assert_eq!(a.status, 201, "{}", a.text());
    let (status, v) = n.json("POST", "/v1/functions/cfg/invoke?book=0", b"setting GREETING 1500");
    assert_eq!(status, 202, "a long sleep suspends: {v}");
    let id = v["invocation_id"].as_str().expect("an ID").to_string();
    let (status, _) = n.json("PATCH", "/v1/functions/cfg/config", br#"{"set": {"GREETING": {"value": "after"}}}"#);
    assert_eq!(status, 200);
    assert_eq!(n.invoke_ok("cfg", 0, "setting GREETING 0"), "GREETING=after then after", "a new invocation reads the change");
    let done = n.finished(&id, 0);
    assert_eq!(done["output"]["text"], "GREETING=before then before", "{done}");
}

/// The logs of `web` on `n`.
fn logs(n: &Node, query: &str) -> Vec<Value> {
    let (status, v) = n.json("GET", &format!("/v1/logs?function=web{query}"), b"");
    assert_eq!(status, 200, "{v}");
    v["entries"].as_array().cloned().unwrap_or_default()
}

#[test]
fn logs_keep_what_each_invocation_printed_follow_new_lines_and_stay_bounded() {
    let (_dir, n) = node();
    n.deploy("web", &guest("http_probe"), "");
    let a = n.send("POST", "/fn/web/print/3", &[("idempotency-key", "print-3")], b"");
    assert_eq!(a.text(), "printed 3");
    let entries = logs(&n, "");
    let lines: Vec<(&str, &str)> = entries.iter().map(|e| (e["stream"].as_str().unwrap(), e["line"].as_str().unwrap())).collect();
    assert_eq!(lines, [("stdout", "line 0"), ("stdout", "line 1"), ("stdout", "line 2"), ("stderr", "done")]);
    let id = entries[0]["id"].as_str().unwrap().to_string();
    assert!(entries.iter().all(|e| e["id"] == id.as_str() && e["attempt"] == 1 && e["version"] == 1 && e["book"] == 0));
    assert!(entries[0]["at_ms"].as_u64().unwrap() > 1_700_000_000_000);
    // By invocation, by time, by position.
    n.send("POST", "/fn/web/print/1", &[], b"");
    assert_eq!(logs(&n, &format!("&id={id}")).len(), 4);
    assert_eq!(logs(&n, "&limit=2").len(), 2);
    let last = entries[3]["seq"].as_u64().unwrap();
    assert_eq!(logs(&n, &format!("&after={last}")).len(), 2, "the second invocation's lines");
    assert!(logs(&n, "&since_ms=99999999999999").is_empty());

    // Followed: new lines arrive as they are stored.
    let url = format!("{}/v1/logs?function=web&follow=true&limit=1", n.url);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let response = Node::agent().get(&url).call().expect("following");
        for line in std::io::BufReader::new(response.into_body().into_reader()).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(30)).expect("the last line stored");
    assert!(first.contains("\"done\""), "{first}");
    n.send("POST", "/fn/web/print/2", &[], b"");
    let mut followed = Vec::new();
    while followed.len() < 3 {
        let line = rx.recv_timeout(Duration::from_secs(30)).expect("a followed line");
        followed.push(serde_json::from_str::<Value>(&line).expect("a JSON line")["line"].as_str().unwrap().to_string());
    }
    assert_eq!(followed, ["line 0", "line 1", "done"]);

    // A guest that prints without end runs on; what is kept of it stays bounded (64 KiB
    // of a stream per attempt by default, the newest lines), and a line says so.
    let a = n.send("POST", "/fn/web/print/200000", &[], b"");
    assert_eq!((a.status, a.text().as_str()), (200, "printed 200000"));
    let entries = logs(&n, "&limit=10000");
    let id = entries.last().unwrap()["id"].as_str().unwrap().to_string();
    let mine: Vec<&Value> = entries.iter().filter(|e| e["id"] == id.as_str()).collect();
    let stdout: usize = mine.iter().filter(|e| e["stream"] == "stdout").map(|e| e["line"].as_str().unwrap().len()).sum();
    assert!(stdout <= 64 << 10 && stdout > 60 << 10, "{stdout} bytes of stdout kept");
    assert!(mine.iter().any(|e| e["stream"] == "stdout" && e["line"] == "line 199999"), "the newest lines are kept");
    assert!(mine.iter().any(|e| e["stream"] == "tally" && e["line"].as_str().unwrap().contains("went past")));
}

#[test]
fn a_refused_call_out_is_a_line_of_the_functions_log() {
    let (_dir, n) = node();
    n.deploy("web", &guest("http_probe"), "");
    let a = n.send("GET", "/fn/web/fetch?to=http%3A%2F%2F127.0.0.1%3A9%2Fx", &[], b"");
    assert_eq!(a.status, 502);
    let entries = logs(&n, "");
    let refusal = entries.iter().find(|e| e["stream"] == "tally").unwrap_or_else(|| panic!("{entries:?}"));
    let line = refusal["line"].as_str().unwrap();
    assert!(line.contains("refused") && line.contains("127.0.0.1:9"), "{line}");
}
