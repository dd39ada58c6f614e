//! The gateway's boundary, end to end over HTTP: each route's body limit (enforced
//! before the body is read, and while a chunked body streams in), the byte budget of a
//! records page, the refusal of platform books, and JSON errors for every rejection.
//! Over-limit requests go over a raw TCP connection, so a test can announce a body it
//! never sends: a gateway that waited for it would not answer.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{guest, node, node_with, Node};
use serde_json::Value;

/// How long a raw request waits for its answer. The gateway answers these requests at
/// once; only a gateway that waits for a body that never comes runs into this.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// A platform book: its top bit is set.
const PLATFORM_BOOK: u64 = (1 << 63) | 1;

/// Sends `head` (request line and headers, without the final blank line) and then as
/// much of `body` as the gateway takes, over a new connection, and reads one response.
/// Panics when no response comes within [`ANSWER_WITHIN`].
fn raw(n: &Node, head: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let addr = n.url.strip_prefix("http://").expect("an http URL");
    let mut stream = TcpStream::connect(addr).expect("connecting to the gateway");
    stream.set_read_timeout(Some(ANSWER_WITHIN)).expect("a read timeout");
    stream.write_all(format!("{head}\r\nHost: {addr}\r\n\r\n").as_bytes()).expect("sending the head");
    // The gateway may answer and close before it has taken the whole body; what it
    // answered is still there to read.
    let _ = stream.write_all(body);

    let deadline = Instant::now() + ANSWER_WITHIN;
    let mut response = Vec::new();
    let mut buf = [0u8; 64 << 10];
    let (status, header_len, content_length) = loop {
        if let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&response[..end]).to_string();
            let status = head.split(' ').nth(1).and_then(|s| s.parse::<u16>().ok()).expect("a status line");
            let content_length = head.lines().find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse::<usize>().expect("a length"))
            });
            break (status, end + 4, content_length);
        }
        assert!(Instant::now() < deadline, "{head}: no answer within {ANSWER_WITHIN:?}");
        match stream.read(&mut buf) {
            Ok(0) => panic!("{head}: the connection closed without an answer: {:?}", String::from_utf8_lossy(&response)),
            Ok(k) => response.extend_from_slice(&buf[..k]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("{head}: no answer within {ANSWER_WITHIN:?}; the gateway is waiting for the body")
            }
            Err(e) => panic!("{head}: reading the answer: {e}"),
        }
    };
    let content_length = content_length.expect("a Content-Length on the answer");
    while response.len() < header_len + content_length {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => response.extend_from_slice(&buf[..k]),
            Err(e) => panic!("{head}: reading the answer's body: {e}"),
        }
    }
    (status, response[header_len..].to_vec())
}

/// `chunks` chunks of `chunk` bytes in chunked encoding, without the last (empty)
/// chunk: the body has not ended when the gateway must answer.
fn unfinished_chunks(chunks: usize, chunk: usize) -> Vec<u8> {
    let mut body = Vec::new();
    for _ in 0..chunks {
        body.extend_from_slice(format!("{chunk:x}\r\n").as_bytes());
        body.extend(std::iter::repeat_n(b'x', chunk));
        body.extend_from_slice(b"\r\n");
    }
    body
}

#[test]
fn bodies_over_their_route_limit_are_refused_before_they_are_read() {
    let (_dir, n) = node_with(&["--component-bytes-max", "131072"]);
    n.deploy("faulty", &guest("faulty"), "?request_bytes_max=4096");

    // Content-Length over the limit: answered at once, though no byte of the body came.
    let cases = [
        ("PUT /v1/functions/big HTTP/1.1", 1 << 20, 413, "too_large", "131072"),
        ("POST /v1/functions/faulty/invoke HTTP/1.1", 1 << 20, 413, "too_large", "4096"),
        ("POST /v1/functions/faulty/invoke?async=true HTTP/1.1", 8192, 413, "too_large", "4096"),
        ("POST /v1/functions/nobody/invoke HTTP/1.1", 1 << 20, 404, "function_not_found", "nobody"),
        ("PUT /v1/books/1/tables/accounts HTTP/1.1", 1 << 20, 413, "too_large", "4096"),
        ("GET /v1/functions HTTP/1.1", 10, 413, "too_large", "limit of 0 bytes"),
        ("GET /v1/books/1/records HTTP/1.1", 10, 413, "too_large", "limit of 0 bytes"),
        ("DELETE /v1/functions/faulty HTTP/1.1", 10, 413, "too_large", "limit of 0 bytes"),
    ];
    for (line, length, status, code, in_message) in cases {
        let head = format!("{line}\r\nContent-Length: {length}");
        let message = n.expect_error(raw(&n, &head, b""), status, code);
        assert!(message.contains(in_message), "{line}: {message:?} names {in_message}");
    }

    // The same through an ordinary client that sends the whole body.
    n.expect_error(n.request("PUT", "/v1/books/1/tables/accounts", &[b' '; 8192]), 413, "too_large");
    n.expect_error(n.request("POST", "/v1/functions/faulty/invoke", &[b'x'; 8192]), 413, "too_large");

    // Within the limits everything works as before, up to the limit itself.
    let echo = format!("echo:{}", "y".repeat(4096 - 5));
    assert_eq!(n.invoke_ok("faulty", 0, &echo).len(), 4096 - 5);
    n.deploy("hello", &guest("hello"), "");
    let (status, _) = n.request("GET", "/v1/functions/faulty", b"");
    assert_eq!(status, 200);
    let (status, v) = n.json("PUT", "/v1/books/1/tables/accounts", br#"{"protocol": "auto"}"#);
    assert_eq!(status, 202, "{v}");
}

#[test]
fn chunked_bodies_are_cut_off_at_the_limit_while_streaming() {
    let (_dir, n) = node_with(&["--component-bytes-max", "131072"]);
    n.deploy("faulty", &guest("faulty"), "?request_bytes_max=4096");
    // No Content-Length, and the body never ends: the gateway answers once it has
    // seen more than the limit.
    let cases = [
        ("PUT /v1/functions/big HTTP/1.1", 160, "131072"),
        ("POST /v1/functions/faulty/invoke HTTP/1.1", 8, "4096"),
        ("PUT /v1/books/1/tables/accounts HTTP/1.1", 8, "4096"),
        ("GET /v1/functions HTTP/1.1", 1, "limit of 0 bytes"),
    ];
    for (line, kib, limit) in cases {
        let head = format!("{line}\r\nTransfer-Encoding: chunked");
        let message = n.expect_error(raw(&n, &head, &unfinished_chunks(kib, 1024)), 413, "too_large");
        assert!(message.contains(limit), "{line}: {message:?} names the limit {limit}");
    }
    // A chunked body within the limit is read whole.
    let mut body = b"b\r\necho:chunky\r\n".to_vec();
    body.extend_from_slice(b"0\r\n\r\n");
    let (status, output) = raw(&n, "POST /v1/functions/faulty/invoke HTTP/1.1\r\nTransfer-Encoding: chunked", &body);
    assert_eq!((status, output.as_slice()), (200, &b"chunky"[..]));
}

/// Every record of `tag` in `book`, page by page; returns the records and the size
/// of each page's body.
fn all_records(n: &Node, book: u64, tag: &str) -> (Vec<Value>, Vec<(usize, usize)>) {
    let (mut records, mut pages) = (Vec::new(), Vec::new());
    let mut from = 0;
    loop {
        let (status, body) = n.request("GET", &format!("/v1/books/{book}/records?tag={tag}&from={from}&limit=1000"), b"");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let page: Value = serde_json::from_slice(&body).expect("a JSON page");
        let got = page["records"].as_array().expect("records").clone();
        assert!(!got.is_empty() || page["next"].is_null(), "a page with a next page has a record: {page}");
        pages.push((body.len(), got.len()));
        records.extend(got);
        match page["next"].as_u64() {
            Some(next) => from = next,
            None => return (records, pages),
        }
    }
}

#[test]
fn record_pages_are_bounded_in_bytes() {
    const PAGE_BYTES_MAX: usize = 4 << 20;
    let (_dir, n) = node();
    n.deploy("faulty", &guest("faulty"), "");

    // Six records of 600 KiB: 1.4 MiB each as text and base64, 8.4 MiB in all, far
    // under the count limit.
    let data = "x".repeat(600 << 10);
    let seqnums: Vec<u64> =
        (0..6).map(|_| n.invoke_ok("faulty", 5, &format!("tag:big:{data}")).trim().parse().expect("a seqnum")).collect();
    let (records, pages) = all_records(&n, 5, "big");
    assert_eq!(records.iter().map(|r| r["seqnum"].as_u64().expect("a seqnum")).collect::<Vec<_>>(), seqnums);
    assert!(records.iter().all(|r| r["data"]["text"].as_str() == Some(data.as_str())));
    assert!(pages.len() > 1, "more than one page: {pages:?}");
    assert!(pages.iter().all(|&(bytes, _)| bytes <= PAGE_BYTES_MAX), "every page within the budget: {pages:?}");

    // A record larger than the budget on its own (control characters are escaped as
    // \u0001, six bytes each) still comes, one per page.
    let control = "\u{1}".repeat(800 << 10);
    for _ in 0..2 {
        n.invoke_ok("faulty", 5, &format!("tag:control:{control}"));
    }
    let (records, pages) = all_records(&n, 5, "control");
    assert_eq!(records.len(), 2);
    assert!(pages[..2].iter().all(|&(bytes, count)| count == 1 && bytes > PAGE_BYTES_MAX), "{pages:?}");

    // A page of no records would never move on.
    n.expect_error(n.request("GET", "/v1/books/5/records?limit=0", b""), 400, "invalid_argument");
}

#[test]
fn platform_books_are_refused_on_every_route() {
    let (_dir, n) = node();
    n.deploy("hello", &guest("hello"), "");
    let b = PLATFORM_BOOK;
    let requests: [(&str, String, &[u8]); 6] = [
        ("GET", format!("/v1/books/{b}/records"), b""),
        ("GET", format!("/v1/books/{b}/tables/accounts"), b""),
        ("PUT", format!("/v1/books/{b}/tables/accounts"), br#"{"protocol": "auto"}"#),
        ("GET", format!("/v1/invocations/0123?book={b}"), b""),
        ("POST", format!("/v1/functions/hello/invoke?book={b}"), b"hi"),
        ("POST", format!("/v1/functions/hello/invoke?book={b}&async=true"), b"hi"),
    ];
    for (method, path, body) in requests {
        let message = n.expect_error(n.request(method, &path, body), 400, "invalid_argument");
        assert!(message.contains("reserved for the platform"), "{method} {path}: {message}");
    }
    // After all of that the node serves as before.
    assert_eq!(n.invoke_ok("hello", 0, "still here"), "still here");
}

#[test]
fn every_rejection_is_a_json_error() {
    let (_dir, n) = node();
    n.deploy("hello", &guest("hello"), "");
    let cases: [(&str, &str, &[u8], u16, &str); 14] = [
        ("GET", "/v1/books/abc/records", b"", 400, "invalid_argument"),
        ("GET", "/v1/books/1/records?limit=many", b"", 400, "invalid_argument"),
        ("GET", "/v1/books/1/records?colour=red", b"", 400, "invalid_argument"),
        ("GET", "/v1/books/-1/tables/accounts", b"", 400, "invalid_argument"),
        ("PUT", "/v1/books/x/tables/accounts", br#"{"protocol": "auto"}"#, 400, "invalid_argument"),
        ("PUT", "/v1/books/1/tables/accounts", b"protocol=auto", 400, "invalid_argument"),
        ("PUT", "/v1/books/1/tables/accounts", br#"{"protocol": 5}"#, 400, "invalid_argument"),
        ("GET", "/v1/functions/%FF", b"", 400, "invalid_argument"),
        ("PUT", "/v1/functions/hello?timeout_ms=soon", b"", 400, "invalid_argument"),
        ("POST", "/v1/functions/hello/invoke?book=-3", b"x", 400, "invalid_argument"),
        ("GET", "/v1/invocations/0123?book=first", b"", 400, "invalid_argument"),
        ("GET", "/v1/nowhere", b"", 404, "not_found"),
        ("DELETE", "/v1/functions", b"", 405, "method_not_allowed"),
        ("POST", "/v1/books/1/records", b"", 405, "method_not_allowed"),
    ];
    for (method, path, body, status, code) in cases {
        let message = n.expect_error(n.request(method, path, body), status, code);
        assert!(!message.is_empty(), "{method} {path}: the error says why");
    }
}
