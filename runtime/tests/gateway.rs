//! The gateway's boundary, end to end over HTTP: the refusal of platform books, and
//! JSON errors for every rejection.

mod common;

use common::{guest, node};

/// A platform book: its top bit is set.
const PLATFORM_BOOK: u64 = (1 << 63) | 1;

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
