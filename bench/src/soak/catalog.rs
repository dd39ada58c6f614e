//! What each kind of hostile client sends, and the answer each request is documented
//! to get: the gateway's module docs and `docs/security.md` for Tally's own refusals
//! (401 unauthenticated, 403 forbidden, 400 invalid_argument, 413 too_large, 429 busy,
//! 500 memory_limit or trap, 504 timeout), hyper's for what never reaches Tally (a
//! head over its buffer: 431; a malformed request: 400 or a closed connection).
//!
//! Requests that name a book use the hostile book, whose state nothing checks, except
//! the ones that must be refused: those name the sentinel book, whose counter must
//! still be 0 at the end, so that a refusal that was not one shows.

use std::time::Duration;

use super::hostile::{Expect, Kind, Probe, Send};
use super::wire::request;
use super::{Books, Tokens};

/// The pause between two probes of a kind: a few dozen requests a second each.
const PACE: Duration = Duration::from_millis(20);

/// The header line of a bearer token.
pub(super) fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

fn probe(name: impl Into<String>, bytes: Vec<u8>, expect: Expect) -> Probe {
    Probe { name: name.into(), send: Send::Whole(bytes), expect }
}

/// A depth of nested calls well past `call_depth_max`: the steps guest's script
/// `call steps script call steps ...` calls itself once per level.
const RECURSION_DEPTH: usize = 64;

/// Every kind but the flood.
pub(crate) fn kinds(tokens: &Tokens, books: &Books) -> Vec<Kind> {
    let kind = |name, probes, pace, tasks| Kind { name, probes, pace, tasks };
    vec![
        kind("auth", auth(tokens, books), PACE, 1),
        kind("huge-headers", huge_headers(tokens, books), PACE, 1),
        kind("malformed", malformed(tokens, books), PACE, 1),
        kind("oversized", oversized(tokens, books), PACE, 1),
        kind("crafted", crafted(tokens, books), PACE, 1),
        kind("guest-faults", guest_faults(tokens, books), Duration::from_millis(200), 1),
        kind("spin", spin(tokens, books), Duration::from_millis(500), 1),
        kind("recursion", recursion(tokens, books), Duration::from_millis(200), 1),
        kind("slow-body", slow_body(tokens, books), PACE, 2),
    ]
}

/// Tokens that are missing, malformed, unknown, revoked, or of the wrong role or scope:
/// 401 or 403, and the sentinel's counter untouched.
fn auth(tokens: &Tokens, books: &Books) -> Vec<Probe> {
    let target = format!("/v1/functions/counter/invoke?book={}", books.sentinel);
    let invoke = |headers: &str| request("POST", &target, headers, b"incr");
    let unauthenticated = || Expect::status(&[401]).code("unauthenticated");
    let forbidden = || Expect::status(&[403]).code("forbidden");
    let mut non_text = b"POST ".to_vec();
    non_text.extend_from_slice(target.as_bytes());
    non_text
        .extend_from_slice(b" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \xff\xfe\r\nContent-Length: 4\r\n\r\nincr");
    let unknown = format!("tally_0123456789abcdef_{}", "0".repeat(64));
    vec![
        probe("no token", invoke(""), unauthenticated()),
        probe("bearer nonsense", invoke("Authorization: Bearer nonsense\r\n"), unauthenticated()),
        probe("basic scheme", invoke("Authorization: Basic dXNlcjpwYXNz\r\n"), unauthenticated()),
        probe("empty bearer", invoke("Authorization: Bearer\r\n"), unauthenticated()),
        probe("unknown token", invoke(&bearer(&unknown)), unauthenticated()),
        probe("revoked token", invoke(&bearer(&tokens.revoked)), unauthenticated()),
        probe("non-text header", non_text, unauthenticated()),
        probe("read role invokes", invoke(&bearer(&tokens.reader)), forbidden()),
        probe("token of another book", invoke(&bearer(&tokens.honest[0])), forbidden()),
        probe(
            "token of another function",
            request("POST", &format!("/v1/functions/echo/invoke?book={}", books.flood), &bearer(&tokens.flood), b"hi"),
            forbidden(),
        ),
        probe("invoke role lists tokens", request("GET", "/v1/tokens", &bearer(&tokens.hostile), b""), forbidden()),
        probe("invoke role deploys", request("PUT", "/v1/functions/counter", &bearer(&tokens.hostile), b"\0asm"), forbidden()),
        probe("read role deletes", request("DELETE", "/v1/functions/counter", &bearer(&tokens.reader), b""), forbidden()),
    ]
}

/// Heads past hyper's buffer (about 400 KiB) or header count (100): 431 or a closed
/// connection; a large head within them is served.
fn huge_headers(tokens: &Tokens, books: &Books) -> Vec<Probe> {
    let target = format!("/v1/functions/echo/invoke?book={}", books.hostile);
    let auth = bearer(&tokens.hostile);
    let many: String = (0..1000).map(|i| format!("X-H{i}: v\r\n")).collect();
    let long_target = format!("{target}&pad={}", "a".repeat(1 << 20));
    vec![
        probe(
            "1 MiB header",
            request("POST", &target, &format!("{auth}X-Pad: {}\r\n", "a".repeat(1 << 20)), b"hi"),
            Expect::status(&[431]).or_closed(),
        ),
        probe("1000 headers", request("POST", &target, &format!("{auth}{many}"), b"hi"), Expect::status(&[431]).or_closed()),
        probe("1 MiB target", request("POST", &long_target, &auth, b"hi"), Expect::status(&[414, 431]).or_closed()),
        probe(
            "64 KiB header",
            request("POST", &target, &format!("{auth}X-Pad: {}\r\n", "a".repeat(64 << 10)), b"hi"),
            Expect::status(&[200]).body_has("hi"),
        ),
    ]
}

/// Requests hyper cannot parse, or whose body breaks off: 400 or a closed connection.
fn malformed(tokens: &Tokens, books: &Books) -> Vec<Probe> {
    let target = format!("/v1/functions/echo/invoke?book={}", books.hostile);
    let auth = bearer(&tokens.hostile);
    let bad = || Expect::status(&[400]).or_closed();
    let head = |extra: &str| format!("POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}{extra}\r\n").into_bytes();
    let with = |mut head: Vec<u8>, body: &[u8]| {
        head.extend_from_slice(body);
        head
    };
    let chunked = "Transfer-Encoding: chunked\r\n";
    let truncated = |name: &str, bytes: Vec<u8>| Probe { name: name.into(), send: Send::ThenHalfClose(bytes), expect: bad() };
    vec![
        probe("a TLS hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n".to_vec(), bad()),
        probe("a garbage line", b"HELLO\r\n\r\n".to_vec(), bad()),
        probe("no version", b"GET /healthz\r\n\r\n".to_vec(), bad()),
        probe("HTTP/9.9", b"GET /healthz HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n".to_vec(), Expect::status(&[400, 505]).or_closed()),
        probe("a space in a header name", b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header: v\r\n\r\n".to_vec(), bad()),
        probe("a NUL in a header", b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\0b\r\n\r\n".to_vec(), bad()),
        probe("a chunk size that is no number", with(head(chunked), b"zz\r\nhello\r\n0\r\n\r\n"), bad()),
        probe("a chunk size past u64", with(head(chunked), b"fffffffffffffffffffff\r\nhello\r\n0\r\n\r\n"), bad()),
        probe("two content lengths", with(head("Content-Length: 4\r\nContent-Length: 5\r\n"), b"hello"), bad()),
        probe("a content length that is no number", with(head("Content-Length: abc\r\n"), b"hello"), bad()),
        probe("a content length past u64", with(head("Content-Length: 18446744073709551616\r\n"), b"hi"), bad()),
        probe(
            "a content length and chunks",
            with(head(&format!("Content-Length: 7\r\n{chunked}")), b"2\r\nhi\r\n0\r\n\r\n"),
            Expect::status(&[200, 400]).or_closed(),
        ),
        truncated("a body cut short", with(head("Content-Length: 100\r\n"), b"0123456789")),
        truncated("chunks cut short", with(head(chunked), b"5\r\nhel")),
        truncated("a head cut short", format!("POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le").into_bytes()),
        probe("an unknown method", b"FOO /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_vec(), Expect::status(&[405])),
        probe("an unknown route", request("GET", "/v2/nothing", &auth, b""), Expect::status(&[404])),
    ]
}

/// Bodies over the route's limit: 413, before the body is read.
fn oversized(tokens: &Tokens, books: &Books) -> Vec<Probe> {
    let auth = bearer(&tokens.hostile);
    let counter = format!("/v1/functions/counter/invoke?book={}", books.hostile);
    let echo = format!("/v1/functions/echo/invoke?book={}", books.hostile);
    let too_large = || Expect::status(&[413]).code("too_large");
    let length = |target: &str, length: &str, extra: &str| {
        format!("POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Length: {length}\r\n{extra}\r\n").into_bytes()
    };
    let mut chunks = format!("POST {echo} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Transfer-Encoding: chunked\r\n\r\n").into_bytes();
    for _ in 0..8 {
        chunks.extend_from_slice(format!("400\r\n{}\r\n", "x".repeat(1024)).as_bytes());
    }
    chunks.extend_from_slice(b"0\r\n\r\n");
    vec![
        probe("7 MiB announced to counter (6 MiB)", length(&counter, "7340032", ""), too_large()),
        probe("7 MiB announced, expecting 100-continue", length(&counter, "7340032", "Expect: 100-continue\r\n"), too_large()),
        probe("8 KiB chunked to echo (4 KiB)", chunks, too_large()),
        probe("5000 bytes sent to echo (4 KiB)", request("POST", &echo, &auth, &[b'x'; 5000]), too_large()),
        // hyper takes a length this close to u64::MAX for a head too large.
        probe("u64::MAX announced", length(&echo, "18446744073709551615", ""), Expect::status(&[413, 431])),
    ]
}

/// Crafted keys, tags, books, positions, names and IDs: the documented 4xx for what is
/// refused (400, or 404 for an unknown function), and the ordinary answer for what is
/// harmless.
fn crafted(tokens: &Tokens, books: &Books) -> Vec<Probe> {
    let h = books.hostile;
    let auth = bearer(&tokens.hostile);
    let read = bearer(&tokens.reader);
    let echo = |query: &str, headers: &str| {
        request("POST", &format!("/v1/functions/echo/invoke?book={h}{query}"), &format!("{auth}{headers}"), b"hi")
    };
    let records = |path: &str| request("GET", path, &read, b"");
    let invalid = || Expect::status(&[400]).code("invalid_argument");
    let echoed = || Expect::status(&[200]).body_has("hi");
    let listed = || Expect::status(&[200]).body_has("\"records\"");
    let unknown_function = || Expect::status(&[400, 404]);
    let long = "k".repeat(10 << 10);
    let mut non_ascii_key = format!("POST /v1/functions/echo/invoke?book={h} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}").into_bytes();
    non_ascii_key.extend_from_slice(b"Idempotency-Key: \xc3\xa9\r\nContent-Length: 2\r\n\r\nhi");
    vec![
        // Invocation keys (`?key=`): any 1 to 256 bytes.
        probe("key with separators", echo("&key=a%2Fb%3Ac%2F..%2Fd%3Be", ""), echoed()),
        probe("key of a NUL", echo("&key=%00", ""), echoed()),
        probe("key not UTF-8", echo("&key=%FF%FE", ""), Expect::status(&[200, 400])),
        probe("key of 10 KiB", echo(&format!("&key={long}"), ""), invalid()),
        probe("empty key", echo("&key=", ""), invalid()),
        probe("shared without a key", echo("&shared=true", ""), invalid()),
        // Idempotency keys: 1 to 256 printable ASCII characters.
        probe("idempotency key with separators", echo("", "Idempotency-Key: a/b:c;d=e,f\r\n"), echoed()),
        probe("idempotency key %00", echo("", "Idempotency-Key: %00\r\n"), echoed()),
        probe("idempotency key of 10 KiB", echo("", &format!("Idempotency-Key: {long}\r\n")), invalid()),
        probe("idempotency key of 257 bytes", echo("", &format!("Idempotency-Key: {}\r\n", "k".repeat(257))), invalid()),
        probe("idempotency key with a space", echo("", "Idempotency-Key: a b\r\n"), invalid()),
        probe("idempotency key not ASCII", non_ascii_key, invalid()),
        // Tags of a records listing: numbers, names; reserved ones (top bit) refused.
        probe("reserved tag", records(&format!("/v1/books/{h}/records?tag=0x8000000000000001")), invalid()),
        probe("tag u64::MAX", records(&format!("/v1/books/{h}/records?tag=18446744073709551615")), invalid()),
        probe("tag past u64 (a name)", records(&format!("/v1/books/{h}/records?tag=99999999999999999999999")), listed()),
        probe("tag of a 10 KiB name", records(&format!("/v1/books/{h}/records?tag={long}")), listed()),
        probe("tag of a NUL", records(&format!("/v1/books/{h}/records?tag=%00")), listed()),
        probe("records from u64::MAX", records(&format!("/v1/books/{h}/records?from=18446744073709551615")), listed()),
        probe("records limit 0", records(&format!("/v1/books/{h}/records?limit=0")), invalid()),
        probe("records limit past u64", records(&format!("/v1/books/{h}/records?limit=99999999999999999999")), invalid()),
        probe("records unknown parameter", records(&format!("/v1/books/{h}/records?bogus=1")), invalid()),
        // Books: platform books (top bit) and non-numbers refused.
        probe("records of a platform book", records("/v1/books/9223372036854775808/records"), invalid()),
        probe("records of book u64::MAX", records("/v1/books/18446744073709551615/records"), invalid()),
        probe("records of a book past u64", records("/v1/books/18446744073709551616/records"), invalid()),
        probe("records of book -1", records("/v1/books/-1/records"), invalid()),
        probe(
            "invoke on a platform book",
            request("POST", "/v1/functions/echo/invoke?book=9223372036854775808", &auth, b"hi"),
            invalid(),
        ),
        probe(
            "invoke on a book past u64",
            request("POST", "/v1/functions/echo/invoke?book=18446744073709551616", &auth, b"hi"),
            invalid(),
        ),
        probe("book named twice", echo("&book=2", ""), invalid()),
        probe("invoke unknown parameter", echo("&bogus=1", ""), invalid()),
        probe("a delay of u64::MAX ms", echo("&async=true&delay_ms=18446744073709551615", ""), Expect::status(&[202, 400])),
        // Positions (Tally-Position): malformed ones refused; any index of term 0 is
        // older than every position of the cluster's first term. Positions past the
        // log's end have a phase of their own (`positions.rs`): they wait.
        probe("position with a term past u16", echo("", "Tally-Position: 70000.1\r\n"), invalid()),
        probe("position of garbage", echo("", "Tally-Position: x.y,1\r\n"), invalid()),
        probe("position of term 0", echo("", "Tally-Position: 0.18446744073709551615\r\n"), echoed()),
        // Function names and invocation IDs.
        probe(
            "function named NUL",
            request("POST", &format!("/v1/functions/%00/invoke?book={h}"), &auth, b"hi"),
            unknown_function(),
        ),
        probe(
            "function of a 10 KiB name",
            request("POST", &format!("/v1/functions/{long}/invoke?book={h}"), &auth, b"hi"),
            unknown_function(),
        ),
        probe(
            "function named ../..",
            request("POST", &format!("/v1/functions/..%2F..%2Fetc/invoke?book={h}"), &auth, b"hi"),
            unknown_function(),
        ),
        // An ID that cannot be one is looked up all the same: unknown.
        probe("invocation ID not hex", records(&format!("/v1/invocations/zz?book={h}")), Expect::status(&[400, 404])),
        probe(
            "invocation ID of 10 KiB",
            records(&format!("/v1/invocations/{}?book={h}", "a".repeat(10 << 10))),
            Expect::status(&[400, 404]),
        ),
    ]
}

/// A guest that grows its memory past its limit (500 memory_limit) or traps (500 trap).
fn guest_faults(tokens: &Tokens, books: &Books) -> Vec<Probe> {
    let target = format!("/v1/functions/bomb/invoke?book={}", books.hostile);
    let auth = bearer(&tokens.hostile);
    vec![
        probe("memory bomb", request("POST", &target, &auth, b"alloc"), Expect::status(&[500]).code("memory_limit")),
        probe("trap", request("POST", &target, &auth, b"trap"), Expect::status(&[500]).code("trap")),
    ]
}

/// A guest that never returns: 504 timeout at its `timeout_ms`.
fn spin(tokens: &Tokens, books: &Books) -> Vec<Probe> {
    let target = format!("/v1/functions/spin/invoke?book={}", books.hostile);
    vec![probe(
        "spinning guest",
        request("POST", &target, &bearer(&tokens.hostile), b"spin"),
        Expect::status(&[504]).code("timeout"),
    )]
}

/// A guest that calls itself deeper than `call_depth_max`: the call past the limit is
/// refused (invalid_argument) to the guest, which reports it in its output.
fn recursion(tokens: &Tokens, books: &Books) -> Vec<Probe> {
    let target = format!("/v1/functions/steps/invoke?book={}", books.hostile);
    let script = "script call steps ".repeat(RECURSION_DEPTH) + "script ctx";
    vec![probe(
        "calls nested 64 deep",
        request("POST", &target, &bearer(&tokens.hostile), script.as_bytes()),
        Expect::status(&[200]).body_has("error:invalid_argument"),
    )]
}

/// A body dribbled over about a second: waited for, then served.
fn slow_body(tokens: &Tokens, books: &Books) -> Vec<Probe> {
    let target = format!("/v1/functions/echo/invoke?book={}", books.hostile);
    let body = b"slow-".repeat(13);
    let head =
        format!("POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n{}Content-Length: {}\r\n\r\n", bearer(&tokens.hostile), body.len());
    let expect = Expect::status(&[200]).body_has(String::from_utf8_lossy(&body));
    vec![Probe {
        name: "65 bytes over a second".into(),
        send: Send::Dribble { head: head.into_bytes(), body, piece: 8, every: Duration::from_millis(110) },
        expect,
    }]
}
