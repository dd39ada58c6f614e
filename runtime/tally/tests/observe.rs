//! What a user sees of an invocation's time and trace: the latency breakdown in
//! `Server-Timing` (and kept with the invocation), and traces posted over OTLP/HTTP
//! (protobuf) to a receiver this test runs on 127.0.0.1, which reads them with a decoder
//! of its own into OTLP's JSON shape.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{guest, node, node_with};
use serde_json::{json, Value};

/// `Server-Timing`'s parts, in milliseconds, `total` among them.
fn timing(a: &common::Answer) -> BTreeMap<String, f64> {
    let header = a.header("server-timing");
    let text = header.first().unwrap_or_else(|| panic!("no Server-Timing (status {})", a.status));
    text.split(',')
        .map(|part| {
            let (name, dur) = part.trim().split_once(";dur=").unwrap_or_else(|| panic!("a part {part:?} in {text:?}"));
            (name.to_string(), dur.parse::<f64>().unwrap_or_else(|_| panic!("a duration in {part:?}")))
        })
        .collect()
}

fn part(t: &BTreeMap<String, f64>, name: &str) -> f64 {
    t.get(name).copied().unwrap_or(0.0)
}

/// The parts add up to the total within 5% (and a rounding of each to a microsecond).
fn assert_adds_up(t: &BTreeMap<String, f64>) {
    let total = part(t, "total");
    let sum: f64 = t.iter().filter(|(n, _)| *n != "total").map(|(_, ms)| ms).sum();
    assert!((total - sum).abs() <= total * 0.05 + 0.02 * t.len() as f64, "parts {sum} ms of {total} ms: {t:?}");
}

#[test]
fn a_spinning_guest_is_guest_time_and_the_parts_add_up_to_the_wall_time() {
    let (_dir, n) = node();
    n.deploy("probe", &guest("probe"), "");
    // The first invocation compiles nothing (deploy did) but warms the instance pool.
    n.invoke_ok("probe", 1, "spin 1");
    for _ in 0..3 {
        let a = n.send("POST", "/v1/functions/probe/invoke?book=1", &[], b"spin 50");
        assert_eq!((a.status, a.text().as_str()), (200, "spun"));
        let t = timing(&a);
        assert!(part(&t, "guest") >= 50.0, "{t:?}");
        // Small beside the guest's 50 ms: a bound in proportion, since a loaded machine
        // (the test command on 2 cores) delays a thread by a few ms now and then.
        assert!(part(&t, "platform") < part(&t, "guest") / 5.0, "{t:?}");
        assert_adds_up(&t);
        assert_eq!(a.header("tally-trace-id")[0].len(), 32);
        assert!(a.header("traceresponse").is_empty(), "only for a caller that sent a traceparent");
    }
    let metrics = n.send("GET", "/metrics", &[], b"").text();
    let guest_count = metrics
        .lines()
        .find_map(|l| l.strip_prefix("tally_invocation_part_seconds_count{part=\"guest\"} "))
        .and_then(|v| v.parse::<u64>().ok())
        .expect("the guest part's histogram");
    assert!(guest_count >= 4, "{guest_count}");
    assert!(!metrics.contains("invocation_id="), "no IDs as labels");
}

#[test]
fn a_slow_fsync_is_log_time() {
    // nextest runs each test in a process of its own: the variable reaches this node only.
    std::env::set_var("TALLY_TEST_FSYNC_DELAY_MS", "40");
    let (_dir, n) = node();
    n.deploy("chain", &guest("chain"), "");
    let a = n.send("POST", "/v1/functions/chain/invoke?book=1", &[("idempotency-key", "slow")], b"x");
    assert_eq!((a.status, a.text().as_str()), (200, "saw:x"));
    let t = timing(&a);
    // The Init, the append, the call's child and the result each wait for a sync.
    assert!(part(&t, "log") >= 80.0, "{t:?}");
    assert!(part(&t, "guest") < part(&t, "log"), "{t:?}");
    assert!(part(&t, "children") > 0.0, "{t:?}");
    assert_adds_up(&t);
}

/// An OTLP/HTTP receiver on 127.0.0.1: keeps every span posted to `/v1/traces`.
struct Receiver {
    port: u16,
    spans: Arc<Mutex<Vec<Value>>>,
    connections: Arc<Mutex<u64>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding");
        let port = listener.local_addr().expect("an address").port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(Mutex::new(0));
        let (kept, seen) = (spans.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                *seen.lock().expect("lock") += 1;
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut reader = BufReader::new(stream.try_clone().expect("a clone"));
                let (mut line, mut length, mut path) = (String::new(), 0usize, String::new());
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                path.push_str(line.split(' ').nth(1).unwrap_or(""));
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    continue;
                }
                assert_eq!(path, "/v1/traces");
                kept.lock().expect("lock").extend(otlp_spans(&body));
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}");
            }
        });
        Receiver { port, spans, connections }
    }

    /// The spans of trace `trace` once `done` holds of them (within 10 s).
    fn trace(&self, trace: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let spans: Vec<Value> = self.spans.lock().expect("lock").iter().filter(|s| s["traceId"] == trace).cloned().collect();
            if done(&spans) {
                return spans;
            }
            assert!(Instant::now() < deadline, "trace {trace} never completed: {spans:#?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Receiver {
    /// A span that links to trace `first` (within 10 s).
    fn trace_linking(&self, first: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let found = self
                .spans
                .lock()
                .expect("lock")
                .iter()
                .find(|s| s["links"].as_array().is_some_and(|links| links.iter().any(|l| l["traceId"] == first)))
                .cloned();
            if let Some(span) = found {
                return span;
            }
            assert!(Instant::now() < deadline, "no span links to trace {first}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A protobuf message's fields in order: (number, a varint or fixed64, or bytes).
fn fields(mut b: &[u8]) -> Vec<(u64, Result<u64, &[u8]>)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0;
        for shift in (0..64).step_by(7) {
            let (byte, rest) = b.split_first().expect("a varint");
            *b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if *byte < 0x80 {
                break;
            }
        }
        v
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        let value = match key & 7 {
            0 => Ok(varint(&mut b)),
            1 => {
                let (v, rest) = b.split_at(8);
                b = rest;
                Ok(u64::from_le_bytes(v.try_into().expect("8 bytes")))
            }
            2 => {
                let n = varint(&mut b) as usize;
                let (v, rest) = b.split_at(n);
                b = rest;
                Err(v)
            }
            w => panic!("wire type {w}"),
        };
        out.push((key >> 3, value));
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans of an OTLP `ExportTraceServiceRequest` (protobuf), each in OTLP/JSON's
/// shape: `resource_spans` 1 { `resource` 1 { `attributes` 1 }, `scope_spans` 2
/// { `spans` 2 } }.
fn otlp_spans(body: &[u8]) -> Vec<Value> {
    type Fields<'a> = [(u64, Result<u64, &'a [u8]>)];
    fn field<'a>(f: &Fields<'a>, n: u64) -> Vec<&'a [u8]> {
        f.iter().filter(|(k, _)| *k == n).map(|(_, v)| v.expect_err("bytes")).collect()
    }
    fn number(f: &Fields, n: u64) -> Option<u64> {
        f.iter().find(|(k, _)| *k == n).map(|(_, v)| v.expect("a number"))
    }
    fn text(b: &[u8]) -> String {
        String::from_utf8(b.to_vec()).expect("UTF-8")
    }
    // AnyValue: string_value 1, int_value 3.
    fn any(v: &[u8]) -> Value {
        let v = fields(v);
        match (field(&v, 1).first(), number(&v, 3)) {
            (Some(s), _) => json!({"stringValue": text(s)}),
            (None, Some(n)) => json!({"intValue": n.to_string()}),
            _ => panic!("an AnyValue of neither a string nor an int"),
        }
    }
    fn key_value(kv: &[u8]) -> Value {
        let kv = fields(kv);
        json!({"key": text(field(&kv, 1)[0]), "value": any(field(&kv, 2)[0])})
    }
    let mut out = Vec::new();
    for rs in field(&fields(body), 1) {
        let rs = fields(rs);
        let resource = fields(field(&rs, 1)[0]);
        assert_eq!(key_value(field(&resource, 1)[0])["value"]["stringValue"], "tally");
        for ss in field(&rs, 2) {
            for s in field(&fields(ss), 2) {
                let s = fields(s);
                let mut span = json!({
                    "traceId": hex(field(&s, 1)[0]),
                    "spanId": hex(field(&s, 2)[0]),
                    "name": text(field(&s, 5)[0]),
                    "kind": number(&s, 6).unwrap_or(0),
                    "startTimeUnixNano": number(&s, 7).expect("a start").to_string(),
                    "endTimeUnixNano": number(&s, 8).expect("an end").to_string(),
                    "attributes": field(&s, 9).into_iter().map(key_value).collect::<Vec<_>>(),
                });
                if let Some(p) = field(&s, 4).first() {
                    span["parentSpanId"] = hex(p).into();
                }
                let links: Vec<Value> = field(&s, 13)
                    .into_iter()
                    .map(|l| {
                        let l = fields(l);
                        json!({"traceId": hex(field(&l, 1)[0]), "spanId": hex(field(&l, 2)[0])})
                    })
                    .collect();
                if !links.is_empty() {
                    span["links"] = links.into();
                }
                out.push(span);
            }
        }
    }
    out
}

fn names(spans: &[Value]) -> BTreeSet<String> {
    spans.iter().map(|s| s["name"].as_str().unwrap_or("").to_string()).collect()
}

/// Every span's parent is another span of the trace, or `root` for the request's.
fn assert_one_tree(spans: &[Value], root: &str) {
    let ids: BTreeSet<&str> = spans.iter().filter_map(|s| s["spanId"].as_str()).collect();
    assert_eq!(ids.len(), spans.len(), "span IDs are unique");
    for s in spans {
        let parent = s["parentSpanId"].as_str().unwrap_or("");
        assert!(ids.contains(parent) || parent == root, "{} has parent {parent:?}, not in the trace", s["name"]);
        assert!(s["endTimeUnixNano"].as_str().unwrap() >= s["startTimeUnixNano"].as_str().unwrap());
    }
}

#[test]
fn a_transfer_sent_with_a_traceparent_is_one_trace_of_every_part() {
    let receiver = Receiver::start();
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let (_dir, n) = node_with(&["--otlp-endpoint", &endpoint, "--crash-injection", "true"]);
    n.deploy("bank", &guest("bank"), "");
    n.deploy("chain", &guest("chain"), "");
    n.invoke_ok("bank", 1, "open alice 100");
    n.invoke_ok("bank", 1, "open bob 0");

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let header = format!("00-{trace}-{parent}-01");
    let a = n.send("POST", "/v1/functions/bank/invoke?book=1", &[("traceparent", &header)], b"transfer alice bob 30");
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("tally-trace-id"), vec![trace]);
    assert!(a.header("traceresponse")[0].starts_with(&format!("00-{trace}-")));
    // The log's own spans come from its engine and storage node, as they finish.
    let spans = receiver.trace(trace, |s| {
        let got = names(s);
        let appended = got.contains("log.append") || got.contains("log.cond_append");
        got.contains("POST /v1/functions/bank/invoke") && appended && got.contains("log.order") && got.contains("log.store")
    });
    let got = names(&spans);
    for want in ["POST /v1/functions/bank/invoke", "queue", "instantiate", "guest", "host-state", "log"] {
        assert!(got.contains(want), "no {want:?} span in {got:?}");
    }
    assert_one_tree(&spans, parent);
    // An append nests under the execution's log wait; its ordering (the metalog) and its
    // storage node's write, group commit and fsync under the append.
    let parent_of = |s: &Value| spans.iter().find(|p| p["spanId"] == s["parentSpanId"]).expect("a parent")["name"].clone();
    for s in &spans {
        match s["name"].as_str().unwrap() {
            "log.append" | "log.cond_append" => assert_eq!(parent_of(s), "log"),
            "log.order" | "log.store" => {
                assert!(matches!(parent_of(s).as_str(), Some("log.append" | "log.cond_append")), "{s}")
            }
            _ => {}
        }
    }
    let request = spans.iter().find(|s| s["name"] == "POST /v1/functions/bank/invoke").expect("the request's span");
    assert_eq!(request["parentSpanId"], parent);
    let attrs: BTreeMap<String, String> = request["attributes"]
        .as_array()
        .expect("attributes")
        .iter()
        .map(|a| (a["key"].as_str().unwrap().to_string(), a["value"]["stringValue"].as_str().unwrap_or("").to_string()))
        .collect();
    assert_eq!(attrs.get("tally.function").map(String::as_str), Some("bank"));
    assert_eq!(attrs.get("tally.book").map(String::as_str), Some("1"));
    assert!(attrs.contains_key("tally.invocation_id") && attrs.contains_key("tally.version"));
    let text = serde_json::to_string(&spans).expect("json");
    assert!(!text.contains("alice") && !text.contains("bob"), "no keys or values in spans: {text}");

    // A child's execution nests under its parent's call.
    let chain_trace = "0af7651916cd43dd8448eb211c80319c";
    let header = format!("00-{chain_trace}-b7ad6b7169203331-01");
    let a = n.send("POST", "/v1/functions/chain/invoke?book=1", &[("traceparent", &header)], b"x");
    assert_eq!(a.text(), "saw:x");
    let spans =
        receiver.trace(chain_trace, |s| names(s).contains("child") && names(s).contains("POST /v1/functions/chain/invoke"));
    assert_one_tree(&spans, "b7ad6b7169203331");
    let child = spans.iter().find(|s| s["name"] == "child").expect("the child's span");
    let call = spans.iter().find(|s| s["spanId"] == child["parentSpanId"]).expect("the child's parent");
    assert_eq!(call["name"], "children");

    // A crash, and the execution that finishes the invocation links to the first trace.
    let first = "11111111111111111111111111111111";
    let crashed = n.send(
        "POST",
        "/v1/functions/chain/invoke?book=1",
        &[("traceparent", &format!("00-{first}-2222222222222222-01")), ("idempotency-key", "k"), ("tally-crash-after", "1")],
        b"y",
    );
    assert!(crashed.status >= 500, "{}", crashed.text());
    let retried = common::until_ok(|| n.url.clone(), "/v1/functions/chain/invoke?book=1", "y", "k", Duration::from_millis(100));
    assert_eq!(retried, "saw:y");
    let linked = receiver.trace_linking(first);
    assert_ne!(linked["traceId"], first, "the re-execution is a trace of its own, linked to the first");
}

#[test]
fn a_malformed_traceparent_is_ignored_and_without_an_endpoint_nothing_connects() {
    let receiver = Receiver::start();
    let (_dir, n) = node();
    n.deploy("probe", &guest("probe"), "");
    for bad in ["garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-xyz-abc-01"] {
        let a = n.send("POST", "/v1/functions/probe/invoke?book=1", &[("traceparent", bad)], b"spin 1");
        assert_eq!(a.status, 200, "{bad}: {}", a.text());
        let id = a.header("tally-trace-id")[0].to_string();
        assert!(id.len() == 32 && id != "00000000000000000000000000000000" && !bad.contains(&id), "{bad}: {id}");
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(*receiver.connections.lock().expect("lock"), 0);
}
