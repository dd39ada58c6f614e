//! What the end-to-end tests share: a `tally dev` process driven over HTTP, and the
//! components built by `scripts/build-guests.sh` (found in `TALLY_GUESTS_DIR`, by
//! default `~/.cache/tally-guests`).

#![allow(dead_code)]

pub mod browser;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The token every request of [`Node::agent`] carries (a cluster's admin token), if
/// set. nextest runs each test in a process of its own.
static TOKEN: Mutex<Option<String>> = Mutex::new(None);

/// Makes every later request of [`Node::agent`] carry `token`.
pub fn use_token(token: &str) {
    *TOKEN.lock().unwrap() = Some(token.trim().to_string());
}

/// The CA (PEM) that https nodes' certificates must be issued by, if set.
static CA: Mutex<Option<Vec<u8>>> = Mutex::new(None);

/// Makes every later agent trust `pem` (a cluster's CA) for https.
pub fn use_ca(pem: &[u8]) {
    *CA.lock().unwrap() = Some(pem.to_vec());
}

/// The TLS settings of the tests' agents: the CA of [`use_ca`], else the web's roots.
pub fn tls() -> ureq::tls::TlsConfig {
    tally::tls::ureq_tls(CA.lock().unwrap().as_deref()).expect("a PEM CA")
}

pub fn authorize(
    mut request: ureq::http::Request<ureq::SendBody>,
    next: ureq::middleware::MiddlewareNext,
) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
    if let Some(token) = TOKEN.lock().unwrap().clone() {
        if !request.headers().contains_key("authorization") {
            request.headers_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
    }
    next.handle(request)
}

/// POSTs `body` with an `Idempotency-Key` until a node answers 200 (a 5xx, or no
/// answer, means a kill or a transient failure; anything else is a bug); `base` names
/// the node to try next. Returns the body.
pub fn until_ok(mut base: impl FnMut() -> String, path: &str, body: &str, key: &str, pause: Duration) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let probe = Node::agent().post(format!("{}{path}", base())).header("idempotency-key", key).send(body.as_bytes());
        if let Ok(mut response) = probe {
            let status = response.status().as_u16();
            let text = response.body_mut().read_to_string().unwrap_or_default();
            if status == 200 {
                return text;
            }
            assert!(status >= 500, "{path} {body:?}: {status} {text}");
        }
        assert!(Instant::now() < deadline, "{path} {body:?} never succeeded");
        std::thread::sleep(pause);
    }
}

pub fn guest(name: &str) -> Vec<u8> {
    let dir = std::env::var_os("TALLY_GUESTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/tally-guests"));
    let path = dir.join(format!("{name}.wasm"));
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; build the guests first with scripts/build-guests.sh", path.display()))
}

/// A response as the tests look at it.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str()).collect()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A `tally dev` process, killed when dropped; or the HTTP API of a node some other
/// process runs ([`Node::attach`]).
pub struct Node {
    child: Option<Child>,
    pub url: String,
    pub dir: PathBuf,
    args: Vec<String>,
}

impl Node {
    pub fn start(dir: PathBuf) -> Node {
        Node::start_with(dir, &[])
    }

    /// Starts with extra `tally dev` flags (kept for restarts).
    pub fn start_with(dir: PathBuf, args: &[&str]) -> Node {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let mut child = Command::new(env!("CARGO_BIN_EXE_tally"))
            .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&dir)
            .args(&args)
            .env("RUST_LOG", "warn")
            // Where it saves its admin token for the CLI (not the user's own).
            .env("TALLY_CONFIG_DIR", dir.join("cli"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting tally dev");
        let stdout = child.stdout.take().expect("piped");
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("reading the gateway URL");
        let url = line
            .trim()
            .rsplit(' ')
            .next()
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
            .unwrap_or_else(|| panic!("tally dev did not print its URL: {line:?}"))
            .to_string();
        Node { child: Some(child), url, dir, args }
    }

    /// The HTTP API at `url`, of a process this handle does not own.
    pub fn attach(url: &str) -> Node {
        Node { child: None, url: url.to_string(), dir: PathBuf::new(), args: Vec::new() }
    }

    /// Stops the process the hard way (kill -9) and starts it again over its data.
    pub fn restart(self) -> Node {
        self.restart_after(Duration::ZERO)
    }

    /// Kills the process (kill -9), leaves it down for `down`, and starts it again over
    /// its data.
    pub fn restart_after(mut self, down: Duration) -> Node {
        let mut child = self.child.take().expect("a node this handle started");
        let _ = child.kill();
        let _ = child.wait();
        std::thread::sleep(down);
        let dir = self.dir.clone();
        let args = std::mem::take(&mut self.args);
        std::mem::forget(self);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Node::start_with(dir, &args)
    }

    pub fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .middleware(authorize)
            .tls_config(tls())
            .build()
            .into()
    }

    pub fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let url = format!("{}{path}", self.url);
        let agent = Node::agent();
        let response = match method {
            "GET" => agent.get(&url).call(),
            "DELETE" => agent.delete(&url).call(),
            "PUT" => agent.put(&url).send(body),
            "POST" => agent.post(&url).send(body),
            "PATCH" => agent.patch(&url).send(body),
            other => panic!("no method {other}"),
        };
        let mut response = response.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status().as_u16();
        let body = response.body_mut().with_config().limit(1 << 30).read_to_vec().expect("a body");
        (status, body)
    }

    /// POSTs `body` with an `Idempotency-Key`; `None` when the node cannot be reached.
    pub fn post_keyed(&self, path: &str, body: &[u8], key: &str) -> Option<(u16, Vec<u8>)> {
        let url = format!("{}{path}", self.url);
        let mut response = Node::agent().post(&url).header("idempotency-key", key).send(body).ok()?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_vec().ok()?;
        Some((status, body))
    }

    /// POSTs `body` with extra headers (an `Idempotency-Key`, `Tally-Crash-After`, ...).
    pub fn post_with(&self, path: &str, body: &[u8], headers: &[(&str, &str)]) -> (u16, Vec<u8>) {
        let mut request = Node::agent().post(format!("{}{path}", self.url));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut response = request.send(body).unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let status = response.status().as_u16();
        (status, response.body_mut().read_to_vec().expect("a body"))
    }

    /// The value of one series of `GET /metrics`, named in full with its labels
    /// (`tally_invocations_total{function="f",outcome="ok"}`); 0 when it is absent.
    /// Any request, with headers; redirects are not followed, errors are answers.
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
        let url = format!("{}{path}", self.url);
        // The function's redirects are the client's to follow, not this one's.
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(Duration::from_secs(60)))
            .middleware(authorize)
            .tls_config(tls())
            .build()
            .into();
        let mut request = ureq::http::Request::builder().method(method).uri(&url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(body.to_vec()).expect("a valid request");
        let mut response = agent.run(request).unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect();
        let body = response.body_mut().with_config().limit(1 << 30).read_to_vec().unwrap_or_default();
        Answer { status, headers, body }
    }

    pub fn metric(&self, series: &str) -> u64 {
        let (status, body) = self.request("GET", "/metrics", b"");
        assert_eq!(status, 200);
        let text = String::from_utf8_lossy(&body);
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .map_or(0, |value| value.trim().parse().unwrap_or_else(|_| panic!("{series}: {value:?} is not a count")))
    }

    /// The status of invocation `id` on `book` once it is no longer running or
    /// sleeping (polled for up to 20 s).
    pub fn finished(&self, id: &str, book: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (status, v) = self.json("GET", &format!("/v1/invocations/{id}?book={book}"), b"");
            assert_eq!(status, 200, "invocation {id} on book {book}: {v}");
            if v["status"] != "running" && v["status"] != "sleeping" {
                return v;
            }
            assert!(Instant::now() < deadline, "still running: {v}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn json(&self, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
        let (status, body) = self.request(method, path, body);
        let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        (status, value)
    }

    pub fn deploy(&self, name: &str, component: &[u8], query: &str) -> Value {
        let (status, v) = self.json("PUT", &format!("/v1/functions/{name}{query}"), component);
        assert_eq!(status, 201, "deploying {name}: {v}");
        v
    }

    pub fn invoke(&self, name: &str, book: u64, input: &str) -> (u16, Vec<u8>) {
        self.request("POST", &format!("/v1/functions/{name}/invoke?book={book}"), input.as_bytes())
    }

    pub fn invoke_ok(&self, name: &str, book: u64, input: &str) -> String {
        let (status, body) = self.invoke(name, book, input);
        let text = String::from_utf8_lossy(&body).to_string();
        assert_eq!(status, 200, "invoking {name} with {input:?}: {text}");
        text
    }

    /// Expects a JSON error with `status` and `code`; returns its message.
    pub fn expect_error(&self, (status, body): (u16, Vec<u8>), want: u16, code: &str) -> String {
        let v: Value = serde_json::from_slice(&body)
            .unwrap_or_else(|_| panic!("a JSON error, got {status} {}", String::from_utf8_lossy(&body)));
        assert_eq!((status, v["error"]["code"].as_str()), (want, Some(code)), "{v}");
        v["error"]["message"].as_str().unwrap_or_default().to_string()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A node with extra `tally dev` flags.
pub fn node_with(args: &[&str]) -> (tempfile::TempDir, Node) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let node = Node::start_with(dir.path().join("data"), args);
    (dir, node)
}

pub fn node() -> (tempfile::TempDir, Node) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let node = Node::start(dir.path().join("data"));
    (dir, node)
}

/// xorshift64*: a test's random choices, the same in every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// An upstream on 127.0.0.1 that keeps, in order, each request's method, path and
/// `Idempotency-Key`, and answers every request with `upstream <n>: <body>` (the n-th
/// request); or, [`Upstream::honouring_keys`], as a server that honours keys: `ok-<k>` for
/// the k-th key it saw, the same answer again for a key it saw before.
pub struct Upstream {
    pub port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<(String, String, String)>>>,
}

impl Upstream {
    pub fn start() -> Upstream {
        Upstream::listen(false)
    }

    pub fn honouring_keys() -> Upstream {
        Upstream::listen(true)
    }

    fn listen(by_key: bool) -> Upstream {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding the upstream");
        let port = listener.local_addr().expect("an address").port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let theirs = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = theirs.clone();
                std::thread::spawn(move || Upstream::serve(stream, &seen, by_key));
            }
        });
        Upstream { port, seen }
    }

    fn serve(mut stream: std::net::TcpStream, seen: &std::sync::Mutex<Vec<(String, String, String)>>, by_key: bool) {
        use std::io::BufRead;
        use std::io::{Read, Write};
        let mut reader = std::io::BufReader::new(stream.try_clone().expect("a clone"));
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() || line.is_empty() {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        let (mut length, mut key) = (0usize, String::new());
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((&header, ""));
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "idempotency-key" => key = value.trim().to_string(),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        let _ = reader.read_exact(&mut body);
        let answer = {
            let mut seen = seen.lock().expect("seen lock");
            seen.push((method, path, key.clone()));
            if by_key {
                let mut keys: Vec<&str> = Vec::new();
                for (_, _, k) in seen.iter() {
                    if !keys.contains(&k.as_str()) {
                        keys.push(k);
                    }
                }
                format!("ok-{}", keys.iter().position(|k| *k == key).map_or(0, |i| i + 1))
            } else {
                format!("upstream {}: {}", seen.len(), String::from_utf8_lossy(&body))
            }
        };
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nx-upstream: yes\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        );
    }

    pub fn seen(&self) -> Vec<(String, String, String)> {
        self.seen.lock().expect("seen lock").clone()
    }

    /// `/fn/web/fetch?to=` this upstream's `path`.
    pub fn fetch(&self, path: &str) -> String {
        format!("/fn/web/fetch?to=http%3A%2F%2F127.0.0.1%3A{}{}", self.port, path.replace('/', "%2F"))
    }
}
