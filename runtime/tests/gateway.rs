//! The gateway's boundary, end to end over HTTP: JSON errors for every rejection.

mod common;

use common::{guest, node};

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
