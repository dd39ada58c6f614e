//! A wasi:http component built for `wasmtime serve` runs on Tally unchanged: the same
//! component deployed to `tally dev` and served by `wasmtime serve` answers the same
//! requests identically. Two toolchains: Rust's `wasip2` crate (tests/guests/http-probe)
//! and componentize-js with the web's fetch event (tests/guests/js/plain-http).
//! The wasmtime CLI is `TALLY_WASMTIME` (scripts/test.sh installs it with bench/setup.sh).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{guest, node, Answer, Node};

/// `wasmtime serve` of one component on a loopback port, killed when dropped.
struct Serve {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(component: &[u8]) -> Serve {
    let wasmtime = std::env::var("TALLY_WASMTIME")
        .expect("TALLY_WASMTIME names the wasmtime CLI: run `bash bench/setup.sh` and export its wasmtime= line");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("component.wasm");
    std::fs::write(&path, component).expect("writing the component");
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let child = Command::new(wasmtime)
        .args(["serve", "-S", "cli", "--addr", &format!("127.0.0.1:{port}")])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting wasmtime serve");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "wasmtime serve did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Serve { child, url: format!("http://127.0.0.1:{port}"), _dir: dir }
}

/// A request: method, path, headers, body.
type Case<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, Vec<u8>);

/// What the two must agree on: the status, the component's own headers, the body.
fn seen(a: &Answer) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut headers: Vec<(String, String)> =
        a.headers.iter().filter(|(name, _)| name.starts_with("x-") || name == "content-type").cloned().collect();
    headers.sort();
    (a.status, headers, a.body.clone())
}

#[test]
fn a_rust_http_component_answers_on_tally_as_on_wasmtime_serve() {
    same_answers("http_probe");
}

#[test]
fn a_javascript_http_component_answers_on_tally_as_on_wasmtime_serve() {
    same_answers("js-plain-http");
}

fn same_answers(name: &str) {
    let component = guest(name);
    let (_dir, n) = node();
    n.deploy("web", &component, "");
    let peer = serve(&component);
    let peer = Node::attach(&peer.url);

    let binary: Vec<u8> = (0..(3 << 20)).map(|i| (i * 7 % 256) as u8).collect();
    let cases: Vec<Case> = vec![
        ("GET", "/", vec![], vec![]),
        ("GET", "/deep/path/?q=1&q=2&flag", vec![("x-repeat", "a"), ("x-repeat", "b")], vec![]),
        ("POST", "/echo", vec![("content-type", "application/json")], br#"{"a": 1}"#.to_vec()),
        ("PUT", "/upload", vec![("content-type", "application/octet-stream")], binary),
        ("DELETE", "/things/7", vec![], vec![]),
        ("PATCH", "/things/7", vec![], b"patch".to_vec()),
        ("OPTIONS", "/", vec![], vec![]),
        ("GET", "/status/418", vec![], vec![]),
        ("GET", "/status/204", vec![], vec![]),
        ("GET", "/big/4194304", vec![], vec![]),
        ("GET", "/trap", vec![], vec![]),
    ];
    for (method, path, headers, body) in cases {
        let ours = n.send(method, &format!("/fn/web{path}"), &headers, &body);
        let theirs = peer.send(method, path, &headers, &body);
        if path == "/trap" {
            // Both answer a trap with a server error; the texts are each host's own.
            assert_eq!((ours.status, theirs.status), (500, 500), "{name}: {method} {path}");
            continue;
        }
        let (ours, theirs) = (seen(&ours), seen(&theirs));
        assert_eq!(ours.0, theirs.0, "{name}: {method} {path}: the status");
        assert_eq!(ours.1, theirs.1, "{name}: {method} {path}: the headers");
        assert!(ours.2 == theirs.2, "{name}: {method} {path}: the bodies differ ({} and {} bytes)", ours.2.len(), theirs.2.len());
        if !body.is_empty() {
            assert!(ours.2 == body, "{name}: {method} {path}: the body comes back as sent");
        }
    }
}
