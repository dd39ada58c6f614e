//! Browser tests of the pages a node serves, in a headless Chromium driven by
//! `common/browser.rs`: the harness's own test, against a page of its own, and the
//! dashboard (`/ui` of a real `tally dev`, `gateway/ui.rs`), every page with real data,
//! no console error and no request off the node, with and without tokens.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::browser::Browser;
use common::{guest, node, node_with, Node};
use serde_json::json;

/// Each page names a data: icon, so that Chromium's request for `/favicon.ico` (a 404
/// here, and a console error) is not part of what the test sees.
const HEAD: &str =
    r#"<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>harness</title></head>"#;

/// Fills `#filled` from a second request, changes `#later` after a second, and echoes
/// what is typed into `#name` into `#echo` on a click of `#go`.
const GOOD: &str = r#"<body>
<p id="filled">loading</p><p id="later">before</p>
<input id="name"><button id="go">go</button><p id="echo"></p>
<script>
fetch("/data.json").then((r) => r.json()).then((d) => { document.getElementById("filled").textContent = d.greeting; });
setTimeout(() => { document.getElementById("later").textContent = "after"; }, 1000);
document.getElementById("go").onclick = () => {
  document.getElementById("echo").textContent = document.getElementById("name").value;
};
</script></body></html>"#;

const BAD: &str = r#"<body><p id="bad">bad</p><script>console.error("the bad page's error");</script></body></html>"#;

/// A request off the node: 127.0.0.2 is loopback, and nothing listens on port 9.
const FOREIGN: &str = r#"<body><p id="foreign">foreign</p><img src="http://127.0.0.2:9/x"></body></html>"#;

/// An HTTP/1.1 server of the pages above on 127.0.0.1, one connection per thread, each
/// answered once and closed; the thread lives as long as the test process.
fn serve_pages() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding the page server");
    let origin = format!("http://{}", listener.local_addr().expect("an address"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer(stream));
        }
    });
    origin
}

fn answer(mut stream: TcpStream) {
    // Chromium opens connections it may never use; a read timeout ends their threads.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(stream.try_clone().expect("a clone of the stream"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() || request_line.is_empty() {
        return;
    }
    // The headers: none matters here, and GETs have no body.
    let mut header = String::new();
    while reader.read_line(&mut header).is_ok_and(|n| n > 0) && header.trim() != "" {
        header.clear();
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    let (status, kind, body) = match path {
        "/" => ("200 OK", "text/html", format!("{HEAD}{GOOD}")),
        "/data.json" => ("200 OK", "application/json", json!({"greeting": "hello from data.json"}).to_string()),
        "/bad" => ("200 OK", "text/html", format!("{HEAD}{BAD}")),
        "/foreign" => ("200 OK", "text/html", format!("{HEAD}{FOREIGN}")),
        _ => ("404 Not Found", "text/plain", "not found".to_string()),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// The harness against pages of its own: text filled from a fetch and changed by a
/// timer, typing and clicking, a screenshot, console errors, and every request checked
/// against the origin.
#[test]
fn harness_reads_pages_and_catches_errors_and_foreign_requests() {
    let origin = serve_pages();
    let browser = Browser::start();

    browser.goto(&format!("{origin}/"));
    let filled = browser.wait_text("#filled", |text| text != "loading", Duration::from_secs(10));
    assert_eq!(filled, "hello from data.json");
    browser.wait_text("#later", |text| text == "after", Duration::from_secs(5));
    assert_eq!(browser.count("p"), 3);
    browser.type_into("#name", "typed by the harness");
    browser.click("#go");
    browser.wait_text("#echo", |text| text == "typed by the harness", Duration::from_secs(5));
    browser.add_cookie("harness", "yes");
    assert_eq!(browser.exec("return document.cookie;", &[]), json!("harness=yes"));
    assert_eq!(browser.exec("return arguments[0] + arguments[1];", &[json!(2), json!(3)]), json!(5));
    assert_eq!(browser.current_url(), format!("{origin}/"));

    let screenshot = browser.screenshot("harness-good-page");
    let png = std::fs::read(&screenshot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{} is not a PNG", screenshot.display());

    assert_eq!(browser.console_errors(), Vec::<String>::new());
    let urls = browser.requested_urls();
    assert!(urls.contains(&format!("{origin}/data.json")), "{urls:?}");
    browser.assert_only_requests_to(&origin);

    browser.goto(&format!("{origin}/bad"));
    browser.wait_text("#bad", |text| text == "bad", Duration::from_secs(5));
    let errors = browser.console_errors();
    assert!(errors.iter().any(|error| error.contains("the bad page's error")), "{errors:?}");
    browser.assert_only_requests_to(&origin);

    browser.clear_logs();
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    browser.goto(&format!("{origin}/foreign"));
    browser.wait_text("#foreign", |text| text == "foreign", Duration::from_secs(5));
    assert!(browser.requested_urls().contains(&"http://127.0.0.2:9/x".to_string()), "{:?}", browser.requested_urls());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| browser.assert_only_requests_to(&origin)));
    let message = caught.expect_err("a request to 127.0.0.2 passed the origin check");
    let message = message.downcast_ref::<String>().expect("a formatted panic message");
    assert!(message.contains("http://127.0.0.2:9/x"), "{message}");
}

/// How long a page has to show its data: the first load of a debug build is slow.
const PAGE: Duration = Duration::from_secs(30);

/// `text` contains every one of `needles`.
fn has(needles: &'static [&'static str]) -> impl Fn(&str) -> bool {
    move |text| needles.iter().all(|n| text.contains(n))
}

/// Opens the dashboard's page `hash` (`#/...`) of `n`.
fn visit(browser: &Browser, n: &Node, hash: &str) {
    browser.goto(&format!("{}/ui/{hash}", n.url));
}

/// Whether `POST /v1/sql` exists on `n` (the SQL console's route; until it does, the
/// console and the object listings show its 404 inline).
fn sql_exists(n: &Node) -> bool {
    let (status, v) = n.json("POST", "/v1/sql", br#"{"sql": "SELECT 1+1"}"#);
    status != 404 || v["error"]["code"] != "not_found"
}

/// Waits until the function `check` (JavaScript returning a boolean) holds in the page.
fn wait_js(browser: &Browser, what: &str, check: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while browser.exec(check, &[]) != json!(true) {
        if Instant::now() >= deadline {
            let shot = browser.screenshot(&format!("timeout-{what}"));
            panic!("{what}: not true after {timeout:?} (screenshot {})", shot.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the table at `path` has switched to `protocol` and the switch has ended.
fn switched(n: &Node, path: &str, protocol: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, v) = n.json("GET", path, b"");
        assert_eq!(status, 200, "{v}");
        if v["protocol"] == protocol && v["switching"].is_null() {
            return;
        }
        assert!(Instant::now() < deadline, "the switch did not end: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every page of the dashboard over a `tally dev` with functions, invocations (a call to
/// a child among them), records, a switched table, a schedule and printed lines: each
/// shows them, the health charts move while invocations go on, every page is kept as a
/// screenshot, no page logs an error, and nothing is asked of any origin but the node.
#[test]
fn every_page_of_the_dashboard_shows_the_nodes_real_data() {
    let (_dir, n) = node();
    n.deploy("bank", &guest("bank"), "");
    n.deploy("chain", &guest("chain"), "");
    n.deploy("web", &guest("http_probe"), "");
    n.deploy("retwis", &guest("retwis"), "");
    n.deploy("pipeline", &guest("pipeline"), "");
    assert_eq!(n.invoke_ok("bank", 1, "open alice 100"), "ok");
    assert_eq!(n.invoke_ok("bank", 1, "open bob 5"), "ok");
    let (status, out) =
        n.post_with("/v1/functions/bank/invoke?book=1", b"transfer alice bob 30", &[("idempotency-key", "ui-transfer")]);
    assert_eq!((status, String::from_utf8_lossy(&out).as_ref()), (200, "ok 70 35"));
    assert_eq!(n.invoke_ok("chain", 1, "x"), "saw:x");
    assert_eq!(n.send("POST", "/fn/web/print/3", &[], b"").text(), "printed 3");
    let created: serde_json::Value = serde_json::from_str(&n.invoke_ok("retwis", 1, "init 1 3 1")).expect("JSON");
    assert_eq!(created["created"], 3, "{created}");
    assert_eq!(n.invoke_ok("pipeline", 1, "produce orders 3 16"), r#"{"pushed":3}"#);
    let (status, v) = n.json("PUT", "/v1/books/1/tables/accounts", br#"{"protocol": "write-optimized"}"#);
    assert_eq!(status, 202, "{v}");
    switched(&n, "/v1/books/1/tables/accounts", "write-optimized");
    let schedule = json!({ "function": "bank", "book": 1, "input": "total alice bob", "every_ms": 3_600_000 });
    let (status, v) = n.json("PUT", "/v1/schedules/hourly-total", schedule.to_string().as_bytes());
    assert_eq!(status, 201, "{v}");
    let (_, listed) = n.json("GET", "/v1/invocations?book=1", b"");
    let ids = |function: &str| -> Vec<String> {
        let all = listed["invocations"].as_array().expect("invocations");
        all.iter().filter(|i| i["function"] == function).map(|i| i["invocation_id"].as_str().unwrap().to_string()).collect()
    };
    let transfer = ids("bank")[2].clone();
    let chain = ids("chain")[0].clone();
    let sql = sql_exists(&n);

    let browser = Browser::start();
    let started = Instant::now();

    visit(&browser, &n, "#/functions");
    browser.wait_text("#functions", has(&["bank", "chain", "web"]), PAGE);
    browser.screenshot("ui-functions");
    browser.click("#functions a[href='#/function/bank']");
    browser.wait_text("main", has(&["Version 1", "Limits", "10 s", "Versions"]), PAGE);
    browser.screenshot("ui-function");

    visit(&browser, &n, "#/invocations?book=1");
    browser.wait_text("#invocations", |t| t.contains(&transfer) && t.contains(&chain) && t.contains("succeeded"), PAGE);
    assert_eq!(browser.count("#invocations tr.invocation"), 6, "open, open, transfer, chain, init, produce");
    // The newest first, unless asked for the oldest.
    let listed_ids: Vec<String> =
        listed["invocations"].as_array().unwrap().iter().map(|i| i["invocation_id"].as_str().unwrap().to_string()).collect();
    let rows = || -> Vec<String> {
        let v =
            browser.exec("return [...document.querySelectorAll('#invocations tr.invocation')].map((r) => r.dataset.id);", &[]);
        serde_json::from_value(v).expect("row ids")
    };
    assert_eq!(rows(), listed_ids.iter().rev().cloned().collect::<Vec<_>>(), "newest first");
    browser.screenshot("ui-invocations");
    visit(&browser, &n, "#/invocations?book=1&order=oldest");
    browser.wait_text("#invocations", |t| t.contains(&transfer), PAGE);
    assert_eq!(rows(), listed_ids, "oldest first when asked");
    visit(&browser, &n, "#/invocations?book=1&key=ui-transfer");
    browser.wait_text("#invocations", |t| t.contains(&transfer), PAGE);
    assert_eq!(browser.count("#invocations tr.invocation"), 1, "filtered by its idempotency key");

    browser.click(&format!("#invocations a[href^='#/invocation/{transfer}']"));
    browser.wait_text("#step-table", has(&["accounts", "read-optimized", "ok 70 35"]), PAGE);
    let rows = browser.exec(
        "return [...document.querySelectorAll('#step-table tr.step')].map((r) => \
         [r.querySelector('.kind').textContent, r.querySelector('.table').textContent, r.querySelector('.value .text')?.textContent ?? '']);",
        &[],
    );
    assert!(rows.as_array().unwrap().contains(&json!(["put", "accounts", "70"])), "a put of 70 to accounts: {rows}");
    assert_eq!(browser.count("#step-table td.timeline circle"), 6, "init, two reads, two puts, the result");
    let breakdown = browser.wait_text("#breakdown .legend", has(&["guest", "total"]), PAGE);
    assert!(breakdown.contains(" ms"), "each part with its time: {breakdown}");
    assert!(browser.count("#breakdown svg rect") >= 3, "a stacked bar");
    browser.screenshot("ui-invocation");

    // A child: its ID holds a `/`, which the link and the API call encode.
    visit(&browser, &n, &format!("#/invocation/{chain}?book=1"));
    browser.wait_text("#step-table", has(&["call", "saw:x"]), PAGE);
    browser.click("#step-table td.child a");
    browser.wait_text("#invocation-id", |t| t == format!("{chain}/1"), PAGE);
    browser.wait_text("#step-table", has(&["init", "result", "saw:x"]), PAGE);
    browser.wait_text("main", has(&["child of"]), PAGE);
    browser.screenshot("ui-invocation-child");

    visit(&browser, &n, "#/logs");
    browser.wait_text("#logs", has(&["line 0", "line 2", "done", "stderr", "web"]), PAGE);
    browser.screenshot("ui-logs");

    visit(&browser, &n, "#/books");
    browser.wait_text("#books", has(&["1", "accounts: write-optimized"]), PAGE);
    browser.screenshot("ui-books");

    // The records of book 1, tailed: a record appended after the page loaded appears.
    visit(&browser, &n, "#/book/1");
    browser.wait_text("#records", has(&["x"]), PAGE);
    browser.wait_text("#tail-status", has(&["tailing"]), PAGE);
    assert_eq!(n.invoke_ok("chain", 1, "appended-while-tailing"), "saw:appended-while-tailing");
    browser.wait_text("#records", has(&["appended-while-tailing"]), Duration::from_secs(10));
    browser.screenshot("ui-book");
    let tag = browser.exec("return document.querySelector('#records tr.record .chip').textContent;", &[]);
    browser.click("#records tr.record .chip");
    browser.wait_text("#tail-status", has(&["tailing"]), PAGE);
    assert!(browser.current_url().ends_with(&format!("#/book/1?tag={}", tag.as_str().unwrap())), "{}", browser.current_url());
    browser.wait_text("#records", has(&["appended-while-tailing"]), PAGE);

    visit(&browser, &n, "#/tables?book=1");
    browser.wait_text("#tables", has(&["accounts", "write-optimized", "read-optimized → write-optimized"]), PAGE);
    browser.screenshot("ui-tables");

    // Objects and queues: listed through SQL (once it exists), each looked up by name.
    visit(&browser, &n, "#/objects?book=1");
    let pick = |list: &str, name: &str| {
        let js =
            "const b = [...document.querySelectorAll(arguments[0] + ' .chip')].find((b) => b.textContent === arguments[1]); \
                  if (b) b.click(); return !!b;";
        assert_eq!(browser.exec(js, &[json!(list), json!(name)]), json!(true), "{name} in {list}");
    };
    if sql {
        browser.wait_text("#object-list", has(&["Objects (", "user:1", "timeline:3", "user:3"]), PAGE);
        browser.wait_text("#queue-list", has(&["Queues (1)", "orders"]), PAGE);
        pick("#queue-list", "orders");
        browser.wait_text("#lookup", has(&["Queue orders", "waiting", "3"]), PAGE);
        browser.screenshot("ui-objects-queue");
        pick("#object-list", "user:1");
    } else {
        browser.wait_text("#object-list", has(&["404", "not_found"]), PAGE);
        browser.type_into("#lookup-form input[name=name]", "user:1");
        browser.click("#lookup-form button");
    }
    browser.wait_text("#lookup", has(&["Object user:1", "\"password\": \"pw1\"", "profile"]), PAGE);
    browser.screenshot("ui-objects");
    browser.exec("document.querySelector('#lookup-form input[name=name]').value = '';", &[]);
    browser.type_into("#lookup-form input[name=name]", "no-such-object");
    browser.click("#lookup-form button");
    browser.wait_text("#lookup", has(&["no-such-object", "No such object", "null"]), PAGE);

    visit(&browser, &n, "#/schedules");
    browser.wait_text("#schedules", has(&["hourly-total", "bank", "every 1 h", "active"]), PAGE);
    browser.screenshot("ui-schedules");

    visit(&browser, &n, "#/audit");
    browser.wait_text("#audit", has(&["function.deploy", "token.grant", "local"]), PAGE);
    browser.screenshot("ui-audit");

    // Health: the charts move while invocations go on.
    let invoking = AtomicBool::new(true);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while invoking.load(Ordering::Relaxed) {
                n.invoke_ok("bank", 1, "balance alice");
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        visit(&browser, &n, "#/health");
        browser.wait_text("main .stats", has(&["ok", "answered in"]), PAGE);
        let rate =
            browser.wait_text("#chart-rate .legend", |t| t.contains("ok") && t.contains("/s") && !t.contains("0.0/s"), PAGE);
        let chart = || browser.exec("return document.querySelector('#chart-rate svg').outerHTML;", &[]);
        let before = chart();
        let deadline = Instant::now() + Duration::from_secs(5);
        while chart() == before {
            assert!(Instant::now() < deadline, "the invocation chart did not change within 5 s (legend: {rate})");
            std::thread::sleep(Duration::from_millis(100));
        }
        browser.wait_text("#chart-parts .legend", has(&["guest", " ms"]), PAGE);
        browser.screenshot("ui-health");
        invoking.store(false, Ordering::Relaxed);
    });

    visit(&browser, &n, "#/sql");
    browser.wait_text("#sql-form", has(&["Run"]), PAGE);
    browser.exec("document.getElementById('sql-text').value = '';", &[]);
    browser.type_into("#sql-text", "SELECT 1+1");
    browser.click("#sql-run");
    if sql {
        browser.wait_text("#sql-table", |t| t.lines().any(|line| line.trim() == "2"), PAGE);
    } else {
        browser.wait_text("#sql-result", has(&["404", "not_found", "/v1/sql"]), PAGE);
    }
    browser.screenshot("ui-sql");

    // Until POST /v1/sql exists, Chromium logs each of its 404s; nothing else may log.
    let errors: Vec<String> =
        browser.console_errors().into_iter().filter(|e| sql || !(e.contains("/v1/sql") && e.contains("404"))).collect();
    assert_eq!(errors, Vec::<String>::new());
    browser.assert_only_requests_to(&n.url);
    println!("every page shown in {:?}", started.elapsed());
}

/// Whether the login form is shown.
const LOGIN_SHOWN: &str = "return !document.getElementById('login').hidden;";

/// `tally dev --auth token`: the dashboard asks for a token, refuses a wrong one, keeps
/// the right one in an HttpOnly cookie (no script sees it) that the pages' requests
/// carry, and forgets it at logout; the cookie's attributes, the pages' headers and the
/// refusal of another site's request, over HTTP.
#[test]
fn the_dashboard_trades_a_token_for_an_httponly_cookie() {
    let (dir, n) = node_with(&["--auth", "token"]);
    let admin = std::fs::read_to_string(dir.path().join("data").join("admin.token")).expect("the admin token").trim().to_string();
    let bearer = format!("Bearer {admin}");
    let deployed = n.send("PUT", "/v1/functions/bank", &[("authorization", &bearer)], &guest("bank"));
    assert_eq!(deployed.status, 201, "{}", deployed.text());
    let opened = n.send("POST", "/v1/functions/bank/invoke?book=1", &[("authorization", &bearer)], b"open alice 100");
    assert_eq!(opened.text(), "ok");

    // Over HTTP: the files, their headers, the login's answers and the cookie's use.
    let page = n.send("GET", "/ui/", &[], b"");
    assert_eq!(page.status, 200, "the page needs no token");
    let csp = page.header("content-security-policy");
    assert_eq!(
        csp,
        ["default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'"]
    );
    assert_eq!(page.header("x-content-type-options"), ["nosniff"]);
    assert_eq!(page.header("cache-control"), ["no-cache"]);
    assert!(page.text().contains("<link rel=\"icon\" href=\"data:,\">"));
    for (path, kind) in [("/ui/app.js", "text/javascript"), ("/ui/app.css", "text/css")] {
        let a = n.send("GET", path, &[], b"");
        assert_eq!(a.status, 200, "{path}");
        assert!(a.header("content-type")[0].starts_with(kind), "{path}: {:?}", a.header("content-type"));
        assert_eq!(a.header("content-security-policy"), csp, "{path}");
    }
    let bare = n.send("GET", "/ui", &[], b"");
    assert_eq!((bare.status, bare.header("location")), (308, vec!["/ui/"]));
    assert_eq!(n.send("GET", "/ui/other", &[], b"").status, 404);
    let wrong = n.send(
        "POST",
        "/ui/login",
        &[],
        json!({ "token": format!("tally_{}_{}", "0".repeat(16), "0".repeat(64)) }).to_string().as_bytes(),
    );
    assert_eq!((wrong.status, wrong.header("set-cookie").len()), (401, 0), "{}", wrong.text());
    let login = json!({ "token": admin }).to_string();
    let a = n.send("POST", "/ui/login", &[("sec-fetch-site", "cross-site")], login.as_bytes());
    assert_eq!(a.status, 403, "another site cannot log the browser in: {}", a.text());
    let a = n.send(
        "POST",
        "/ui/login",
        &[("content-type", "application/x-www-form-urlencoded")],
        format!("token={admin}").as_bytes(),
    );
    assert_eq!(a.status, 204, "{}", a.text());
    let cookies = a.header("set-cookie");
    assert_eq!(
        cookies,
        [
            format!("tally_token={admin}; HttpOnly; SameSite=Strict; Path=/v1"),
            format!("tally_token={admin}; HttpOnly; SameSite=Strict; Path=/metrics")
        ],
        "never sent to an HTTP function (/fn/...), which sees its requests' headers"
    );
    let cookie = format!("tally_token={admin}");
    let same = [("cookie", cookie.as_str()), ("sec-fetch-site", "same-origin")];
    assert_eq!(n.send("GET", "/v1/functions", &same, b"").status, 200, "the cookie is a token");
    assert_eq!(n.send("GET", "/metrics", &same, b"").status, 200);
    let cross = n.send("GET", "/v1/functions", &[("cookie", cookie.as_str()), ("sec-fetch-site", "cross-site")], b"");
    assert_eq!(cross.status, 403, "{}", cross.text());
    assert!(cross.text().contains("refused the tally_token cookie"), "{}", cross.text());
    let malformed = n.send("GET", "/v1/functions", &[("cookie", "tally_token=nonsense")], b"");
    assert_eq!(malformed.status, 401);
    assert!(malformed.text().contains("the tally_token cookie: no valid token"), "{}", malformed.text());
    let both = n.send("GET", "/v1/functions", &[("cookie", "tally_token=nonsense"), ("authorization", &bearer)], b"");
    assert_eq!(both.status, 200, "Authorization wins over the cookie");
    let out = n.send("POST", "/ui/logout", &[], b"");
    assert_eq!(out.status, 204);
    assert!(
        out.header("set-cookie").iter().all(|c| c.starts_with("tally_token=;") && c.contains("Max-Age=0")),
        "{out:?}",
        out = out.header("set-cookie")
    );

    // In the browser: asked, refused, logged in, pages with data, logged out.
    let browser = Browser::start();
    visit(&browser, &n, "#/functions");
    wait_js(&browser, "the login form", LOGIN_SHOWN, PAGE);
    browser.screenshot("ui-login");
    browser.type_into("#login-token", &format!("tally_{}_{}", "1".repeat(16), "2".repeat(64)));
    browser.click("#login-submit");
    browser.wait_text("#login-error", has(&["unknown token"]), PAGE);
    browser.exec("document.getElementById('login-token').value = '';", &[]);
    browser.type_into("#login-token", "not a token");
    browser.click("#login-submit");
    browser.wait_text("#login-error", has(&["not a Tally token"]), PAGE);
    browser.screenshot("ui-login-refused");
    browser.exec("document.getElementById('login-token').value = '';", &[]);
    browser.type_into("#login-token", &admin);
    browser.click("#login-submit");
    wait_js(&browser, "the login form gone", "return document.getElementById('login').hidden;", PAGE);
    browser.wait_text("#functions", has(&["bank"]), PAGE);
    wait_js(&browser, "book 1 picked once the books can be read", "return document.getElementById('book').value === '1';", PAGE);
    assert_eq!(browser.exec("return document.cookie;", &[]), json!(""), "HttpOnly: no script reads the token");
    browser.screenshot("ui-logged-in");
    visit(&browser, &n, "#/invocations?book=1");
    browser.wait_text("#invocations", has(&["bank", "succeeded"]), PAGE);
    visit(&browser, &n, "#/health");
    browser.wait_text("main .stats", has(&["ok", "answered in"]), PAGE);
    browser.wait_text("#function-stats", has(&["bank"]), PAGE);
    visit(&browser, &n, "#/tables?book=1");
    browser.wait_text("#tables", has(&["accounts"]), PAGE);

    browser.click("#logout");
    wait_js(&browser, "the login form after logout", LOGIN_SHOWN, PAGE);

    // The only errors are the refusals the login answered: the first page's requests
    // before it, the wrong tokens, and the requests after logout.
    let errors: Vec<String> = browser.console_errors().into_iter().filter(|e| !e.contains("status of 401")).collect();
    assert_eq!(errors, Vec::<String>::new());
    browser.assert_only_requests_to(&n.url);
}

/// Over HTTPS the cookie is also `Secure`: a browser never sends it in the clear.
#[test]
fn a_login_over_https_sets_a_secure_cookie() {
    let dir = tempfile::tempdir().unwrap();
    let ca = tally_logsvc::net::ClusterCa::generate("dashboard-test").unwrap();
    let (ca_pem, cert_pem, key_pem) = ca.issue_for("gateway", vec!["127.0.0.1".into()]).unwrap().pem();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, cert_pem).unwrap();
    std::fs::write(&key, key_pem).unwrap();
    common::use_ca(ca_pem.as_bytes());
    let n = Node::start_with(
        dir.path().join("data"),
        &["--tls-cert-file", cert.to_str().unwrap(), "--tls-key-file", key.to_str().unwrap()],
    );
    assert!(n.url.starts_with("https://"), "{}", n.url);
    let admin = std::fs::read_to_string(dir.path().join("data").join("admin.token")).expect("the admin token");
    let a = n.send("POST", "/ui/login", &[], json!({ "token": admin.trim() }).to_string().as_bytes());
    assert_eq!(a.status, 204, "{}", a.text());
    let cookies = a.header("set-cookie");
    assert_eq!(cookies.len(), 2, "{cookies:?}");
    assert!(cookies.iter().all(|c| c.ends_with("; Secure") && c.contains("; HttpOnly; SameSite=Strict; Path=/")), "{cookies:?}");
}
