//! The webhook function of every guest language (tests/guests/webhook in Rust and
//! tests/guests/<lang>/webhook), all to one contract: it checks the request's HMAC-SHA256
//! signature with a secret setting, sends the body to an upstream (a setting, allowed
//! explicitly) started here on loopback, counts the webhooks in state and answers 201
//! `<count> <upstream's answer>`.
//!
//! Each is crashed after every effect of a webhook, under every protocol of its state
//! table, and retried under the same `Idempotency-Key` until it answers: the count grows by
//! one per webhook (each state write happens once), and the upstream, which honours
//! idempotency keys, sees each webhook's call once, or twice with the same key when the
//! crash fell between the send and its log (what docs/http.md promises).

mod common;

use std::time::{Duration, Instant};

use common::{guest, node_with, Node, Upstream};
use serde_json::json;
use sha2::{Digest, Sha256};

const SECRET: &str = "whsec-0c6b1e7f-shared-with-the-sender";

/// HMAC-SHA256 (RFC 2104), as lowercase hex.
fn hmac_hex(key: &[u8], message: &[u8]) -> String {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    let outer = Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize();
    outer.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_test_signs_as_rfc_4231_says() {
    assert_eq!(
        hmac_hex(b"Jefe", b"what do ya want for nothing?"),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

/// Sends `body` signed as `signature` (a good one if `None`) to webhook `name` on `book`.
fn post(n: &Node, name: &str, book: u64, body: &[u8], headers: &[(&str, &str)]) -> common::Answer {
    let signature = format!("sha256={}", hmac_hex(SECRET.as_bytes(), body));
    let book = book.to_string();
    let mut all = vec![("x-signature", signature.as_str()), ("tally-book", book.as_str())];
    all.extend_from_slice(headers);
    n.send("POST", &format!("/fn/{name}/hook"), &all, body)
}

/// Deploys `component` as `name`, its settings and its upstream as the contract says.
fn deploy(n: &Node, name: &str, component: &[u8], up: &Upstream, protocol: &str) {
    let settings = json!({
        "upstream": { "value": format!("http://127.0.0.1:{}/sink", up.port) },
        "webhook_secret": { "value": SECRET, "secret": true },
    });
    let query = format!("?tables=hooks:{protocol}&outbound=http%3A%2F%2F127.0.0.1%3A{}", up.port);
    let a = n.send("PUT", &format!("/v1/functions/{name}{query}"), &[("tally-settings", &settings.to_string())], component);
    assert_eq!(a.status, 201, "deploying {name}: {}", a.text());
}

fn check(component: &str) {
    let wasm = guest(component);
    let up = Upstream::honouring_keys();
    let (_dir, n) = node_with(&["--crash-injection", "true"]);
    for (i, protocol) in ["read-optimized", "write-optimized", "symmetric"].into_iter().enumerate() {
        let (name, book) = (format!("hook-{i}"), i as u64 + 1);
        deploy(&n, &name, &wasm, &up, protocol);
        // Refused before anything is done: another method, a bad or missing signature.
        let a = n.send("GET", &format!("/fn/{name}/hook"), &[], b"");
        assert_eq!(a.status, 405, "{component} {protocol}: {}", a.text());
        let a = n.send("POST", &format!("/fn/{name}/hook"), &[("x-signature", "sha256=00"), ("tally-book", "1")], b"x");
        assert_eq!((a.status, a.text().as_str()), (401, "bad signature"), "{component} {protocol}");
        let a = n.send("POST", &format!("/fn/{name}/hook"), &[], b"x");
        assert_eq!(a.status, 401, "{component} {protocol}");
        assert!(up.seen().is_empty() || i > 0, "a refused webhook sent nothing: {:?}", up.seen());

        let mut webhooks = 0;
        let mut resent = Vec::new();
        for crash_after in 1u64.. {
            assert!(crash_after < 60, "{component} {protocol}: a webhook with no end of effects");
            let sent_before = up.seen().len();
            let key = format!("{component}-{protocol}-{crash_after}");
            let body = format!("event {crash_after} of {protocol}");
            let crash = crash_after.to_string();
            let crashed = post(&n, &name, book, body.as_bytes(), &[("idempotency-key", &key), ("tally-crash-after", &crash)]);
            // Retried as a client would, until it answers.
            let deadline = Instant::now() + Duration::from_secs(60);
            let answer = loop {
                let a = post(&n, &name, book, body.as_bytes(), &[("idempotency-key", &key)]);
                if a.status == 201 || Instant::now() > deadline {
                    break a;
                }
                assert!(a.status >= 500, "{component} {protocol} crash {crash_after}: {} {}", a.status, a.text());
                std::thread::sleep(Duration::from_millis(50));
            };
            assert_eq!(answer.status, 201, "{component} {protocol} crash {crash_after}: {}", answer.text());
            webhooks += 1;
            let sends: Vec<_> = up.seen()[sent_before..].to_vec();
            assert!(!sends.is_empty() && sends.len() <= 2, "{component} {protocol} crash {crash_after}: {sends:?}");
            assert!(sends.iter().all(|s| s.0 == "POST" && s.1 == "/sink" && s.2 == sends[0].2), "one key: {sends:?}");
            assert!(sends[0].2.starts_with("tally-"), "the host's idempotency key: {sends:?}");
            if sends.len() == 2 {
                resent.push(crash_after);
            }
            let distinct = {
                let mut keys: Vec<String> = up.seen().into_iter().map(|s| s.2).collect();
                keys.dedup();
                keys.sort();
                keys.dedup();
                keys.len()
            };
            assert_eq!(
                answer.text(),
                format!("{webhooks} ok-{distinct}"),
                "{component} {protocol} crash {crash_after}: the count grows by one per webhook"
            );
            if crashed.status == 201 {
                // Past the last effect: nothing crashed.
                assert_eq!(crashed.text(), answer.text());
                break;
            }
        }
        eprintln!("{component} {protocol}: {webhooks} webhooks, one per crash point; sent again after crash {resent:?}");
        assert!(webhooks > 3, "{component} {protocol}: {webhooks} effects");
        assert!(resent.len() <= 1, "{component} {protocol}: sent again after crashes {resent:?}");
    }
    // The secret is in no listing, log line or metric.
    for path in ["/v1/functions/hook-0/config", "/v1/logs?limit=10000", "/metrics"] {
        let (_, body) = n.request("GET", path, b"");
        assert!(!String::from_utf8_lossy(&body).contains(SECRET), "{path} shows the secret");
    }
}

#[test]
fn rust_webhook() {
    check("webhook");
}

#[test]
fn python_webhook() {
    check("python-webhook");
}

#[test]
fn js_webhook() {
    check("js-webhook");
}

#[test]
fn go_webhook() {
    check("go-webhook");
}

#[test]
fn c_webhook() {
    check("c-webhook");
}
