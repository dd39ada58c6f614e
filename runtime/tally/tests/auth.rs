//! Tokens on every route (`auth/`): without one, 401 on a node that asks for tokens;
//! with one of too small a role or another scope, 403; revoked or expired, 401 at once.
//! `tally dev` on loopback serves the CLI and curl without one, but not what a web page
//! can forge. Public HTTP functions need none, a promise's link completes that promise
//! only, and the audit listing says who changed what.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{guest, node, node_with, Answer, Node};
use serde_json::{json, Value};

const TALLY: &str = env!("CARGO_BIN_EXE_tally");

/// A node that asks every request for a token, and its admin token.
fn secured() -> (tempfile::TempDir, Node, String) {
    let (dir, n) = node_with(&["--auth", "token"]);
    let admin = std::fs::read_to_string(dir.path().join("data").join("admin.token")).expect("the admin token").trim().to_string();
    (dir, n, admin)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn send(n: &Node, method: &str, path: &str, token: Option<&str>, body: &[u8]) -> Answer {
    let auth = token.map(bearer);
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    n.send(method, path, &headers, body)
}

/// A new token of `role` (and scope) made with `admin`: (token, id).
fn token(n: &Node, admin: &str, spec: Value) -> (String, String) {
    let a = send(n, "POST", "/v1/tokens", Some(admin), spec.to_string().as_bytes());
    assert_eq!(a.status, 201, "{}", a.text());
    let v: Value = serde_json::from_slice(&a.body).unwrap();
    (v["token"].as_str().unwrap().to_string(), v["grant"]["id"].as_str().unwrap().to_string())
}

fn json(a: &Answer) -> Value {
    serde_json::from_slice(&a.body).unwrap_or(Value::Null)
}

const ROLES: [&str; 4] = ["read", "invoke", "deploy", "admin"];

/// Every route of the API, with the least role it needs (`auth/guard.rs`'s table).
const ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/metrics", "read"),
    ("GET", "/v1/functions", "read"),
    ("GET", "/v1/functions/hello", "read"),
    ("PUT", "/v1/functions/hello2", "deploy"),
    ("DELETE", "/v1/functions/nobody", "deploy"),
    ("GET", "/v1/functions/hello/config", "read"),
    ("PATCH", "/v1/functions/nobody/config", "deploy"),
    ("POST", "/v1/functions/hello/invoke?book=3", "invoke"),
    ("GET", "/v1/invocations?book=3", "read"),
    ("GET", "/v1/invocations/abc?book=3", "read"),
    ("DELETE", "/v1/invocations/abc?book=3", "invoke"),
    ("POST", "/v1/promises/p1?book=3", "invoke"),
    ("POST", "/v1/promises/p1/link?book=3", "invoke"),
    ("GET", "/v1/logs", "read"),
    ("GET", "/v1/schedules", "read"),
    ("GET", "/v1/schedules/s", "read"),
    ("PUT", "/v1/schedules/s", "deploy"),
    ("DELETE", "/v1/schedules/s", "deploy"),
    ("POST", "/v1/schedules/s/pause", "deploy"),
    ("POST", "/v1/schedules/s/trigger", "invoke"),
    ("GET", "/v1/books/3/records", "read"),
    ("GET", "/v1/books/3/tables/t", "read"),
    ("PUT", "/v1/books/3/tables/t", "deploy"),
    ("GET", "/v1/books/3/objects/o", "read"),
    ("GET", "/v1/books/3/queues/q", "read"),
    ("GET", "/v1/books/3/locks/l", "read"),
    ("GET", "/v1/tokens", "admin"),
    ("POST", "/v1/tokens", "admin"),
    ("DELETE", "/v1/tokens/0123456789abcdef", "admin"),
    ("GET", "/v1/audit", "admin"),
    ("POST", "/fn/web/x", "invoke"),
    ("GET", "/routed/x", "invoke"),
];

#[test]
fn every_route_asks_for_a_token_of_its_role() {
    let (_dir, n, admin) = secured();
    let deployed = send(&n, "PUT", "/v1/functions/hello", Some(&admin), &guest("hello"));
    assert_eq!(deployed.status, 201, "{}", deployed.text());
    let web = send(&n, "PUT", "/v1/functions/web?routes=/routed", Some(&admin), &guest("http_probe"));
    assert_eq!(web.status, 201, "{}", web.text());
    let tokens: Vec<(String, String)> = ROLES.iter().map(|r| token(&n, &admin, json!({ "role": r }))).collect();

    assert_eq!(send(&n, "GET", "/healthz", None, b"").status, 200, "liveness needs no token");
    for &(method, path, least) in ROUTES {
        let a = send(&n, method, path, None, b"");
        assert_eq!((a.status, json(&a)["error"]["code"].as_str()), (401, Some("unauthenticated")), "{method} {path}");
        assert!(!a.header("www-authenticate").is_empty(), "{method} {path}: a 401 says how to authenticate");
        let bad = send(&n, method, path, Some("tally_0123456789abcdef_not-a-secret"), b"");
        assert_eq!(bad.status, 401, "{method} {path} with a malformed token");
        let least = ROLES.iter().position(|r| *r == least).unwrap();
        for (i, (t, _)) in tokens.iter().enumerate() {
            let a = send(&n, method, path, Some(t), b"");
            if i < least {
                assert_eq!(a.status, 403, "{method} {path} as {}: {}", ROLES[i], a.text());
            } else {
                assert!(a.status != 401 && a.status != 403, "{method} {path} as {}: {} {}", ROLES[i], a.status, a.text());
            }
        }
    }
    // A query that names the book twice is refused: the check and the route must read the same.
    let twice = send(&n, "POST", "/v1/functions/hello/invoke?book=3&book=4", Some(&tokens[1].0), b"x");
    assert_eq!(twice.status, 400, "{}", twice.text());
}

#[test]
fn scopes_narrow_books_and_functions_and_revocation_and_expiry_refuse_at_once() {
    let (_dir, n, admin) = secured();
    for name in ["hello", "shop-cart", "billing"] {
        assert_eq!(send(&n, "PUT", &format!("/v1/functions/{name}"), Some(&admin), &guest("hello")).status, 201);
    }
    let (t, id) = token(&n, &admin, json!({ "role": "invoke", "functions": ["shop-*", "hello"], "books": [3] }));
    let invoke = |f: &str, book: u64| send(&n, "POST", &format!("/v1/functions/{f}/invoke?book={book}"), Some(&t), b"hi").status;
    assert_eq!(invoke("shop-cart", 3), 200);
    assert_eq!(invoke("hello", 3), 200);
    assert_eq!(invoke("shop-cart", 4), 403, "another book");
    assert_eq!(invoke("billing", 3), 403, "another function");
    assert_eq!(send(&n, "GET", "/v1/books/3/records", Some(&t), b"").status, 403, "a function scope reaches no book's records");
    let (reader, _) = token(&n, &admin, json!({ "role": "read", "books": [3] }));
    assert_eq!(send(&n, "GET", "/v1/books/3/records", Some(&reader), b"").status, 200);
    assert_eq!(
        send(&n, "GET", "/v1/books/4/records", Some(&reader), b"").status,
        403,
        "a read token of book 3 cannot see book 4"
    );
    assert_eq!(send(&n, "GET", "/metrics", Some(&reader), b"").status, 403, "metrics are for unscoped tokens");
    assert_eq!(send(&n, "PUT", "/v1/functions/hello", Some(&t), &guest("hello")).status, 403, "invoke cannot deploy");

    let revoked = send(&n, "DELETE", &format!("/v1/tokens/{id}"), Some(&admin), b"");
    assert_eq!(revoked.status, 200, "{}", revoked.text());
    let a = send(&n, "POST", "/v1/functions/hello/invoke?book=3", Some(&t), b"hi");
    assert_eq!((a.status, json(&a)["error"]["message"].as_str()), (401, Some("no valid token: the token was revoked")));
    assert_eq!(send(&n, "DELETE", &format!("/v1/tokens/{id}"), Some(&admin), b"").status, 200, "revoking twice is harmless");
    assert_eq!(send(&n, "DELETE", "/v1/tokens/ffffffffffffffff", Some(&admin), b"").status, 404);

    let (brief, _) = token(&n, &admin, json!({ "role": "read", "expires_in_ms": 300 }));
    assert_eq!(send(&n, "GET", "/v1/functions", Some(&brief), b"").status, 200);
    std::thread::sleep(Duration::from_millis(350));
    let a = send(&n, "GET", "/v1/functions", Some(&brief), b"");
    assert_eq!((a.status, json(&a)["error"]["message"].as_str()), (401, Some("no valid token: the token expired")));

    for bad in [
        json!({ "role": "root" }),
        json!({ "role": "read", "functions": ["a*b"] }),
        json!({ "role": "read", "books": [1u64 << 63] }),
    ] {
        let a = send(&n, "POST", "/v1/tokens", Some(&admin), bad.to_string().as_bytes());
        assert_eq!(a.status, 400, "{bad}: {}", a.text());
    }
    // Tokens and the revocation outlive a restart: they are records of the log.
    let n = n.restart();
    let listed = json(&send(&n, "GET", "/v1/tokens", Some(&admin), b""));
    let listed = listed["tokens"].as_array().unwrap();
    assert!(listed.iter().any(|g| g["id"] == id.as_str() && g["revoked_by"].is_string()), "{listed:?}");
    assert!(listed.iter().all(|g| g.get("token").is_none()), "no listing shows a secret");
    assert_eq!(send(&n, "POST", "/v1/functions/hello/invoke?book=3", Some(&t), b"hi").status, 401);
}

#[test]
fn public_http_functions_need_no_token_and_a_promise_link_completes_one_promise() {
    let (_dir, n, admin) = secured();
    assert_eq!(send(&n, "PUT", "/v1/functions/open?public=true&routes=/site", Some(&admin), &guest("http_probe")).status, 201);
    assert_eq!(send(&n, "PUT", "/v1/functions/closed?routes=/inside", Some(&admin), &guest("http_probe")).status, 201);
    for path in ["/fn/open/x", "/site/x"] {
        let a = send(&n, "GET", path, None, b"");
        assert!(a.status != 401 && a.status != 403, "{path}: {} {}", a.status, a.text());
    }
    for path in ["/fn/closed/x", "/inside/x", "/fn/nobody/x"] {
        assert_eq!(send(&n, "GET", path, None, b"").status, 401, "{path}");
    }
    let a = send(&n, "PUT", "/v1/functions/plain?public=true", Some(&admin), &guest("hello"));
    assert_eq!(a.status, 400, "public is for HTTP functions: {}", a.text());

    // The approval example waits for a promise; a link completes it and nothing else.
    assert_eq!(send(&n, "PUT", "/v1/functions/approval?timeout_ms=1000", Some(&admin), &guest("approval")).status, 201);
    let asked = send(&n, "POST", "/v1/functions/approval/invoke?book=12", Some(&admin), b"request a-raise");
    assert_eq!(asked.status, 202, "{}", asked.text());
    let records = json(&send(&n, "GET", "/v1/books/12/records?tag=approvals", Some(&admin), b""));
    let line = records["records"][0]["data"]["text"].as_str().expect("the request's record").to_string();
    let promise = line.strip_prefix("a-raise ").expect("the promise's ID").to_string();
    let link = send(&n, "POST", &format!("/v1/promises/{promise}/link?book=12"), Some(&admin), b"");
    assert_eq!(link.status, 201, "{}", link.text());
    let link = json(&link);
    let (t, path) = (link["token"].as_str().unwrap(), link["path"].as_str().unwrap());
    assert_eq!(send(&n, "POST", &format!("/v1/promises/{}?book=12", "f".repeat(32)), Some(t), b"x").status, 403);
    assert_eq!(send(&n, "POST", &format!("/v1/promises/{promise}?book=13"), Some(t), b"x").status, 403);
    assert_eq!(send(&n, "GET", "/v1/books/12/records", Some(t), b"").status, 403);
    assert_eq!(send(&n, "POST", "/v1/functions/approval/invoke?book=12", Some(t), b"x").status, 403);
    assert_eq!(send(&n, "POST", &format!("/v1/promises/{promise}/link?book=12"), Some(t), b"").status, 403, "no links of links");
    let done = send(&n, "POST", path, Some(t), b"granted");
    assert_eq!(done.status, 200, "{}", done.text());
}

#[test]
fn the_audit_lists_who_deployed_configured_and_deleted_what() {
    let (_dir, n, admin) = secured();
    let (ci, ci_id) = token(&n, &admin, json!({ "role": "deploy", "name": "ci" }));
    assert_eq!(send(&n, "PUT", "/v1/functions/hello", Some(&ci), &guest("hello")).status, 201);
    let set = json!({ "set": { "MODE": { "value": "fast", "secret": false } } });
    assert_eq!(send(&n, "PATCH", "/v1/functions/hello/config", Some(&ci), set.to_string().as_bytes()).status, 200);
    assert_eq!(send(&n, "DELETE", "/v1/functions/hello", Some(&admin), b"").status, 204);
    assert_eq!(send(&n, "GET", "/v1/audit", Some(&ci), b"").status, 403, "the audit is the admins'");
    let audit = json(&send(&n, "GET", "/v1/audit", Some(&admin), b""));
    let rows: Vec<(String, String, String)> = audit["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (c["op"].as_str().unwrap().into(), c["by"].as_str().unwrap_or("").into(), c["function"].as_str().unwrap_or("").into())
        })
        .collect();
    let admin_id = &admin[6..22];
    let want = [
        ("token.grant", "bootstrap", ""),
        ("token.grant", admin_id, ""),
        ("function.deploy", ci_id.as_str(), "hello"),
        ("function.config", ci_id.as_str(), "hello"),
        ("function.delete", admin_id, "hello"),
    ];
    let want: Vec<(String, String, String)> =
        want.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect();
    assert_eq!(rows, want, "{audit}");
    let seqnums: Vec<u64> = audit["changes"].as_array().unwrap().iter().map(|c| c["seqnum"].as_u64().unwrap()).collect();
    assert!(seqnums.windows(2).all(|w| w[0] < w[1]), "in log order: {seqnums:?}");
}

#[test]
fn tally_dev_refuses_what_a_web_page_can_forge_and_the_cli_needs_nothing() {
    let (dir, n) = node();
    let host = n.url.trim_start_matches("http://").to_string();
    let ok = |headers: &[(&str, &str)]| n.send("GET", "/v1/functions", headers, b"").status;
    assert_eq!(ok(&[]), 200, "curl on loopback needs no token");
    assert_eq!(ok(&[("host", "localhost")]), 200);
    assert_eq!(ok(&[("host", "evil.example")]), 403, "a rebinding page's name");
    assert_eq!(ok(&[("host", "127.0.0.1.evil.example")]), 403);
    assert_eq!(ok(&[("sec-fetch-site", "cross-site")]), 403);
    assert_eq!(ok(&[("sec-fetch-site", "same-origin")]), 200);
    let origin = format!("http://{host}");
    assert_eq!(ok(&[("origin", origin.as_str())]), 200, "the gateway's own page");
    let a = n.send("POST", "/v1/functions/hello/invoke", &[("origin", "https://evil.example")], b"x");
    assert_eq!(
        (a.status, json(&a)["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "a cross-origin form POST: {}",
        a.text()
    );
    // A token, when sent, is checked as anywhere.
    let wrong = format!("Bearer tally_0123456789abcdef_{}", "0".repeat(64));
    assert_eq!(n.send("GET", "/v1/functions", &[("authorization", wrong.as_str())], b"").status, 401);

    // The CLI finds the token `tally dev` saved for its address: the audit names it.
    let cli = |args: &[&str]| {
        let out = Command::new(TALLY)
            .args(args)
            .env("TALLY_URL", &n.url)
            .env("TALLY_CONFIG_DIR", dir.path().join("data").join("cli"))
            .output()
            .unwrap();
        assert!(out.status.success(), "tally {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let wasm = dir.path().join("hello.wasm");
    std::fs::write(&wasm, guest("hello")).unwrap();
    cli(&["deploy", wasm.to_str().unwrap(), "--name", "hello"]);
    let admin = std::fs::read_to_string(dir.path().join("data").join("admin.token")).unwrap();
    let audit = cli(&["audit"]);
    assert!(audit.lines().any(|l| l.contains("function.deploy") && l.contains(&admin[6..22])), "{audit}");
    let made = cli(&["token", "create", "--role", "read", "--book", "3", "--name", "dashboards"]);
    assert!(made.trim().starts_with("tally_"), "{made}");
    let listed = cli(&["token", "list"]);
    assert!(listed.contains("dashboards") && listed.contains("books 3"), "{listed}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(dir.path().join("data").join("admin.token")).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "only its owner reads the admin token");
}

#[test]
fn a_node_beyond_loopback_needs_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(TALLY)
        .args(["dev", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("TALLY_CONFIG_DIR", dir.path().join("cli"))
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--auth token"), "{err}");
    // With tokens it starts, and asks for them.
    let mut child = Command::new(TALLY)
        .args(["dev", "--listen", "0.0.0.0:0", "--auth", "token", "--data-dir"])
        .arg(dir.path().join("open"))
        .env("TALLY_CONFIG_DIR", dir.path().join("cli"))
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().replace("0.0.0.0", "127.0.0.1");
    let n = Node::attach(&url);
    let refused = n.send("GET", "/v1/functions", &[], b"").status;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(refused, 401);
}

#[test]
fn tally_dev_serves_https_with_the_certificate_it_is_given_and_the_cli_checks_it() {
    let dir = tempfile::tempdir().unwrap();
    let ca = tally_logsvc::net::ClusterCa::generate("https-test").unwrap();
    let (ca_pem, cert_pem, key_pem) = ca.issue_for("gateway", vec!["127.0.0.1".into(), "localhost".into()]).unwrap().pem();
    let other = tally_logsvc::net::ClusterCa::generate("another").unwrap();
    let (other_pem, _, _) = other.issue_for("x", vec!["x.local".into()]).unwrap().pem();
    for (file, text) in [("ca.pem", &ca_pem), ("cert.pem", &cert_pem), ("key.pem", &key_pem), ("other.pem", &other_pem)] {
        std::fs::write(dir.path().join(file), text).unwrap();
    }
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let n = Node::start_with(
        dir.path().join("data"),
        &["--tls-cert-file", cert.to_str().unwrap(), "--tls-key-file", key.to_str().unwrap()],
    );
    assert!(n.url.starts_with("https://"), "{}", n.url);
    let cli = |ca: &str| {
        Command::new(TALLY)
            .args(["functions", "--json"])
            .env("TALLY_URL", &n.url)
            .env("TALLY_CA", dir.path().join(ca))
            .env("TALLY_CONFIG_DIR", dir.path().join("data").join("cli"))
            .output()
            .unwrap()
    };
    let ok = cli("ca.pem");
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let refused = cli("other.pem");
    assert!(!refused.status.success(), "a certificate of another CA is refused");
    // Nothing is served in the clear.
    let plain = n.url.replace("https://", "http://");
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(5))).build().into();
    assert!(agent.get(format!("{plain}/healthz")).call().is_err(), "no plain HTTP on an https gateway");
}
