//! Findings of the second outside review (issue 50): ways to break a documented promise
//! through the HTTP API of a real `tally dev`, one test each, named by its finding's
//! number. Each fails when its fix is reverted (the commit that added it says how).

mod common;

use std::time::{Duration, Instant};

use common::{guest, node, Node};
use serde_json::Value;

/// A request with headers; returns the status, the `Tally-Position` header and the body.
fn send(n: &Node, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, Option<String>, Value) {
    let url = format!("{}{path}", n.url);
    let agent = Node::agent();
    let mut response = match method {
        "GET" => headers.iter().fold(agent.get(&url), |r, (k, v)| r.header(*k, *v)).call(),
        "DELETE" => headers.iter().fold(agent.delete(&url), |r, (k, v)| r.header(*k, *v)).call(),
        "POST" => headers.iter().fold(agent.post(&url), |r, (k, v)| r.header(*k, *v)).send(body),
        other => panic!("no method {other}"),
    }
    .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let position = response.headers().get("tally-position").and_then(|v| v.to_str().ok()).map(str::to_string);
    let body = response.body_mut().read_to_vec().expect("a body");
    (response.status().as_u16(), position, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// Polls `GET /v1/invocations/{id}` until `done` says so (for up to `within`).
fn status_until(n: &Node, id: &str, book: u64, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let (status, v) = n.json("GET", &format!("/v1/invocations/{id}?book={book}"), b"");
        assert_eq!(status, 200, "{v}");
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{id} is still {v}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Finding 1: a `Tally-Position` naming a term the node never saw was merged into the
/// registry's shared read position, and from then on every listing, deploy and invoke
/// that read the registry timed out until a restart. It is now refused (400) once no
/// configuration of that term came within the log's timeout, and it harms nobody else.
#[test]
fn f1_a_position_from_a_term_never_given_out_is_refused_and_harms_nobody() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "");
    let (status, _, v) =
        send(&n, "POST", "/v1/functions/steps/invoke?book=1", &[("tally-position", "65535.0")], b"script get t k");
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_argument")), "{v}");
    let started = Instant::now();
    let (status, v) = n.json("GET", "/v1/functions", b"");
    assert_eq!(status, 200, "{v}");
    assert!(started.elapsed() < Duration::from_secs(5), "listing waited {:?}", started.elapsed());
    assert_eq!(n.invoke_ok("steps", 1, "script get t k"), "none");
}

/// Finding 4: cancelling an invocation that waited out a retry backoff did not end it:
/// the wake the cancellation caused waited for the backoff again, and the retries ran
/// on until the last one's trap was the outcome. Now the wake skips the wait, and a
/// trap once a cancellation was asked for is not retried: it ends `cancelled`.
#[test]
fn f4_cancelling_an_invocation_that_waits_to_retry_ends_it_cancelled() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "?retry_attempts=3&retry_backoff_ms=5000&retry_backoff_max_ms=5000");
    let (status, _, v) = send(&n, "POST", "/v1/functions/steps/invoke?book=4&async=true", &[], b"script crash");
    assert_eq!(status, 202, "{v}");
    let id = v["invocation_id"].as_str().expect("an ID").to_string();
    status_until(&n, &id, 4, Duration::from_secs(20), |v| v["status"] == "sleeping");
    let (status, _, v) = send(&n, "DELETE", &format!("/v1/invocations/{id}?book=4"), &[], b"");
    assert_eq!(status, 202, "{v}");
    let v = status_until(&n, &id, 4, Duration::from_secs(3), |v| v["status"] == "failed");
    assert_eq!(v["error"]["code"], "cancelled", "{v}");
}

/// Finding 6: each resend of a sleeping invocation's key ran its guest again up to the
/// sleep and set one more wake timer.
#[test]
fn f6_resending_a_sleeping_invocations_key_does_not_run_its_guest_again() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "");
    let resend = || send(&n, "POST", "/v1/functions/steps/invoke?book=6", &[("idempotency-key", "nap")], b"script nap 30000");
    let (status, _, v) = resend();
    assert_eq!((status, v["status"].as_str()), (202, Some("sleeping")), "{v}");
    let runs = n.metric("tally_instantiate_seconds_count{function=\"steps\"}");
    for _ in 0..5 {
        let (status, _, v) = resend();
        assert_eq!((status, v["status"].as_str()), (202, Some("sleeping")), "{v}");
    }
    assert_eq!(n.metric("tally_instantiate_seconds_count{function=\"steps\"}"), runs, "a resend ran the guest");
}

/// Finding 7: status, cancel, promise completion and the invocation listing ignored the
/// client's `Tally-Position` (on a lagging node they answered 404 for what the client
/// had just seen), and an asynchronous 202 carried none. Each now reads at the
/// client's position (a malformed one is refused, which shows it is read) and answers
/// with where it read.
#[test]
fn f7_status_cancel_promises_and_listings_read_at_the_clients_position() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "");
    let (status, position, v) = send(&n, "POST", "/v1/functions/steps/invoke?book=7&async=true", &[], b"script nap 30000");
    assert_eq!(status, 202, "{v}");
    let position = position.expect("an asynchronous 202 carries a Tally-Position");
    let id = v["invocation_id"].as_str().expect("an ID").to_string();
    let seen = [("tally-position", position.as_str())];
    let bad = [("tally-position", "not a position")];
    let promise = format!("/v1/promises/{}?book=7", "0".repeat(32));
    let routes = [
        ("GET", format!("/v1/invocations/{id}?book=7")),
        ("GET", "/v1/invocations?book=7".to_string()),
        ("POST", promise.clone()),
        ("DELETE", format!("/v1/invocations/{id}?book=7")),
    ];
    for (method, path) in &routes {
        let (status, _, v) = send(&n, method, path, &bad, b"");
        assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_argument")), "{method} {path}: {v}");
    }
    for (method, path) in &routes {
        let (status, reached, v) = send(&n, method, path, &seen, b"");
        let want = if path == &promise {
            404
        } else if *method == "DELETE" {
            202
        } else {
            200
        };
        assert_eq!(status, want, "{method} {path}: {v}");
        if status < 300 {
            assert!(reached.is_some(), "{method} {path} answers with its position");
        }
    }
}

/// Finding 8: a deploy could set any request, response and time limit, and an
/// invocation then buffered a body of any size.
#[test]
fn f8_a_deploy_cannot_raise_a_limit_past_the_nodes_cap() {
    let (_dir, n) = node();
    for query in
        ["request_bytes_max=1099511627776", "response_bytes_max=1099511627776", "timeout_ms=86400000", "concurrency_max=100000"]
    {
        let (status, v) = n.json("PUT", &format!("/v1/functions/steps?{query}"), &guest("steps"));
        assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_argument")), "{query}: {v}");
        assert!(v["error"]["message"].as_str().unwrap_or_default().contains("[node]"), "{v}");
    }
}

/// Finding 15: one function and idempotency key in two books drew the same random
/// stream and promise IDs, and the node's map of running roots did not tell the books
/// apart, so the second book's asynchronous invocation was taken as running already
/// and left to the recovery scan.
#[test]
fn f15_one_function_and_key_in_two_books_are_two_invocations() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "");
    let start = |book: u64| {
        let path = format!("/v1/functions/steps/invoke?book={book}&async=true");
        let (status, _, v) = send(&n, "POST", &path, &[("idempotency-key", "same")], b"script sleep 1500; promise");
        assert_eq!(status, 202, "{v}");
        v["invocation_id"].as_str().expect("an ID").to_string()
    };
    let (first, second) = (start(1), start(2));
    let output = |id: &str, book: u64| {
        let v = status_until(&n, id, book, Duration::from_secs(6), |v| v["status"] != "running");
        assert_eq!(v["status"], "succeeded", "{v}");
        v["output"]["text"].as_str().expect("text").to_string()
    };
    assert_ne!(output(&first, 1), output(&second, 2), "two books' invocations created the same promise");
}

/// Finding 16: cancelling an invocation a second time, once the first cancellation had
/// ended it, answered 409; the API promises that cancelling twice is cancelling once.
#[test]
fn f16_cancelling_twice_is_cancelling_once() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "");
    let (status, _, v) = send(&n, "POST", "/v1/functions/steps/invoke?book=16&async=true", &[], b"script nap 30000");
    assert_eq!(status, 202, "{v}");
    let id = v["invocation_id"].as_str().expect("an ID").to_string();
    let cancel = || send(&n, "DELETE", &format!("/v1/invocations/{id}?book=16"), &[], b"");
    assert_eq!(cancel().0, 202);
    let v = n.finished(&id, 16);
    assert_eq!(v["error"]["code"], "cancelled", "{v}");
    let (status, _, v) = cancel();
    assert_eq!(status, 202, "{v}");
}

/// Finding 3: `GET /v1/schedules` rendered every schedule's input (up to 256 KiB, as
/// text and as base64) in one response. It is now a page by name (at most 1,000) that
/// shows each input's size; `GET /v1/schedules/{name}` shows the input.
#[test]
fn f3_the_schedule_listing_is_paged_and_shows_no_inputs() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "");
    let input = "x".repeat(200 << 10);
    for i in 0..30 {
        let def = serde_json::json!({ "function": "steps", "book": 3, "input": input, "every_ms": 60_000, "paused": true });
        let (status, v) = n.json("PUT", &format!("/v1/schedules/s{i:02}"), def.to_string().as_bytes());
        assert_eq!(status, 201, "{v}");
    }
    let (status, body) = n.request("GET", "/v1/schedules", b"");
    assert_eq!(status, 200);
    assert!(body.len() < 64 << 10, "a listing of 30 schedules is {} bytes", body.len());
    let mut names = Vec::new();
    let mut after = String::new();
    loop {
        let (status, page) = n.json("GET", &format!("/v1/schedules?limit=7&after={after}"), b"");
        assert_eq!(status, 200, "{page}");
        let listed = page["schedules"].as_array().expect("schedules");
        assert!(listed.len() <= 7, "{page}");
        for s in listed {
            assert_eq!(s["input_bytes"], input.len(), "{s}");
            names.push(s["name"].as_str().expect("a name").to_string());
        }
        match page["next"].as_str() {
            Some(next) => after = next.to_string(),
            None => break,
        }
    }
    assert_eq!(names, (0..30).map(|i| format!("s{i:02}")).collect::<Vec<_>>());
    let (status, one) = n.json("GET", "/v1/schedules/s07", b"");
    assert_eq!((status, one["input"]["text"].as_str().map(str::len)), (200, Some(input.len())), "{}", one["name"]);
    let (status, _) = n.json("DELETE", "/v1/schedules/s07", b"");
    assert_eq!(status, 204);
    let (_, page) = n.json("GET", "/v1/schedules?limit=1000", b"");
    assert_eq!(page["schedules"].as_array().map(Vec::len), Some(29), "a deleted schedule is not listed");
}

/// Finding 11: `?key=K&shared=true` let any caller run beside a key's exclusive holder
/// and write: the key's serialisation held only for callers that did not ask to share
/// it, and the guest could not tell. A shared run now only reads: every effect it asks
/// for is refused.
#[test]
fn f11_a_shared_keyed_invocation_only_reads() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "");
    let shared = "/v1/functions/steps/invoke?book=11&key=k&shared=true";
    let (status, body) = n.request("POST", "/v1/functions/steps/invoke?book=11&key=k", b"script put t k v; get t k");
    assert_eq!((status, String::from_utf8_lossy(&body).as_ref()), (200, "ok,v"));
    let (status, body) = n.request("POST", shared, b"script get t k; append x data; tag x");
    let text = String::from_utf8_lossy(&body).to_string();
    assert_eq!(status, 200, "{text}");
    assert!(text.starts_with("v,error:invalid_argument,"), "{text}");
    let (status, body) = n.request("POST", shared, b"script put t k w");
    let text = String::from_utf8_lossy(&body).to_string();
    assert!(status >= 400 && text.contains("only reads"), "{status} {text}");
    assert_eq!(n.invoke_ok("steps", 11, "script get t k"), "v");
}

/// Finding 12: an invocation waiting for a held key appended a failed try about once a
/// second (and replayed all of them at each try), and ran the key's sleeping holder
/// again every few seconds, only for it to replay up to its sleep. A waiter now leaves
/// no record while the key is held, and a sleeping holder is left to its own wake.
#[test]
fn f12_waiting_for_a_sleeping_keys_holder_reruns_nothing() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "");
    let start = |input: &[u8]| {
        let (status, _, v) = send(&n, "POST", "/v1/functions/steps/invoke?book=12&key=k&async=true", &[], input);
        assert_eq!(status, 202, "{v}");
        v["invocation_id"].as_str().expect("an ID").to_string()
    };
    let holder = start(b"script nap 7000; put t k done");
    status_until(&n, &holder, 12, Duration::from_secs(10), |v| v["status"] == "sleeping");
    let waiter = start(b"script get t k");
    let v = status_until(&n, &waiter, 12, Duration::from_secs(20), |v| v["status"] != "running" && v["status"] != "sleeping");
    assert_eq!((v["status"].as_str(), v["output"]["text"].as_str()), (Some("succeeded"), Some("done")), "{v}");
    // The holder's run and its wake, and the waiter's one run of its guest.
    let runs = n.metric("tally_instantiate_seconds_count{function=\"steps\"}");
    assert!(runs <= 3, "the guest ran {runs} times");
}
