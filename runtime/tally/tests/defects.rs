//! Scenarios in which an outside review found the exactly-once layer silently giving
//! wrong answers, one test each, end to end through HTTP against a real `tally dev`.
//! Each test names its defect and fails when that defect's fix is reverted (the commit
//! that added this file says how each failed).
//!
//! Most use the `steps` test guest's scripts (`tests/guests/steps`): state ops, calls
//! whose errors come back as `error:<code>`, and the log calls a guest can make.

mod common;

use std::sync::Barrier;
use std::thread;

use common::{guest, node, node_with, Node};
use serde_json::Value;

/// A node that honours `Tally-Crash-After`.
fn crashing_node() -> (tempfile::TempDir, Node) {
    node_with(&["--crash-injection", "true"])
}

/// Invokes `function` on `book` with an idempotency key (and a crash after `crash_after`
/// effects, when given); returns the status and the body as text.
fn keyed(n: &Node, function: &str, book: u64, input: &str, key: &str, crash_after: Option<u64>) -> (u16, String) {
    let crash_after = crash_after.map(|c| c.to_string());
    let mut headers = vec![("idempotency-key", key)];
    if let Some(c) = &crash_after {
        headers.push(("tally-crash-after", c));
    }
    let (status, body) = n.post_with(&format!("/v1/functions/{function}/invoke?book={book}"), input.as_bytes(), &headers);
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Expects a keyed invocation to stop at the injected crash.
fn crash(n: &Node, function: &str, book: u64, input: &str, key: &str, after: u64) {
    let reply = keyed(n, function, book, input, key, Some(after));
    assert_eq!(reply.0, 500, "{input:?} with a crash after {after} effects: {}", reply.1);
    assert!(reply.1.contains("injected_crash"), "{}", reply.1);
}

/// The records of `book` (every tag) as `GET /v1/books/{book}/records` lists them.
fn records(n: &Node, book: u64) -> Vec<Value> {
    let (status, page) = n.json("GET", &format!("/v1/books/{book}/records?limit=1000"), b"");
    assert_eq!(status, 200, "{page}");
    assert!(page["next"].is_null(), "one page holds them all: {page}");
    page["records"].as_array().expect("records").clone()
}

/// Defect 1: the exactly-once records of book B (step logs, write logs, transition
/// logs) lived in book B itself, so B's records listed them, and a guest's
/// `log::trim(Tag::ALL, s)` on B trimmed them too: a keyed retry then found its step log
/// gone and was refused as a result no longer kept. They now live in B's shadow book,
/// which no user call can name: a guest's trim leaves them alone, and B's records are
/// only what guests appended.
#[test]
fn a_guest_trimming_its_whole_book_leaves_the_platform_records_alone() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "");
    let book = 11;
    assert_eq!(keyed(&n, "steps", book, "script inc t k", "first", None), (200, "1".into()));
    let note = n.invoke_ok("steps", book, "script append notes hello");
    // The book holds what the guest appended, and none of the platform's records.
    let listed = records(&n, book);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!((listed[0]["seqnum"].to_string(), listed[0]["data"]["text"].as_str()), (note, Some("hello")));

    let trim = format!("script trim0 {}", u64::MAX >> 1);
    assert_eq!(n.invoke_ok("steps", book, &trim), "ok");
    assert_eq!(records(&n, book), Vec::<Value>::new(), "the guest's trim took its own records");
    // The retry gets its logged result, the table reads as before, and new exactly-once
    // invocations work.
    assert_eq!(keyed(&n, "steps", book, "script inc t k", "first", None), (200, "1".into()));
    assert_eq!(n.invoke_ok("steps", book, "read t k"), "1");
    assert_eq!(keyed(&n, "steps", book, "script inc t k", "second", None), (200, "2".into()));
    assert_eq!(keyed(&n, "steps", book, "script inc t k", "second", None), (200, "2".into()));
    assert_eq!(n.invoke_ok("steps", book, "read t k"), "2");
    assert_eq!(records(&n, book), Vec::<Value>::new(), "exactly-once records are not the book's");
}

/// Defect 2: instance IDs were strings, a keyed root `key:{function}:{key}` and a child
/// `{parent}.{step}`, so the key `k.1` named the child called at step 1 of the
/// invocation keyed `k` (and shared its step log): with the child's input it got the
/// child's result without running, with another input a conflict. IDs are now
/// structured and encoded unambiguously.
#[test]
fn a_key_with_a_separator_never_names_a_child_of_another_key() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "");
    let book = 12;
    // Step 1 of `k` and of `p` calls a child: `script inc t a`, `script inc t c`.
    assert_eq!(keyed(&n, "steps", book, "script child t a", "k", None), (200, "1".into()));
    assert_eq!(keyed(&n, "steps", book, "script child t c", "p", None), (200, "1".into()));
    // The child's very input, under a key that spells the child: a new invocation.
    assert_eq!(keyed(&n, "steps", book, "script inc t a", "k.1", None), (200, "2".into()));
    // Other inputs.
    assert_eq!(keyed(&n, "steps", book, "script inc t d", "p.1", None), (200, "1".into()));
    assert_eq!(keyed(&n, "steps", book, "script inc t e", "p/1", None), (200, "1".into()));
    // Each retry gets its own logged result, and each ran once.
    assert_eq!(keyed(&n, "steps", book, "script child t a", "k", None), (200, "1".into()));
    assert_eq!(keyed(&n, "steps", book, "script inc t a", "k.1", None), (200, "2".into()));
    assert_eq!(keyed(&n, "steps", book, "script inc t d", "p.1", None), (200, "1".into()));
    assert_eq!(keyed(&n, "steps", book, "script inc t e", "p/1", None), (200, "1".into()));
    assert_eq!(n.invoke_ok("steps", book, "script get t a; get t c; get t d; get t e"), "2,1,1,1");
}

/// Defect 3: a retry after a redeploy ran the unfinished invocation on the new version
/// (the current one) instead of the one its Init record names, mixing two programs'
/// steps in one invocation. It now finishes on the version that started it.
#[test]
fn after_a_redeploy_an_unfinished_invocation_finishes_on_its_own_version() {
    let (_dir, n) = crashing_node();
    n.deploy("app", &guest("steps"), "");
    n.deploy("reader", &guest("steps"), "");
    let book = 13;
    let input = "script inc t a; inc t b";
    // Effects: the Init record, then a's version and its write-log record; b not yet.
    crash(&n, "app", book, input, "r", 3);
    assert_eq!(n.invoke_ok("reader", book, "script get t a; get t b"), "1,none");
    // Version 2 is another program, which does not understand the input at all.
    let v = n.deploy("app", &guest("bank"), "");
    assert_eq!(v["version"]["version"], 2, "{v}");
    n.expect_error(n.invoke("app", book, input), 500, "function_error");
    assert_eq!(keyed(&n, "app", book, input, "r", None), (200, "1,1".into()));
    assert_eq!(keyed(&n, "app", book, input, "r", None), (200, "1,1".into()));
    assert_eq!(n.invoke_ok("reader", book, "script get t a; get t b"), "1,1");
}

/// Defect 4: the log attached aux data to any seqnum a caller named, a record of another
/// book or one not written yet included, and readers of that record's book got it back.
/// Aux data is now accepted only for a record live in the caller's book.
#[test]
fn aux_data_only_on_live_records_of_the_callers_book() {
    let (_dir, n) = node();
    n.deploy("counter", &guest("counter"), "");
    n.deploy("steps", &guest("steps"), "");
    assert_eq!(n.invoke_ok("counter", 9, "incr 5"), "5");
    assert_eq!(n.invoke_ok("counter", 9, "incr"), "6");
    let (status, page) = n.json("GET", "/v1/books/9/records?tag=counter", b"");
    assert_eq!(status, 200, "{page}");
    let last = page["records"][1]["seqnum"].as_u64().unwrap_or_else(|| panic!("two increments: {page}"));

    // Book 1 names book 9's record, then a seqnum past every record so far, with 8
    // bytes the counter would take for a snapshot of its value.
    assert_eq!(n.invoke_ok("steps", 1, &format!("script aux {last} 99999999")), "error:invalid_argument");
    assert_eq!(n.invoke_ok("steps", 1, &format!("script aux {} 99999999", last + 1)), "error:invalid_argument");
    // Its own record takes aux data, and reads return it.
    let own = n.invoke_ok("steps", 1, "script append notes hi; aux $1 snap; next notes $1");
    let seqnum = own.split(',').next().expect("a seqnum");
    assert_eq!(own, format!("{seqnum},ok,{seqnum}:hi:snap"));
    // Book 9's counter, which keeps snapshots in aux data, still counts right.
    assert_eq!(n.invoke_ok("counter", 9, "get"), "6");
    assert_eq!(n.invoke_ok("counter", 9, "incr"), "7");
    assert_eq!(n.invoke_ok("counter", 9, "get"), "7");
}

/// Defect 5: a call of a function that did not exist was not logged as the caller's
/// step, so after a crash the re-execution called again, and if the function had been
/// deployed meanwhile the guest took the other branch: its output and its state
/// disagreed with what the first execution had done. The not-found outcome is now
/// logged, and a re-execution gets it back.
#[test]
fn a_call_of_a_missing_function_is_logged() {
    let (_dir, n) = crashing_node();
    n.deploy("caller", &guest("steps"), "");
    let book = 15;
    let input = "script call missing x; put t outcome $1";
    // Effects: the Init record, the call's step; the put not yet.
    crash(&n, "caller", book, input, "m", 2);
    assert_eq!(n.invoke_ok("caller", book, "script get t outcome"), "none");
    n.deploy("missing", &guest("hello"), "");
    assert_eq!(n.invoke_ok("caller", book, "script call missing x"), "x", "missing exists now");
    assert_eq!(keyed(&n, "caller", book, input, "m", None), (200, "error:not_found,ok".into()));
    assert_eq!(n.invoke_ok("caller", book, "script get t outcome"), "error:not_found");
}

/// Defect 6: each function's declaration decided a table's protocol for its own
/// invocations, so a function declaring `accounts: unsafe` wrote a write-optimized table
/// raw, without logging, and a crash and retry applied its increments twice. A table's
/// protocol is now the table's (its transition log); a declaration names the protocol
/// of a table nobody used yet, and only an `unsafe` declaration may use an unsafe table.
#[test]
fn a_tables_protocol_is_the_tables_not_each_functions() {
    let (_dir, n) = crashing_node();
    n.deploy("f", &guest("steps"), "?tables=accounts:write-optimized,ledger:read-optimized");
    n.deploy("g", &guest("steps"), "?tables=accounts:unsafe,ledger:unsafe");
    let book = 16;
    assert_eq!(keyed(&n, "f", book, "script inc accounts n", "f1", None), (200, "1".into()));
    let input = "script inc accounts n; inc accounts m";
    // Write-optimized effects: the Init record, n's logged read, n's write; m not yet.
    crash(&n, "g", book, input, "g1", 3);
    assert_eq!(n.invoke_ok("f", book, "script get accounts n; get accounts m"), "2,none");
    assert_eq!(keyed(&n, "g", book, input, "g1", None), (200, "2,1".into()));
    assert_eq!(n.invoke_ok("f", book, "script get accounts n; get accounts m"), "2,1");
    let (status, table) = n.json("GET", &format!("/v1/books/{book}/tables/accounts"), b"");
    assert_eq!((status, table["protocol"].as_str()), (200, Some("write-optimized")), "{table}");

    // A table that began unsafe refuses a function that declares it exactly-once.
    assert_eq!(n.invoke_ok("g", book, "script inc ledger x"), "1");
    let message = n.expect_error(n.invoke("f", book, "script get ledger x"), 500, "function_error");
    assert!(message.contains("table \"ledger\" is unsafe"), "{message}");
    let (status, table) = n.json("GET", &format!("/v1/books/{book}/tables/ledger"), b"");
    assert_eq!((status, table["protocol"].as_str()), (200, Some("unsafe")), "{table}");
}

/// Defect 7: two requests with one key at the same time (a client's retry while the
/// first still runs) both ran the guest on the node, each as a peer of the other. One
/// node now runs one invocation's guest once at a time: the second waits for the first
/// and gets its logged result.
#[test]
fn a_concurrent_retry_does_not_run_the_guest_twice() {
    let (_dir, n) = node();
    n.deploy("slow", &guest("steps"), "");
    let book = 17;
    let input = "script inc t k; sleep 1000; inc t j";
    let start = Barrier::new(2);
    let replies: Vec<(u16, String)> = thread::scope(|s| {
        let clients: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    keyed(&n, "slow", book, input, "same", None)
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().expect("a client")).collect()
    });
    assert_eq!(replies, vec![(200, "1,ok,1".to_string()); 2]);
    assert_eq!(n.metric(r#"tally_invocations_total{function="slow",outcome="ok"}"#), 1, "the guest ran once");
    assert_eq!(n.metric("tally_replayed_results_total"), 1);
}

/// Asynchronous invocations (defect 8): a keyed ID derives from the function and the
/// key, not the book, so one key on two books names two invocations with one ID; each
/// status is found under its own `?book=` only, a resubmission returns the same ID, and
/// the key with another input is refused. (`e2e.rs` checks another book for an unkeyed
/// ID, `bank.rs` a keyed resubmission.)
#[test]
fn asynchronous_invocations_of_one_key_on_two_books_are_two() {
    let (_dir, n) = node();
    n.deploy("steps", &guest("steps"), "");
    let submit = |book: u64, input: &str| -> (u16, Value) {
        let (status, body) = n.post_with(
            &format!("/v1/functions/steps/invoke?book={book}&async=true"),
            input.as_bytes(),
            &[("idempotency-key", "a")],
        );
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    };
    let (status, v) = submit(18, "script inc t k");
    assert_eq!(status, 202, "{v}");
    let id = v["invocation_id"].as_str().expect("an id").to_string();
    let (status, v) = submit(19, "script inc t k; inc t k");
    assert_eq!((status, v["invocation_id"].as_str()), (202, Some(id.as_str())), "{v}");

    assert_eq!(n.finished(&id, 18)["output"]["text"], "1");
    assert_eq!(n.finished(&id, 19)["output"]["text"], "1,2");
    n.expect_error(n.request("GET", &format!("/v1/invocations/{id}?book=20"), b""), 404, "invocation_not_found");
    // Resubmitted: the same invocation, not run again; another input: refused.
    let (status, v) = submit(18, "script inc t k");
    assert_eq!((status, v["invocation_id"].as_str()), (202, Some(id.as_str())), "{v}");
    let (status, v) = submit(18, "script inc t j");
    assert_eq!((status, v["error"]["code"].as_str()), (409, Some("conflict")), "{v}");
    assert_eq!(n.invoke_ok("steps", 18, "script get t k; get t j"), "1,none");
    assert_eq!(n.invoke_ok("steps", 19, "script get t k; get t j"), "2,none");
    // After a restart the statuses come from the step logs, each book's its own.
    let n = n.restart();
    assert_eq!(n.finished(&id, 18)["output"]["text"], "1");
    assert_eq!(n.finished(&id, 19)["output"]["text"], "1,2");
    n.expect_error(n.request("GET", &format!("/v1/invocations/{id}?book=20"), b""), 404, "invocation_not_found");
}
