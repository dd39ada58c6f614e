//! Exactly-once through HTTP and through process death: the `bank` example under
//! clients that retry every transfer with its `Idempotency-Key` until it succeeds,
//! while the `tally dev` process is killed with SIGKILL and restarted over its data
//! again and again. Whatever was cut in the middle is finished by a retry or by the
//! recovery scan, once: every account ends where its client's own ledger says, and
//! the total never changes.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{guest, node, node_with, Node};
use serde_json::Value;

const CLIENTS: usize = 6;
const TRANSFERS: usize = 50;
const OPENING: i64 = 1000;
/// Accepted transfers between two kills.
const KILL_EVERY: usize = CLIENTS * TRANSFERS / 6;

/// The node's current URL (a restart binds another port).
type Url = Arc<Mutex<String>>;

/// POSTs with a key until the node answers 200; returns the body.
fn until_ok(url: &Url, path: &str, body: &str, key: &str) -> String {
    common::until_ok(|| url.lock().unwrap().clone(), path, body, key, Duration::from_millis(20))
}

fn bank_under_kills(protocol: &str) {
    let (_dir, mut n) = node_with(&["--reexecute-after-ms", "200"]);
    n.deploy("bank", &guest("bank"), &format!("?timeout_ms=2000&tables=accounts:{protocol}"));
    let path = "/v1/functions/bank/invoke?book=7";
    let url: Url = Arc::new(Mutex::new(n.url.clone()));
    for c in 0..CLIENTS {
        for side in ["x", "y"] {
            until_ok(&url, path, &format!("open c{c}{side} {OPENING}"), &format!("open-c{c}{side}"));
        }
    }
    // Each client moves money between its own two accounts, one transfer at a time, and
    // keeps its own ledger of what every accepted transfer must have done.
    let accepted = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let url = url.clone();
            let accepted = accepted.clone();
            thread::spawn(move || {
                let (mut x, mut y) = (OPENING, OPENING);
                for t in 0..TRANSFERS {
                    let amount = (c * 7 + t * 13) as i64 % 50 + 1;
                    let (from, to) = if t % 3 == 0 { ("y", "x") } else { ("x", "y") };
                    let body = format!("transfer c{c}{from} c{c}{to} {amount}");
                    let reply = until_ok(&url, path, &body, &format!("c{c}-t{t}"));
                    if from == "x" {
                        x -= amount;
                        y += amount;
                    } else {
                        y -= amount;
                        x += amount;
                    }
                    let want = if from == "x" { format!("ok {x} {y}") } else { format!("ok {y} {x}") };
                    assert_eq!(reply, want, "client {c} transfer {t}");
                    accepted.fetch_add(1, Ordering::Relaxed);
                }
                (x, y)
            })
        })
        .collect();
    // The node dies every sixth of the transfers, and at the latest 400 ms after its last
    // death: however fast the transfers run, the clients meet several kills.
    let (mut kills, mut next, mut last) = (0, KILL_EVERY, Instant::now());
    while !clients.iter().all(|c| c.is_finished()) {
        thread::sleep(Duration::from_millis(5));
        if accepted.load(Ordering::Relaxed) < next && last.elapsed() < Duration::from_millis(400) {
            continue;
        }
        n = n.restart();
        *url.lock().unwrap() = n.url.clone();
        kills += 1;
        (next, last) = (accepted.load(Ordering::Relaxed) + KILL_EVERY, Instant::now());
    }
    let ledgers: Vec<(i64, i64)> = clients.into_iter().map(|c| c.join().expect("a client")).collect();
    eprintln!("{protocol}: {kills} kills");
    assert!(kills >= 2, "the clients finished before the node was killed twice ({kills})");
    for (c, (x, y)) in ledgers.iter().enumerate() {
        let balance = |side: &str| n.invoke_ok("bank", 7, &format!("balance c{c}{side}"));
        assert_eq!(balance("x"), x.to_string(), "client {c}");
        assert_eq!(balance("y"), y.to_string(), "client {c}");
    }
    let accounts: Vec<String> = (0..CLIENTS).flat_map(|c| [format!("c{c}x"), format!("c{c}y")]).collect();
    let total = n.invoke_ok("bank", 7, &format!("total {}", accounts.join(" ")));
    assert_eq!(total, (2 * CLIENTS as i64 * OPENING).to_string());
}

#[test]
fn bank_transfers_survive_kill_9_read_optimized() {
    bank_under_kills("read-optimized");
}

#[test]
fn bank_transfers_survive_kill_9_write_optimized() {
    bank_under_kills("write-optimized");
}

#[test]
fn a_retried_key_gets_the_logged_result_without_running_again() {
    let (_dir, n) = node();
    n.deploy("bank", &guest("bank"), "");
    let path = "/v1/functions/bank/invoke?book=2";
    assert_eq!(n.post_keyed(path, b"open a 10", "k-open-a").unwrap(), (200, b"ok".to_vec()));
    assert_eq!(n.post_keyed(path, b"open b 0", "k-open-b").unwrap(), (200, b"ok".to_vec()));
    for _ in 0..3 {
        let reply = n.post_keyed(path, b"transfer a b 4", "k-move").unwrap();
        assert_eq!(reply, (200, b"ok 6 4".to_vec()));
    }
    assert_eq!(n.invoke_ok("bank", 2, "balance a"), "6");
    let (_, metrics) = n.request("GET", "/metrics", b"");
    assert!(String::from_utf8_lossy(&metrics).contains("tally_replayed_results_total 2"));
    // The same key for another request is refused, and changes nothing.
    let (status, body) = n.post_keyed(path, b"transfer a b 5", "k-move").unwrap();
    assert_eq!(status, 409, "{}", String::from_utf8_lossy(&body));
    assert_eq!(n.invoke_ok("bank", 2, "balance a"), "6");
    // A function's error is its logged result too.
    let (status, body) = n.post_keyed(path, b"transfer a a 1", "k-self").unwrap();
    assert_eq!(status, 500, "{}", String::from_utf8_lossy(&body));
    assert_eq!(n.post_keyed(path, b"transfer a a 1", "k-self").unwrap(), (status, body));
    // A key is printable ASCII.
    let (status, _) = n.post_keyed(path, b"balance a", "k\u{7f}").unwrap_or((0, vec![]));
    assert!(status == 400 || status == 0, "{status}");
}

#[test]
fn asynchronous_results_outlive_a_restart() {
    let (_dir, n) = node();
    n.deploy("bank", &guest("bank"), "");
    let (status, v) = n.json("POST", "/v1/functions/bank/invoke?book=3&async=true", b"open z 5");
    assert_eq!(status, 202, "{v}");
    let id = v["invocation_id"].as_str().expect("an id").to_string();
    assert_eq!(n.finished(&id, 3)["output"]["text"], "ok");
    let n = n.restart();
    let v = n.finished(&id, 3);
    assert_eq!((v["status"].as_str(), v["output"]["text"].as_str()), (Some("succeeded"), Some("ok")), "{v}");
    let (code, _) = n.json("GET", "/v1/invocations/nope?book=3", b"");
    assert_eq!(code, 404);
}

#[test]
fn bad_exactly_once_input_gets_clear_errors() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "");
    let path = "/v1/functions/steps/invoke?book=5";
    // Keys: printable ASCII, at most 256 bytes.
    let (status, body) = n.post_keyed(path, b"script get t k", &"k".repeat(257)).unwrap();
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    // The crash hook is off unless configured.
    let response =
        Node::agent().post(format!("{}{path}", n.url)).header("tally-crash-after", "1").send(&b"script get t k"[..]).unwrap();
    assert_eq!(response.status().as_u16(), 400);
    // An asynchronous submission with a key is made once: a resubmission (its answer
    // was lost, say) names the same invocation.
    let (status, _) = n.json("POST", "/v1/functions/steps/invoke?book=5&async=true", b"x");
    assert_eq!(status, 202);
    let submit = || {
        let mut r =
            Node::agent().post(format!("{}{path}&async=true", n.url)).header("idempotency-key", "k1").send(&b"x"[..]).unwrap();
        assert_eq!(r.status().as_u16(), 202);
        let v: Value = serde_json::from_slice(&r.body_mut().read_to_vec().unwrap()).unwrap();
        v["invocation_id"].as_str().unwrap().to_string()
    };
    assert_eq!(submit(), submit());
    let response =
        Node::agent().post(format!("{}{path}&async=true", n.url)).header("tally-crash-after", "1").send(&b"x"[..]).unwrap();
    assert_eq!(response.status().as_u16(), 400);
    // A bad table name or an empty key reaches the guest as an error it can report.
    let message = n.expect_error(n.invoke("steps", 5, "script get Bad! k"), 500, "function_error");
    assert!(message.contains("invalid table name"), "{message}");
    // Switching a protocol that does not switch, or to one it cannot.
    n.invoke_ok("steps", 5, "script put t k v");
    let (status, v) = n.json("PUT", "/v1/books/5/tables/t", br#"{"protocol": "symmetric"}"#);
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_argument")), "{v}");
    let (status, v) = n.json("PUT", "/v1/books/5/tables/t", br#"{"protocol": "nonsense"}"#);
    assert_eq!(status, 400, "{v}");
    let (status, v) = n.json("PUT", "/v1/books/5/tables/t", b"not json");
    assert_eq!(status, 400, "{v}");
    let (status, v) = n.json("GET", "/v1/books/5/tables/never-used", b"");
    assert_eq!((status, v["used"].as_bool()), (200, Some(false)), "{v}");
    // The node keeps serving.
    assert_eq!(n.invoke_ok("steps", 5, "script get t k"), "v");
}

/// The `reminder` example's durable sleep: longer than the function's time limit, it
/// is answered 202 with the invocation's ID, shows `sleeping`, and wakes once after a
/// `kill -9` and restart of the node, no earlier than its logged wake time.
#[test]
fn a_durable_sleep_wakes_after_kill_9_and_restart() {
    let (_dir, n) = node();
    n.deploy("reminder", &guest("reminder"), "?timeout_ms=500");
    let path = "/v1/functions/reminder/invoke?book=9";
    let (status, body) = n.post_keyed(path, b"sleep 3000", "nap-1").expect("an answer");
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    assert_eq!(status, 202, "{v}");
    assert_eq!(v["status"], "sleeping", "{v}");
    let id = v["invocation_id"].as_str().expect("an id").to_string();
    let wake = v["wake_at_ms"].as_u64().expect("a wake time");
    let (_, v) = n.json("GET", &format!("/v1/invocations/{id}?book=9"), b"");
    assert_eq!((v["status"].as_str(), v["wake_at_ms"].as_u64()), (Some("sleeping"), Some(wake)), "{v}");
    let n = n.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    let v = loop {
        let (_, v) = n.json("GET", &format!("/v1/invocations/{id}?book=9"), b"");
        if v["status"] != "sleeping" && v["status"] != "running" {
            break v;
        }
        assert!(std::time::Instant::now() < deadline, "still asleep: {v}");
        thread::sleep(Duration::from_millis(50));
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    assert!(now >= wake, "finished at {now}, before its wake time {wake}");
    assert_eq!((v["status"].as_str(), v["output"]["text"].as_str()), (Some("succeeded"), Some("woke")), "{v}");
    // The key names the finished invocation: its logged answer, not another sleep.
    let (status, body) = n.post_keyed(path, b"sleep 3000", "nap-1").expect("an answer");
    assert_eq!((status, String::from_utf8_lossy(&body).as_ref()), (200, "woke"));
}

/// `GET /v1/invocations`: a book's root invocations in the order they started, by
/// function and status, a page at a time.
#[test]
fn invocations_are_listed_by_function_and_status() {
    let (_dir, n) = node();
    n.deploy("reminder", &guest("reminder"), "?timeout_ms=500");
    let path = "/v1/functions/reminder/invoke?book=11";
    for (key, input, want) in [("l1", "remember me", 200), ("l2", "sleep 60000", 202), ("l3", "sleep soon", 500)] {
        let (status, body) = n.post_keyed(path, input.as_bytes(), key).expect("an answer");
        assert_eq!(status, want, "{input}: {}", String::from_utf8_lossy(&body));
    }
    let list = |query: &str| {
        let (status, v) = n.json("GET", &format!("/v1/invocations?book=11{query}"), b"");
        assert_eq!(status, 200, "{query}: {v}");
        v
    };
    let v = list("");
    let statuses: Vec<&str> = v["invocations"].as_array().unwrap().iter().map(|i| i["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["succeeded", "sleeping", "failed"], "{v}");
    assert!(v["invocations"][1]["wake_at_ms"].as_u64().is_some(), "{v}");
    assert_eq!(v["invocations"][2]["error_code"], "function_error", "{v}");
    assert!(v["invocations"].as_array().unwrap().iter().all(|i| i["function"] == "reminder"), "{v}");
    assert!(v["next"].is_null(), "{v}");
    let sleeping = list("&status=sleeping");
    assert_eq!(sleeping["invocations"].as_array().unwrap().len(), 1, "{sleeping}");
    assert_eq!(sleeping["invocations"][0]["invocation_id"], v["invocations"][1]["invocation_id"]);
    assert_eq!(list("&function=nope")["invocations"].as_array().unwrap().len(), 0);
    // Pages: one invocation each, in order.
    let first = list("&limit=1");
    let next = first["next"].as_u64().expect("a next page");
    let second = list(&format!("&limit=1&after={next}"));
    assert_eq!(first["invocations"][0]["invocation_id"], v["invocations"][0]["invocation_id"]);
    assert_eq!(second["invocations"][0]["invocation_id"], v["invocations"][1]["invocation_id"]);
    for bad in ["&status=bogus", "&limit=0", "&limit=1001", "&nope=1"] {
        let (status, _) = n.json("GET", &format!("/v1/invocations?book=11{bad}"), b"");
        assert_eq!(status, 400, "{bad}");
    }
    let (status, _) = n.json("GET", &format!("/v1/invocations?book={}", 1u64 << 63), b"");
    assert_eq!(status, 400, "a platform book");
}

/// The `approval` example over HTTP: a request waits (202, `sleeping`) until its
/// decision is posted to `/v1/promises/{id}`, once; a second decision gets 409, a
/// promise nobody created 404.
#[test]
fn an_approval_waits_for_its_decision_over_http() {
    let (_dir, n) = node();
    n.deploy("approval", &guest("approval"), "?timeout_ms=1000");
    let (status, body) = n.post_keyed("/v1/functions/approval/invoke?book=12", b"request a-raise", "raise").expect("an answer");
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    assert_eq!((status, v["status"].as_str()), (202, Some("sleeping")), "{v}");
    let id = v["invocation_id"].as_str().expect("an id").to_string();
    let (_, records) = n.json("GET", "/v1/books/12/records?tag=approvals", b"");
    let line = records["records"][0]["data"]["text"].as_str().expect("the request's record").to_string();
    let promise = line.strip_prefix("a-raise ").expect("the promise's ID").to_string();
    let (status, v) = n.json("POST", &format!("/v1/promises/{promise}?book=12"), b"granted");
    assert_eq!(status, 200, "{v}");
    let v = n.finished(&id, 12);
    assert_eq!((v["status"].as_str(), v["output"]["text"].as_str()), (Some("succeeded"), Some("a-raise: granted")), "{v}");
    let (status, v) = n.json("POST", &format!("/v1/promises/{promise}?book=12"), b"denied");
    assert_eq!((status, v["error"]["code"].as_str()), (409, Some("conflict")), "{v}");
    let (status, v) = n.json("POST", &format!("/v1/promises/{}?book=12", "f".repeat(32)), b"x");
    assert_eq!((status, v["error"]["code"].as_str()), (404, Some("promise_not_found")), "{v}");
    let (status, _) = n.json("POST", &format!("/v1/promises/{promise}?book=13"), b"x");
    assert_eq!(status, 404, "another book's promise");
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// The `nightly` example's summaries in `book`, in order, as JSON.
fn summaries(n: &Node, book: u64) -> Vec<Value> {
    let (status, v) = n.json("GET", &format!("/v1/books/{book}/records?tag=nightly&limit=1000"), b"");
    assert_eq!(status, 200, "{v}");
    let records = v["records"].as_array().expect("records");
    records.iter().map(|r| serde_json::from_str(r["data"]["text"].as_str().expect("text")).expect("a summary")).collect()
}

/// Two schedules ticking every second through a `kill -9` and four seconds down: with
/// `catch_up: all` every tick missed while the node was down fires once it is back (one
/// after another), with `latest` only the last of them does. Each tick fires once: the `nightly`
/// example's summaries are as many as its invocations and as the ticks, each counting
/// on from where the last one stopped (no event counted twice or skipped).
#[test]
fn schedules_fire_each_tick_once_across_kill_9_and_catch_up_by_policy() {
    // A run cut by the kill counts as running until the recovery scan runs it again.
    let (_dir, mut n) = node_with(&["--reexecute-after-ms", "200"]);
    n.deploy("nightly", &guest("nightly"), "?timeout_ms=1000");
    n.deploy("steps", &guest("steps"), "");
    let start = now_ms();
    for (name, book, catch_up) in [("all", 21, "all"), ("latest", 22, "latest")] {
        let body = format!(r#"{{"function":"nightly","book":{book},"every_ms":1000,"catch_up":"{catch_up}"}}"#);
        let (status, v) = n.json("PUT", &format!("/v1/schedules/{name}"), body.as_bytes());
        assert_eq!(status, 201, "{v}");
        assert_eq!(
            (v["catch_up"].as_str(), v["overlap"].as_str(), v["paused"].as_bool()),
            (Some(catch_up), Some("skip"), Some(false))
        );
        // The same definition again changes nothing.
        let (status, again) = n.json("PUT", &format!("/v1/schedules/{name}"), body.as_bytes());
        assert_eq!((status, &again["revision"]), (200, &v["revision"]), "{again}");
    }
    let mut appended = 0;
    let mut append_events = |n: &Node, count: usize| {
        for _ in 0..count {
            n.invoke_ok("steps", 21, "script append events e");
            appended += 1;
            thread::sleep(Duration::from_millis(150));
        }
    };
    append_events(&n, 20);
    let down_from = now_ms();
    n = n.restart_after(Duration::from_secs(4));
    let down_to = now_ms();
    append_events(&n, 20);
    // Catching up fires the missed ticks one after another, each once the one before
    // has finished (the first once the recovery scan ran the run the kill cut again):
    // on a loaded machine that may outlast the events above. Every missed tick must
    // still fire, so wait until no tick of `all` is more than a period overdue.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, v) = n.json("GET", "/v1/schedules/all", b"");
        assert_eq!(status, 200, "{v}");
        if v["next_tick_ms"].as_u64().is_some_and(|next| next + 1000 > now_ms()) {
            break;
        }
        assert!(Instant::now() < deadline, "catch_up all is still behind after 20 s: {v}");
        thread::sleep(Duration::from_millis(100));
    }
    for name in ["all", "latest"] {
        let (status, _) = n.request("DELETE", &format!("/v1/schedules/{name}"), b"");
        assert_eq!(status, 204, "{name}");
        let (status, v) = n.json("GET", &format!("/v1/schedules/{name}"), b"");
        assert_eq!((status, v["error"]["code"].as_str()), (404, Some("schedule_not_found")), "{v}");
    }
    let end = now_ms();
    // The last invocations finish, and nothing fires after the deletion.
    thread::sleep(Duration::from_secs(2));
    let ticks = end / 1000 - start / 1000;
    let missed = (down_to / 1000).saturating_sub(down_from / 1000 + 1);
    assert!(missed >= 3, "down for {missed} ticks only");
    let all = summaries(&n, 21);
    let latest = summaries(&n, 22);
    assert!(
        all.len() as u64 <= ticks && all.len() as u64 + 2 >= ticks,
        "catch_up all: {} summaries for {ticks} ticks",
        all.len()
    );
    assert!(
        latest.len() as u64 + missed <= ticks + 2 && latest.len() as u64 + missed + 3 >= ticks,
        "catch_up latest: {} summaries for {ticks} ticks, {missed} missed while down",
        latest.len()
    );
    // One invocation per summary, and the summaries count on from each other.
    for (book, list) in [(21, &all), (22, &latest)] {
        let (_, v) = n.json("GET", &format!("/v1/invocations?book={book}&function=nightly&limit=1000"), b"");
        let invocations = v["invocations"].as_array().expect("invocations");
        assert_eq!(invocations.len(), list.len(), "book {book}: {v}");
        assert!(invocations.iter().all(|i| i["status"] == "succeeded"), "{v}");
        for pair in list.windows(2) {
            assert_eq!(pair[0]["next"], pair[1]["from"], "book {book}: {pair:?}");
            assert!(pair[0]["ran_at_ms"].as_u64() < pair[1]["ran_at_ms"].as_u64(), "{pair:?}");
        }
    }
    let counted: u64 = all.iter().map(|s| s["events"].as_u64().unwrap()).sum();
    assert!(counted <= appended && counted + 8 >= appended, "{counted} of {appended} events counted: {all:?}");
}

/// The schedules' API: definitions refused with what is wrong, pause (no tick fires),
/// trigger (one invocation each, paused or not), resume, redefinition, listing, delete.
#[test]
fn schedules_are_paused_triggered_resumed_and_refused_when_malformed() {
    let (_dir, n) = node();
    n.deploy("nightly", &guest("nightly"), "");
    let put = |name: &str, body: &str| n.json("PUT", &format!("/v1/schedules/{name}"), body.as_bytes());
    for (name, body, says) in [
        ("s", r#"{"function":"nightly"}"#, "exactly one of"),
        ("s", r#"{"function":"nightly","every_ms":1000,"cron":"* * * * *"}"#, "exactly one of"),
        ("s", r#"{"function":"nightly","every_ms":50}"#, "every_ms is 50"),
        ("s", r#"{"function":"nightly","cron":"61 * * * *"}"#, "minute 61"),
        ("s", r#"{"function":"nightly","every_ms":1000,"overlap":"sometimes"}"#, "overlap \"sometimes\""),
        ("s", r#"{"function":"nightly","every_ms":1000,"catch_up":"never"}"#, "catch_up \"never\""),
        ("s", r#"{"function":"nightly","every_ms":1000,"cadence":1}"#, "unknown field"),
        ("s", r#"{"function":"nightly","every_ms":1000,"book":9223372036854775809}"#, "reserved"),
        ("s", "not json", "expected"),
        ("s", r#"{"function":"Bad Name","every_ms":1000}"#, "invalid function name"),
        ("a%20b", r#"{"function":"nightly","every_ms":1000}"#, "not a schedule name"),
    ] {
        let (status, v) = put(name, body);
        assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_argument")), "{body}: {v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(says), "{body}: {v}");
    }
    // An input larger than a schedule keeps (its records hold it twice).
    let big = format!(r#"{{"function":"nightly","every_ms":1000,"input":"{}"}}"#, "x".repeat(300 << 10));
    let (status, v) = put("big", &big);
    assert_eq!((status, v["error"]["code"].as_str()), (413, Some("too_large")), "{v}");
    for (method, path) in
        [("GET", "/v1/schedules/nope"), ("DELETE", "/v1/schedules/nope"), ("POST", "/v1/schedules/nope/trigger")]
    {
        let (status, v) = n.json(method, path, b"");
        assert_eq!((status, v["error"]["code"].as_str()), (404, Some("schedule_not_found")), "{method} {path}: {v}");
    }
    // Paused from the start: nothing fires.
    let (status, v) = put("fast", r#"{"function":"nightly","book":23,"every_ms":100,"paused":true}"#);
    assert_eq!((status, v["paused"].as_bool(), &v["next_tick_ms"]), (201, Some(true), &Value::Null), "{v}");
    let (status, v) = n.json("POST", "/v1/schedules/fast/bogus", b"");
    assert_eq!(status, 400, "{v}");
    thread::sleep(Duration::from_millis(500));
    assert_eq!(summaries(&n, 23).len(), 0);
    // A trigger runs it once, paused or not.
    let (status, v) = n.json("POST", "/v1/schedules/fast/trigger", b"");
    assert_eq!(status, 202, "{v}");
    let id = v["invocation_id"].as_str().expect("an ID");
    assert_eq!(n.finished(id, 23)["status"], "succeeded");
    assert_eq!(summaries(&n, 23).len(), 1);
    let (_, v) = n.json("GET", "/v1/schedules/fast", b"");
    assert_eq!(
        (v["triggered"].as_u64(), v["ticks_fired"].as_u64(), v["last_invocation_id"].as_str()),
        (Some(1), Some(0), Some(id))
    );
    // Resumed, it ticks; paused again, it stops.
    let (status, v) = n.json("POST", "/v1/schedules/fast/resume", b"");
    assert_eq!((status, v["paused"].as_bool()), (200, Some(false)), "{v}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while summaries(&n, 23).len() < 4 {
        assert!(std::time::Instant::now() < deadline, "no ticks after resume");
        thread::sleep(Duration::from_millis(50));
    }
    let (_, paused) = n.json("POST", "/v1/schedules/fast/pause", b"");
    thread::sleep(Duration::from_millis(500));
    let before = summaries(&n, 23).len();
    thread::sleep(Duration::from_millis(500));
    assert_eq!(summaries(&n, 23).len(), before, "ticks fired while paused: {paused}");
    // A new definition is a new revision; the listing shows every schedule.
    let (status, v) = put("fast", r#"{"function":"nightly","book":23,"cron":"@daily","paused":true}"#);
    assert_eq!((status, v["revision"].as_u64(), v["cron"].as_str()), (200, Some(2), Some("@daily")), "{v}");
    put("other", r#"{"function":"nightly","book":24,"cron":"0 2 * * *","input":{"report":"daily"}}"#);
    let (_, v) = n.json("GET", "/v1/schedules", b"");
    let names: Vec<&str> = v["schedules"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["fast", "other"], "{v}");
    let other = &v["schedules"][1];
    assert_eq!(other["input_bytes"], r#"{"report":"daily"}"#.len(), "{other}");
    let (_, one) = n.json("GET", "/v1/schedules/other", b"");
    assert_eq!(one["input"]["text"], r#"{"report":"daily"}"#, "{one}");
    assert_eq!(other["next_tick_ms"].as_u64().unwrap() % 86_400_000, 2 * 3_600_000, "{other}");
    for name in ["fast", "other"] {
        assert_eq!(n.request("DELETE", &format!("/v1/schedules/{name}"), b"").0, 204);
    }
    let (_, v) = n.json("GET", "/v1/schedules", b"");
    assert_eq!(v["schedules"].as_array().map(Vec::len), Some(0), "{v}");
}

/// `DELETE /v1/invocations/{id}`: a sleeping invocation is cancelled (202, then failed
/// with code `cancelled`), and again (202: cancelling twice is cancelling once); an
/// unknown one is 404.
#[test]
fn a_sleeping_invocation_is_cancelled_over_http() {
    let (_dir, n) = node();
    n.deploy("reminder", &guest("reminder"), "?timeout_ms=500");
    let (status, body) = n.post_keyed("/v1/functions/reminder/invoke?book=13", b"sleep 60000", "long-nap").expect("an answer");
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    assert_eq!(status, 202, "{v}");
    let id = v["invocation_id"].as_str().expect("an id").to_string();
    let (status, v) = n.json("DELETE", &format!("/v1/invocations/{id}?book=13"), b"");
    assert_eq!((status, v["status"].as_str()), (202, Some("cancelling")), "{v}");
    let v = n.finished(&id, 13);
    assert_eq!((v["status"].as_str(), v["error"]["code"].as_str()), (Some("failed"), Some("cancelled")), "{v}");
    // Cancelling twice is cancelling once.
    let (status, v) = n.json("DELETE", &format!("/v1/invocations/{id}?book=13"), b"");
    assert_eq!(status, 202, "{v}");
    let (status, v) = n.json("DELETE", &format!("/v1/invocations/{}?book=13", "0".repeat(32)), b"");
    assert_eq!((status, v["error"]["code"].as_str()), (404, Some("invocation_not_found")), "{v}");
    // The key answers with the logged outcome.
    let (status, body) = n.post_keyed("/v1/functions/reminder/invoke?book=13", b"sleep 60000", "long-nap").expect("an answer");
    assert_eq!(status, 409, "{}", String::from_utf8_lossy(&body));
}
