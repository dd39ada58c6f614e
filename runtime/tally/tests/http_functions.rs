//! HTTP functions end to end: a wasi:http proxy component (tests/guests/http-probe, which
//! knows nothing of Tally) deployed to a real `tally dev` and reached at `/fn/{name}/...`
//! with every method, paths, queries, repeated headers, binary and multi-MiB bodies,
//! status codes, trailers, traps and idempotency keys.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{guest, node, Node, Upstream};

#[test]
fn an_http_function_serves_every_method_path_query_header_and_body() {
    let (_dir, n) = node();
    n.deploy("web", &guest("http_probe"), "");

    let a = n.send("GET", "/fn/web", &[], b"");
    assert_eq!((a.status, a.header("x-method"), a.header("x-path")), (200, vec!["GET"], vec!["/"]));
    let a = n.send("GET", "/fn/web/", &[], b"");
    assert_eq!(a.header("x-path"), vec!["/"]);

    // Binary bodies both ways, a deep path, a repeated query key, repeated headers in
    // order, the content type; the platform's own headers are not passed on.
    let body: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    for method in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        let a = n.send(
            method,
            "/fn/web/a/b%20c/?x=1&x=2&y",
            &[("x-repeat", "one"), ("x-repeat", "two"), ("content-type", "application/x-probe"), ("tally-book", "3")],
            &body,
        );
        assert_eq!(a.status, 200, "{method}: {}", String::from_utf8_lossy(&a.body));
        assert_eq!(a.header("x-method"), vec![method]);
        assert_eq!(a.header("x-path"), vec!["/a/b%20c/?x=1&x=2&y"]);
        assert_eq!(a.header("x-repeat"), vec!["one", "two"]);
        assert_eq!(a.header("content-type"), vec!["application/x-probe"]);
        assert_eq!(a.body, body, "{method}");
        assert!(!a.header("tally-position").is_empty(), "{method}: the position comes back");
    }
    let a = n.send("HEAD", "/fn/web/q", &[], b"");
    assert_eq!((a.status, a.header("x-method")), (200, vec!["HEAD"]));

    // Status codes are the function's.
    for status in [201, 204, 302, 404, 418, 503] {
        let a = n.send("GET", &format!("/fn/web/status/{status}"), &[], b"");
        assert_eq!(a.status, status);
    }

    // A response of several MiB, written 4 KiB at a time.
    let size = 5 << 20;
    let a = n.send("GET", &format!("/fn/web/big/{size}"), &[], b"");
    assert_eq!(a.status, 200);
    assert_eq!(a.body.len(), size);
    assert!(a.body.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8), "the body comes back byte for byte");
    // A request of several MiB.
    let big: Vec<u8> = (0..(3 << 20)).map(|i| (i % 253) as u8).collect();
    let a = n.send("POST", "/fn/web/echo", &[], &big);
    assert_eq!((a.status, a.body.len()), (200, big.len()));
    assert!(a.body == big);
}

#[test]
fn an_http_function_sends_trailers_to_a_client_that_takes_them() {
    let (_dir, n) = node();
    n.deploy("web", &guest("http_probe"), "");
    let addr = n.url.strip_prefix("http://").expect("an http URL");
    let mut stream = TcpStream::connect(addr).expect("connecting");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("a timeout");
    write!(stream, "GET /fn/web/trailers HTTP/1.1\r\nHost: {addr}\r\nTE: trailers\r\nConnection: close\r\n\r\n")
        .expect("sending");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("reading");
    let text = String::from_utf8_lossy(&response).to_lowercase();
    assert!(text.starts_with("http/1.1 200"), "{text}");
    assert!(text.contains("with trailers"), "{text}");
    assert!(text.contains("x-trailer: yes"), "the trailer follows the body: {text}");
}

#[test]
fn an_http_function_that_fails_gets_a_clear_error() {
    let (_dir, n) = node();
    n.deploy("web", &guest("http_probe"), "?response_bytes_max=100000");
    n.deploy("hello", &guest("hello"), "");

    let a = n.send("GET", "/fn/web/trap", &[], b"");
    let message = n.expect_error((a.status, a.body), 500, "trap");
    assert!(message.contains("trapped on purpose"), "{message}");
    let a = n.send("GET", "/fn/web/no-response", &[], b"");
    let message = n.expect_error((a.status, a.body), 500, "function_error");
    assert!(message.contains("without setting a response"), "{message}");
    // Over the response limit: refused whole, nothing of the body sent.
    let a = n.send("GET", "/fn/web/big/200000", &[], b"");
    n.expect_error((a.status, a.body), 413, "too_large");
    let a = n.send("GET", "/fn/web/big/90000", &[], b"");
    assert_eq!((a.status, a.body.len()), (200, 90000));

    let a = n.send("GET", "/fn/nobody/x", &[], b"");
    n.expect_error((a.status, a.body), 404, "function_not_found");
    let a = n.send("POST", "/fn/hello", &[], b"hi");
    let message = n.expect_error((a.status, a.body), 400, "invalid_argument");
    assert!(message.contains("/v1/functions/hello/invoke"), "{message}");
    let a = n.send("GET", "/fn/web/x", &[("tally-book", "9223372036854775809")], b"");
    n.expect_error((a.status, a.body), 400, "invalid_argument");
    let a = n.send("GET", "/fn/web/x", &[("tally-book", "seven")], b"");
    n.expect_error((a.status, a.body), 400, "invalid_argument");
    // The node still serves.
    let a = n.send("GET", "/fn/web/status/200", &[], b"");
    assert_eq!(a.status, 200);
}

#[test]
fn an_http_function_invoked_as_a_function_takes_a_post_and_answers_its_response() {
    let (_dir, n) = node();
    n.deploy("web", &guest("http_probe"), "");
    let a = n.send("POST", "/v1/functions/web/invoke?book=2", &[], b"plain input");
    assert_eq!((a.status, a.header("x-method"), a.header("x-path")), (200, vec!["POST"], vec!["/"]));
    assert_eq!(a.body, b"plain input");
}

#[test]
fn a_retried_http_request_with_an_idempotency_key_gets_the_logged_response() {
    let (_dir, n) = node();
    n.deploy("web", &guest("http_probe"), "");
    let key = [("idempotency-key", "order-17")];
    let first = n.send("POST", "/fn/web/orders?id=17", &key, b"the order");
    assert_eq!((first.status, first.body.as_slice()), (200, &b"the order"[..]));
    let runs = n.metric("tally_instantiate_seconds_count{function=\"web\"}");
    let again = n.send("POST", "/fn/web/orders?id=17", &key, b"the order");
    assert_eq!((again.status, again.body.as_slice()), (200, &b"the order"[..]));
    assert_eq!(again.header("x-path"), vec!["/orders?id=17"]);
    assert_eq!(n.metric("tally_instantiate_seconds_count{function=\"web\"}"), runs, "the guest did not run again");
    // An exactly-once request is logged whole: over the log's payload limit it is
    // refused with the limit named, before the guest runs.
    let big = vec![7u8; 2 << 20];
    let a = n.send("POST", "/fn/web/orders", &[("idempotency-key", "big")], &big);
    n.expect_error((a.status, a.body), 413, "too_large");
}

#[test]
fn calls_out_reach_only_allowed_destinations_each_logged_once() {
    let up = Upstream::start();
    let (_dir, n) = node();
    n.deploy("web", &guest("http_probe"), "");
    // No destination allowed: refused before anything is sent.
    let a = n.send("POST", &up.fetch("/charge"), &[("x-fetch-method", "POST")], b"17 EUR");
    assert_eq!(a.status, 502);
    assert!(String::from_utf8_lossy(&a.body).contains("HttpRequestDenied"), "{}", String::from_utf8_lossy(&a.body));
    assert!(up.seen().is_empty());

    let allowed = format!("?outbound=http%3A%2F%2F127.0.0.1%3A{}", up.port);
    n.deploy("web", &guest("http_probe"), &allowed);
    let a = n.send("POST", &up.fetch("/charge"), &[("x-fetch-method", "POST")], b"17 EUR");
    assert_eq!((a.status, String::from_utf8_lossy(&a.body).as_ref()), (200, "upstream 1: 17 EUR"));
    let seen = up.seen();
    assert_eq!((seen[0].0.as_str(), seen[0].1.as_str()), ("POST", "/charge"));
    assert!(seen[0].2.starts_with("tally-"), "the call carries an idempotency key: {seen:?}");

    // Under the client's Idempotency-Key, a retried request gets the logged response:
    // the upstream sees the call once.
    let key = [("idempotency-key", "order-18"), ("x-fetch-method", "POST")];
    let first = n.send("POST", &up.fetch("/charge"), &key, b"18 EUR");
    assert_eq!((first.status, String::from_utf8_lossy(&first.body).as_ref()), (200, "upstream 2: 18 EUR"));
    let again = n.send("POST", &up.fetch("/charge"), &key, b"18 EUR");
    assert_eq!(again.body, first.body);
    assert_eq!(up.seen().len(), 2);

    // Another port of the same host is not allowed.
    let other = format!("/fn/web/fetch?to=http%3A%2F%2F127.0.0.1%3A{}%2Fx", up.port.wrapping_add(1).max(1));
    let a = n.send("GET", &other, &[], b"");
    assert!(String::from_utf8_lossy(&a.body).contains("HttpRequestDenied"));
    assert_eq!(up.seen().len(), 2);
}

/// Crashes an invocation after each of its effects (its Init, the call's start, the
/// send before its log, the log, the result), then retries it under the same key: the upstream
/// sees the call again only after the crash that fell between the send and the log,
/// and always with the same key; every retry answers what the upstream answered once.
#[test]
fn a_call_out_is_sent_again_only_when_a_crash_fell_between_send_and_log() {
    let up = Upstream::start();
    let (_dir, n) = common::node_with(&["--crash-injection", "true"]);
    n.deploy("web", &guest("http_probe"), &format!("?outbound=http%3A%2F%2F127.0.0.1%3A{}", up.port));
    let mut resent = Vec::new();
    for crash_after in 1..=6u64 {
        let before = up.seen().len();
        let key = format!("crash-{crash_after}");
        let crashed = n.send(
            "POST",
            &up.fetch("/pay"),
            &[
                ("idempotency-key", key.as_str()),
                ("tally-crash-after", &crash_after.to_string()),
                ("x-fetch-method", "POST"),
                ("x-fetch-body-delay-ms", "20"),
            ],
            b"once",
        );
        // The node may still be ending the crashed attempt when the retry comes (a 5xx
        // then): the client retries until it gets the answer, as `common::until_ok` does.
        let mut tries = 0;
        let retried = loop {
            // The body is written after the request is handed over: a re-execution that
            // replays the logged response must still take it.
            let headers = [("idempotency-key", key.as_str()), ("x-fetch-method", "POST"), ("x-fetch-body-delay-ms", "20")];
            let a = n.send("POST", &up.fetch("/pay"), &headers, b"once");
            tries += 1;
            if a.status == 200 || tries == 50 {
                break a;
            }
            assert!(a.status >= 500, "after a crash after {crash_after}: {} {}", a.status, String::from_utf8_lossy(&a.body));
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(retried.status, 200, "after a crash after {crash_after}: {}", String::from_utf8_lossy(&retried.body));
        let calls: Vec<_> = up.seen()[before..].to_vec();
        assert!(!calls.is_empty() && calls.len() <= 2, "crash after {crash_after}: {calls:?}");
        assert!(calls.iter().all(|c| c.2 == calls[0].2), "one key for every send: {calls:?}");
        let answered = String::from_utf8_lossy(&retried.body).to_string();
        assert_eq!(answered, format!("upstream {}: once", before + calls.len()), "the last send's answer is the logged one");
        if crashed.status == 200 {
            assert_eq!(crashed.body, retried.body);
        }
        if calls.len() == 2 {
            resent.push(crash_after);
        }
    }
    assert_eq!(resent, vec![3], "only the crash between the send and its log sends again");
}

/// A raw GET of `path` naming `host`, over a connection of its own; the response's text.
fn get_as_host(n: &Node, host: &str, path: &str) -> String {
    let addr = n.url.strip_prefix("http://").expect("an http URL");
    let mut stream = TcpStream::connect(addr).expect("connecting");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("a timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").expect("sending");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("reading");
    String::from_utf8_lossy(&response).to_lowercase()
}

#[test]
fn http_functions_take_the_routes_they_declare() {
    let (_dir, n) = node();
    // Public: a shop on its own host name takes requests without a token, even on
    // `tally dev`, which refuses tokenless requests naming hosts beyond loopback.
    n.deploy("web", &guest("http_probe"), "?public=true&routes=%2Fapi,shop.local%2F,%2Fledger%405");
    let a = n.send("GET", "/api/users/7?x=1", &[], b"");
    assert_eq!((a.status, a.header("x-path")), (200, vec!["/users/7?x=1"]));
    assert_eq!(n.send("GET", "/api", &[], b"").header("x-path"), vec!["/"]);
    let a = n.send("GET", "/apix", &[], b"");
    n.expect_error((a.status, a.body), 404, "not_found");
    // A host's whole tree, whatever the port the client named.
    let text = get_as_host(&n, "shop.local:8080", "/cart?id=3");
    assert!(text.starts_with("http/1.1 200") && text.contains("x-path: /cart?id=3"), "{text}");
    assert!(get_as_host(&n, "other.local", "/cart").starts_with("http/1.1 404"));
    // The route's book: a logged request runs there.
    let a = n.send("POST", "/ledger/entries", &[("idempotency-key", "entry-1")], b"12");
    assert_eq!((a.status, a.header("x-path")), (200, vec!["/entries"]));
    let (_, listed) = n.json("GET", "/v1/invocations?book=5", b"");
    assert_eq!(listed["invocations"].as_array().map(Vec::len), Some(1), "{listed}");

    // A route another function holds, the gateway's own paths, a function of the handle
    // world: refused.
    let (status, v) = n.json("PUT", "/v1/functions/other?routes=%2Fapi", &guest("http_probe"));
    assert_eq!((status, v["error"]["code"].as_str()), (409, Some("conflict")), "{v}");
    let (status, _) = n.json("PUT", "/v1/functions/other?routes=%2Fv1%2Fthings", &guest("http_probe"));
    assert_eq!(status, 400);
    let (status, _) = n.json("PUT", "/v1/functions/hello?routes=%2Fhello", &guest("hello"));
    assert_eq!(status, 400);
    // A redeploy of the holder may keep its routes; a deleted function's are free.
    n.deploy("web", &guest("http_probe"), "?routes=%2Fapi");
    assert_eq!(n.request("DELETE", "/v1/functions/web", b"").0, 204);
    n.deploy("other", &guest("http_probe"), "?routes=%2Fapi");
    assert_eq!(n.send("GET", "/api/x", &[], b"").header("x-path"), vec!["/x"]);
}

/// A schedule's tick and `tally invoke` make requests of an HTTP function: a method, a
/// path below it and headers.
#[test]
fn schedules_and_the_cli_make_requests_of_http_functions() {
    let (_dir, n) = node();
    n.deploy("web", &guest("http_probe"), "");
    let definition = serde_json::json!({
        "function": "web",
        "every_ms": 3_600_000,
        "paused": true,
        "request": { "method": "PATCH", "path": "/print/2", "headers": [["x-a", "b"]], "body": "tick" },
    });
    let (status, v) = n.json("PUT", "/v1/schedules/tick", definition.to_string().as_bytes());
    assert_eq!(status, 201, "{v}");
    let (status, v) = n.json("POST", "/v1/schedules/tick/trigger", b"");
    assert_eq!(status, 202, "{v}");
    let id = v["invocation_id"].as_str().expect("an ID").to_string();
    assert_eq!(n.finished(&id, 0)["status"], "succeeded");
    let (_, logs) = n.json("GET", &format!("/v1/logs?id={id}"), b"");
    let lines: Vec<&str> = logs["entries"].as_array().unwrap().iter().map(|e| e["line"].as_str().unwrap()).collect();
    assert_eq!(lines, ["line 0", "line 1", "done"], "{logs}");
    // A request that is not one is refused at once.
    let bad = serde_json::json!({ "function": "web", "every_ms": 1000, "request": { "path": "no-slash" } });
    assert_eq!(n.json("PUT", "/v1/schedules/bad", bad.to_string().as_bytes()).0, 400);

    let tally = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tally"))
            .args(args)
            .env("TALLY_URL", &n.url)
            .output()
            .expect("running tally");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) =
        tally(&["invoke", "web", "--method", "PUT", "--path", "/echo?x=1", "--header", "content-type: text/x", "--data", "hi"]);
    assert!(ok && out.trim() == "hi", "{out} {err}");
    let (ok, _, err) = tally(&["invoke", "web", "--path", "/status/404"]);
    assert!(!ok && err.contains("404"), "{err}");
}

/// A name allowed by the allow-list that resolves to an internal address (a DNS answer
/// pointing at loopback or the private network, as a rebinding attack gives) is refused
/// after resolution, before anything is sent; the node connects only to addresses it
/// checked, so a later answer cannot change that. A redirect is not followed: it reaches
/// the guest, whose next request is checked again. Each refusal is a line of the
/// function's log.
#[test]
fn names_that_resolve_to_internal_addresses_are_refused_and_redirects_reach_the_guest() {
    let up = Upstream::start();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("tally.toml");
    std::fs::write(
        &config,
        "[node]\noutgoing_timeout_ms_max = 1000\n\
         outgoing_hosts = { \"public.test\" = [\"127.0.0.1\"], \"spread.test\" = [\"10.1.2.3\", \"::1\"] }\n",
    )
    .expect("writing the configuration");
    let n = Node::start_with(dir.path().join("data"), &["--config", config.to_str().expect("a UTF-8 path")]);
    let gateway = n.url.strip_prefix("http://").expect("an http URL").to_string();
    // An upstream that takes connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("binding");
    let silent_port = silent.local_addr().expect("an address").port();
    let allowed =
        format!("http://public.test:{0},http://spread.test:{0},http://{gateway},http://127.0.0.1:{silent_port}", up.port);
    n.deploy("web", &guest("http_probe"), &format!("?outbound={}", allowed.replace(':', "%3A").replace('/', "%2F")));
    for host in ["public.test", "spread.test"] {
        let a = n.send("GET", &format!("/fn/web/fetch?to=http%3A%2F%2F{host}%3A{}%2Fx", up.port), &[], b"");
        assert_eq!(a.status, 502, "{host}: {}", a.text());
        assert!(a.text().contains("HttpRequestDenied"), "{host}: {}", a.text());
    }
    assert!(up.seen().is_empty(), "nothing was sent: {:?}", up.seen());
    let (_, logs) = n.json("GET", "/v1/logs?function=web", b"");
    let lines: Vec<&str> = logs["entries"].as_array().unwrap().iter().filter_map(|e| e["line"].as_str()).collect();
    assert!(lines.iter().any(|l| l.contains("public.test") && l.contains("denied")), "{lines:?}");

    // The function asks the node itself (allowed by its address) for a redirect: the
    // guest gets the 302, nothing follows it.
    let to = format!("http%3A%2F%2F{}%2Ffn%2Fweb%2Fstatus%2F302", gateway.replace(':', "%3A"));
    let a = n.send("GET", &format!("/fn/web/fetch?to={to}"), &[], b"");
    assert_eq!(a.status, 302, "{}", a.text());

    // A response over the node's limit (512 KiB by default), and an upstream that does
    // not answer within the time limit: clear errors, each a line of the log.
    let to = format!("http%3A%2F%2F{}%2Ffn%2Fweb%2Fbig%2F{}", gateway.replace(':', "%3A"), 600 << 10);
    let a = n.send("GET", &format!("/fn/web/fetch?to={to}"), &[], b"");
    assert!(a.status == 502 && a.text().contains("HttpResponseBodySize"), "{} {}", a.status, a.text());
    let started = std::time::Instant::now();
    let a = n.send("GET", &format!("/fn/web/fetch?to=http%3A%2F%2F127.0.0.1%3A{silent_port}%2Fslow"), &[], b"");
    assert!(a.status == 502 && a.text().contains("Timeout"), "{} {}", a.status, a.text());
    assert!(started.elapsed() < Duration::from_secs(5), "the time limit held: {:?}", started.elapsed());
    let (_, logs) = n.json("GET", "/v1/logs?function=web", b"");
    let lines: Vec<&str> = logs["entries"].as_array().unwrap().iter().filter_map(|e| e["line"].as_str()).collect();
    assert!(lines.iter().any(|l| l.contains("response-too-large")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("timeout")), "{lines:?}");
    drop(silent);
}
