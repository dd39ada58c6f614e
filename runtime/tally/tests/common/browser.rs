//! A headless Chromium driven over W3C WebDriver, for tests of the pages a node serves:
//! the text of an element found by CSS selector, waits with a deadline, screenshots kept
//! as artifacts, the console's errors and every URL the page asked for.
//!
//! Debian's `chromium` and `chromium-driver` packages give the browser and chromedriver
//! (`scripts/env.sh` installs them). Each [`Browser`] has a chromedriver of its own, on a
//! loopback port the kernel picks, with one session. Dropping it ends the session, which
//! quits Chromium, shuts chromedriver down (killing it if it lingers) and removes the
//! temporary directory that held Chromium's profile. Chromium talks to chromedriver over
//! a pipe (`--remote-debugging-pipe`), so it also exits when chromedriver dies first;
//! nextest kills a timed-out test's whole process group.
//!
//! Every call is bounded: each WebDriver request by the agent's timeout, page loads and
//! scripts by the session's, every wait by its deadline.
//!
//! chromedriver hands out each log entry once, so the harness keeps what it has read:
//! [`Browser::console_errors`] and [`Browser::requested_urls`] cover the session from its
//! start, or from the last [`Browser::clear_logs`].

use std::cell::RefCell;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};

/// How long chromedriver has to announce its port and then report ready.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// One WebDriver request; longer than the session's page load and script timeouts, so
/// that chromedriver reports those instead of the agent giving up first.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const PAGE_LOAD_TIMEOUT_MS: u64 = 30_000;
const SCRIPT_TIMEOUT_MS: u64 = 10_000;
/// How long chromedriver has to exit after `/shutdown` before it is killed.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Screenshots and logs are far below this; a body past it is a bug worth a failure.
const BODY_BYTES_MAX: u64 = 64 << 20;

/// The WebDriver key of an element reference (W3C WebDriver, "Elements").
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Chromium's flags: headless as root (which Chromium refuses without `--no-sandbox`),
/// without a GPU or /dev/shm (64 MB in many containers), and nothing of Chromium's own on
/// the network: no proxy, updates, sync or metrics.
const CHROMIUM_ARGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
    "--remote-debugging-pipe",
    "--no-proxy-server",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--metrics-recording-only",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
];

/// One chromedriver and one session of a headless Chromium.
pub struct Browser {
    driver: Child,
    /// `http://127.0.0.1:<port>`, chromedriver's address.
    base: String,
    /// `/session/<id>`, once the session is created.
    session: String,
    agent: ureq::Agent,
    logs: RefCell<Logs>,
    /// Chromium's `TMPDIR`, removed after [`Drop`] has stopped chromedriver and Chromium.
    _tmp: tempfile::TempDir,
}

#[derive(Default)]
struct Logs {
    console_errors: Vec<String>,
    requested_urls: Vec<String>,
}

impl Browser {
    /// Starts chromedriver and a session; panics naming `scripts/env.sh` if Chromium or
    /// chromedriver is not installed.
    pub fn start() -> Browser {
        let chromedriver = installed("chromedriver");
        // The real binary, not Debian's /usr/bin/chromium wrapper, which adds flags of
        // its own (remote extensions among them) from /etc/chromium.d.
        let chromium = Some(PathBuf::from("/usr/lib/chromium/chromium"))
            .filter(|path| path.is_file())
            .unwrap_or_else(|| installed("chromium"));
        // Chromium's profile and sockets go to a directory of the browser's own, removed
        // with it, rather than into /tmp, where an unclean exit leaves them.
        let tmp = tempfile::Builder::new().prefix("tally-browser-").tempdir().expect("a temporary directory");
        let mut driver = Command::new(&chromedriver)
            .arg("--port=0")
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", chromedriver.display()));
        let port = announced_port(&mut driver);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .proxy(None)
            .build()
            .into();
        let base = format!("http://127.0.0.1:{port}");
        let mut browser = Browser { driver, base, session: String::new(), agent, logs: RefCell::default(), _tmp: tmp };
        browser.wait_ready();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "timeouts": {"implicit": 0, "pageLoad": PAGE_LOAD_TIMEOUT_MS, "script": SCRIPT_TIMEOUT_MS},
            "goog:chromeOptions": {"binary": chromium, "args": CHROMIUM_ARGS},
            "goog:loggingPrefs": {"browser": "ALL", "performance": "ALL"},
        }}});
        let created = browser.send("POST", "/session", Some(capabilities));
        let id = created["sessionId"].as_str().unwrap_or_else(|| panic!("no session id in {created}"));
        browser.session = format!("/session/{id}");
        browser
    }

    /// Opens `url` and returns once it has loaded (its `load` event).
    pub fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(json!({ "url": url })));
    }

    /// The URL of the page now shown (after redirects).
    pub fn current_url(&self) -> String {
        self.command("GET", "/url", None).as_str().expect("a URL").to_string()
    }

    /// The rendered text (`innerText`) of the first element `css` selects, if any.
    pub fn text(&self, css: &str) -> Option<String> {
        // One script rather than find-then-read: the page may replace the element between
        // two WebDriver calls.
        let text = self.exec("const e = document.querySelector(arguments[0]); return e ? e.innerText : null;", &[json!(css)]);
        text.as_str().map(str::to_string)
    }

    /// Waits until the first element `css` selects has a text `pred` accepts, and returns
    /// it. On timeout, saves a screenshot and panics with the last text seen.
    pub fn wait_text(&self, css: &str, pred: impl Fn(&str) -> bool, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.text(css);
            if let Some(text) = seen.as_deref().filter(|text| pred(text)) {
                return text.to_string();
            }
            if Instant::now() >= deadline {
                let name = format!("{}-timeout", std::thread::current().name().unwrap_or("browser"));
                let screenshot = self.screenshot(&name);
                panic!("{css}: no accepted text after {timeout:?} (last seen: {seen:?}; screenshot {})", screenshot.display());
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// How many elements `css` selects.
    pub fn count(&self, css: &str) -> usize {
        let count = self.exec("return document.querySelectorAll(arguments[0]).length;", &[json!(css)]);
        count.as_u64().expect("a count") as usize
    }

    /// Clicks the first element `css` selects, as a user would (it must be visible).
    pub fn click(&self, css: &str) {
        let element = self.element(css);
        self.command("POST", &format!("/element/{element}/click"), Some(json!({})));
    }

    /// Types `text` into the first element `css` selects, after what it holds.
    pub fn type_into(&self, css: &str, text: &str) {
        let element = self.element(css);
        self.command("POST", &format!("/element/{element}/value"), Some(json!({ "text": text })));
    }

    /// Runs `js` as the body of a function of `args` in the page; returns what it returns.
    pub fn exec(&self, js: &str, args: &[Value]) -> Value {
        self.command("POST", "/execute/sync", Some(json!({ "script": js, "args": args })))
    }

    /// Sets a cookie on the origin of the page now shown (WebDriver only sets cookies of
    /// the current document's domain), for its whole path.
    pub fn add_cookie(&self, name: &str, value: &str) {
        let cookie = json!({"cookie": {"name": name, "value": value, "path": "/"}});
        self.command("POST", "/cookie", Some(cookie));
    }

    /// Saves a PNG of the viewport as `<name>.png` in the artifacts directory
    /// (`$TALLY_TEST_ARTIFACTS`, else `test-artifacts/` in the cargo target directory),
    /// prints its path and returns it.
    pub fn screenshot(&self, name: &str) -> PathBuf {
        let encoded = self.command("GET", "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD.decode(encoded.as_str().expect("base64")).expect("a base64 PNG");
        let dir = artifacts_dir();
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        let file: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
        let path = dir.join(format!("{file}.png"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        println!("screenshot: {}", path.display());
        path
    }

    /// The messages of the console's errors (and of failed loads, which Chromium logs at
    /// the same level).
    pub fn console_errors(&self) -> Vec<String> {
        self.read_logs();
        self.logs.borrow().console_errors.clone()
    }

    /// Every URL the pages asked for, in order: requests, redirects and WebSockets.
    pub fn requested_urls(&self) -> Vec<String> {
        self.read_logs();
        self.logs.borrow().requested_urls.clone()
    }

    /// Forgets the errors and URLs seen so far.
    pub fn clear_logs(&self) {
        self.read_logs();
        *self.logs.borrow_mut() = Logs::default();
    }

    /// Panics naming every URL requested whose origin is not `origin` (such as
    /// `http://127.0.0.1:8080`); `data:`, `blob:` and `about:` URLs leave no machine.
    pub fn assert_only_requests_to(&self, origin: &str) {
        let origin = origin.trim_end_matches('/');
        let foreign: Vec<String> = self
            .requested_urls()
            .into_iter()
            .filter(|url| !["data:", "blob:", "about:"].iter().any(|scheme| url.starts_with(scheme)))
            .filter(|url| origin_of(url).as_deref() != Some(origin))
            .collect();
        assert!(foreign.is_empty(), "requests outside {origin}: {foreign:#?}");
    }

    fn element(&self, css: &str) -> String {
        let found = self.command("POST", "/element", Some(json!({"using": "css selector", "value": css})));
        found[ELEMENT_KEY].as_str().unwrap_or_else(|| panic!("{css}: no element in {found}")).to_string()
    }

    /// Moves the entries chromedriver has gathered since the last read into `logs`.
    fn read_logs(&self) {
        let browser = self.command("POST", "/se/log", Some(json!({"type": "browser"})));
        let performance = self.command("POST", "/se/log", Some(json!({"type": "performance"})));
        let mut logs = self.logs.borrow_mut();
        for entry in browser.as_array().into_iter().flatten() {
            if entry["level"] == "SEVERE" {
                logs.console_errors.push(entry["message"].as_str().unwrap_or_default().to_string());
            }
        }
        for entry in performance.as_array().into_iter().flatten() {
            // Each message is a DevTools event, as a JSON string.
            let event: Value = serde_json::from_str(entry["message"].as_str().unwrap_or("{}")).expect("a DevTools event");
            let url = match event["message"]["method"].as_str() {
                Some("Network.requestWillBeSent") => &event["message"]["params"]["request"]["url"],
                Some("Network.webSocketCreated") => &event["message"]["params"]["url"],
                _ => continue,
            };
            logs.requested_urls.push(url.as_str().unwrap_or_default().to_string());
        }
    }

    /// A command of this session; panics with WebDriver's error if it fails.
    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.send(method, &format!("{}{path}", self.session), body)
    }

    /// `method` on `path` of chromedriver; returns the answer's `value`, and panics with
    /// WebDriver's error if the status is not 200.
    fn send(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let answer = match (method, body) {
            ("GET", None) => self.agent.get(&url).call(),
            ("DELETE", None) => self.agent.delete(&url).call(),
            ("POST", Some(body)) => self.agent.post(&url).header("content-type", "application/json").send(body.to_string()),
            (method, body) => panic!("no WebDriver request {method} with body {body:?}"),
        };
        let mut response = answer.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(BODY_BYTES_MAX)
            .read_to_string()
            .unwrap_or_else(|e| panic!("{method} {url}: reading the answer: {e}"));
        let value = serde_json::from_str::<Value>(&text).map(|mut v| v["value"].take()).unwrap_or(Value::Null);
        if status != 200 {
            let (error, message) = (value["error"].as_str().unwrap_or("?"), value["message"].as_str().unwrap_or(""));
            panic!("{method} {url}: {status} {error}: {message}");
        }
        value
    }

    /// Waits until chromedriver's `/status` says it is ready.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let status = self.agent.get(format!("{}/status", self.base)).call();
            if let Ok(mut response) = status {
                let text = response.body_mut().read_to_string().unwrap_or_default();
                let ready = serde_json::from_str::<Value>(&text).is_ok_and(|status| status["value"]["ready"] == true);
                if ready {
                    return;
                }
            }
            if let Ok(Some(exit)) = self.driver.try_wait() {
                panic!("chromedriver exited before it was ready: {exit}");
            }
            assert!(Instant::now() < deadline, "chromedriver not ready after {START_TIMEOUT:?}");
            std::thread::sleep(POLL_INTERVAL);
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session quits Chromium, and chromedriver's `/shutdown` waits for it
        // to exit; a failure here must not hide the test's own.
        if !self.session.is_empty() {
            let _ = self.agent.delete(format!("{}{}", self.base, self.session)).call();
        }
        let _ = self.agent.get(format!("{}/shutdown", self.base)).call();
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        while matches!(self.driver.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(POLL_INTERVAL);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Where `name` is on `PATH`; panics naming `scripts/env.sh` if it is not.
fn installed(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| candidate.is_file()).unwrap_or_else(|| {
        panic!("{name} is not on PATH: `source scripts/env.sh` installs Debian's chromium and chromium-driver")
    })
}

/// Reads chromedriver's stdout until it says which port the kernel gave it ("ChromeDriver
/// was started successfully on port N."), then drains the rest in a thread so that
/// chromedriver never blocks on a full pipe.
fn announced_port(driver: &mut Child) -> u16 {
    let stdout = driver.stdout.take().expect("chromedriver's stdout");
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("chromedriver-stdout".into())
        .spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            for line in lines.by_ref().map_while(Result::ok) {
                let port = line
                    .split("started successfully on port ")
                    .nth(1)
                    .and_then(|rest| rest.trim_end_matches('.').trim().parse::<u16>().ok());
                if let Some(port) = port {
                    let _ = sender.send(port);
                    break;
                }
            }
            // The rest is chromedriver's and Chromium's chatter; the pipe closes when
            // chromedriver exits, which ends this thread.
            lines.for_each(drop);
        })
        .expect("a thread for chromedriver's stdout");
    receiver.recv_timeout(START_TIMEOUT).unwrap_or_else(|e| {
        let _ = driver.kill();
        let _ = driver.wait();
        panic!("chromedriver did not announce its port within {START_TIMEOUT:?}: {e}")
    })
}

/// Where screenshots go: `$TALLY_TEST_ARTIFACTS`, else `test-artifacts/` in
/// `$CARGO_TARGET_DIR`, else in the workspace's `target/`.
pub fn artifacts_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TALLY_TEST_ARTIFACTS") {
        return PathBuf::from(dir);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("test-artifacts")
}

/// `scheme://host[:port]` of an absolute URL, with `ws`/`wss` counted as `http`/`https`
/// (a WebSocket to the node is the node's).
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let scheme = match scheme {
        "ws" => "http",
        "wss" => "https",
        other => other,
    };
    Some(format!("{scheme}://{authority}"))
}
