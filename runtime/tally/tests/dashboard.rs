//! Browser tests of the pages a node serves, in a headless Chromium driven by
//! `common/browser.rs`. For now the harness's own test, against a page of its own; the
//! dashboard's (`/ui` of `tally dev`) will join it here.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::browser::Browser;
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
