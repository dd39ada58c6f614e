//! `POST /v1/sql` and `tally sql`: every table answers real data, `AS OF` reads the
//! book as it was at a seqnum, and the engine refuses writes, files and runaway queries.

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use common::{guest, node_with, Node};
use serde_json::{json, Value};

/// A query's answer, or its error's (status, code).
fn sql(n: &Node, query: &str) -> Result<Value, (u16, String)> {
    let (status, v) = n.json("POST", "/v1/sql", json!({ "sql": query }).to_string().as_bytes());
    if status == 200 {
        Ok(v)
    } else {
        Err((status, v["error"]["code"].as_str().unwrap_or("").to_string() + ": " + v["error"]["message"].as_str().unwrap_or("")))
    }
}

fn rows(n: &Node, query: &str) -> Vec<Vec<Value>> {
    let v = sql(n, query).unwrap_or_else(|e| panic!("{query}: {e:?}"));
    serde_json::from_value(v["rows"].clone()).expect("rows")
}

fn one(n: &Node, query: &str) -> Value {
    let r = rows(n, query);
    assert_eq!(r.len(), 1, "{query}: {r:?}");
    r[0][0].clone()
}

fn post(n: &Node, function: &str, key: &str, body: &str) -> String {
    let a = n.send("POST", &format!("/v1/functions/{function}/invoke?book=1"), &[("idempotency-key", key)], body.as_bytes());
    assert_eq!(a.status, 200, "{body}: {}", a.text());
    a.text()
}

#[test]
fn every_table_answers_and_filters_reach_the_index() {
    let (_dir, n) = node_with(&[]);
    n.deploy("bank", &guest("bank"), "");
    n.deploy("chain", &guest("chain"), "");
    n.deploy("steps", &guest("steps"), "");
    post(&n, "bank", "a", "open alice 100");
    post(&n, "bank", "b", "open bob 5");
    post(&n, "bank", "t", "transfer alice bob 30");
    post(&n, "chain", "c", "hi");
    post(&n, "steps", "s", r#"script oset cart . {"n":1};oinc cart /n 2;qpush jobs hello;qpush jobs world"#);

    assert_eq!(one(&n, "SELECT 1+1"), json!(2));
    let names: Vec<Value> = rows(&n, "SELECT name FROM functions ORDER BY name").into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(names, vec![json!("bank"), json!("chain"), json!("steps")]);
    assert_eq!(one(&n, "SELECT count(*) FROM versions WHERE function = 'bank'"), json!(1));
    assert_eq!(one(&n, "SELECT count(*) FROM invocations WHERE book = 1"), json!(5));
    assert_eq!(one(&n, "SELECT count(*) FROM invocations WHERE book = 1 AND function = 'bank'"), json!(3));
    assert!(
        rows(&n, "SELECT status FROM invocations WHERE book = 1 AND key = 't'").is_empty(),
        "`key` is `?key=`, not an idempotency key"
    );
    let id = one(&n, "SELECT invocation_id FROM steps WHERE book = 1 AND kind = 'init' AND value = 'transfer alice bob 30'");
    let id = id.as_str().unwrap().to_string();
    assert_eq!(one(&n, &format!("SELECT function FROM invocations WHERE book = 1 AND invocation_id = '{id}'")), json!("bank"));
    let writes = rows(&n, &format!("SELECT key, value, value_encoding, protocol FROM steps WHERE book = 1 AND invocation_id = '{id}' AND kind IN ('put', 'write') ORDER BY step"));
    assert_eq!(
        writes,
        vec![
            vec![json!("alice"), json!("70"), json!("i64"), json!("read-optimized")],
            vec![json!("bob"), json!("35"), json!("i64"), json!("read-optimized")]
        ]
    );
    // A child's steps are listed under its root.
    let child = rows(&n, "SELECT s.invocation_id, s.value FROM steps s JOIN invocations i ON s.root_id = i.invocation_id WHERE s.book = 1 AND i.book = 1 AND i.function = 'chain' AND s.kind = 'init' AND s.invocation_id != s.root_id");
    assert_eq!(child.len(), 1, "{child:?}");
    assert!(child[0][1].as_str().unwrap().starts_with("child:"));
    let state = rows(&n, "SELECT key, value FROM state WHERE book = 1 AND table_name = 'accounts' ORDER BY key");
    assert_eq!(state, vec![vec![json!("alice"), json!("70")], vec![json!("bob"), json!("35")]]);
    assert_eq!(one(&n, "SELECT count(*) FROM records WHERE book = 1 AND tag = 'chain'"), json!(1));
    assert_eq!(one(&n, "SELECT data FROM records WHERE book = 1 AND tag = 'chain'"), json!("hi"));
    assert_eq!(one(&n, "SELECT protocol FROM tables WHERE book = 1 AND table_name = 'accounts'"), json!("read-optimized"));
    assert_eq!(one(&n, "SELECT value FROM objects WHERE book = 1 AND name = 'cart'"), json!(r#"{"n":3}"#));
    assert_eq!(one(&n, "SELECT name FROM objects WHERE book = 1"), json!("cart"));
    assert_eq!(one(&n, "SELECT sum(pending) FROM queues WHERE book = 1 AND name = 'jobs'"), json!(2));
    assert_eq!(one(&n, "SELECT count(*) FROM schedules"), json!(0));
    let _ = one(&n, "SELECT count(*) FROM logs");
    // Durations and breakdowns are there to query.
    let slowest = rows(&n, "SELECT function, duration_ms, json_extract(breakdown, '$.guest') FROM invocations WHERE book = 1 ORDER BY duration_ms DESC LIMIT 1");
    assert!(slowest[0][1].as_i64().is_some() && slowest[0][2].as_i64().is_some(), "{slowest:?}");

    // The CLI prints the same.
    let out = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(["sql", "SELECT key, value FROM state WHERE book = 1 AND table_name = 'accounts' ORDER BY key"])
        .env("TALLY_URL", &n.url)
        .env("TALLY_CONFIG_DIR", n.dir.join("cli"))
        .output()
        .expect("tally sql");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("alice  70") && text.contains("2 rows"), "{text}");
}

#[test]
fn as_of_reads_each_balance_as_the_model_had_it_and_the_total_never_changes() {
    let (_dir, n) = node_with(&[]);
    n.deploy("bank", &guest("bank"), "");
    let accounts = ["a", "b", "c", "d"];
    let mut model: BTreeMap<&str, i64> = BTreeMap::new();
    for (i, a) in accounts.iter().enumerate() {
        post(&n, "bank", &format!("open-{a}"), &format!("open {a} 100"));
        model.insert(a, 100);
        let _ = i;
    }
    // After each transfer, the seqnum of its Result and the model then.
    let mut checkpoints = Vec::new();
    let mut rng = common::Rng(7);
    for i in 0..20 {
        let from = accounts[rng.below(4) as usize];
        let to = accounts[(accounts.iter().position(|a| *a == from).unwrap() + 1 + rng.below(3) as usize) % 4];
        let amount = rng.below(50) as i64;
        post(&n, "bank", &format!("t{i}"), &format!("transfer {from} {to} {amount}"));
        *model.get_mut(from).unwrap() -= amount;
        *model.get_mut(to).unwrap() += amount;
        let id = one(&n, &format!("SELECT invocation_id FROM steps WHERE book = 1 AND kind = 'init' AND value = 'transfer {from} {to} {amount}' ORDER BY seqnum DESC LIMIT 1"));
        let done = one(
            &n,
            &format!(
                "SELECT seqnum FROM steps WHERE book = 1 AND invocation_id = '{}' AND kind = 'result'",
                id.as_str().unwrap()
            ),
        );
        checkpoints.push((done.as_u64().unwrap(), model.clone()));
    }
    for (seqnum, want) in &checkpoints {
        let got: BTreeMap<String, i64> =
            rows(&n, &format!("SELECT key, value FROM state WHERE book = 1 AND table_name = 'accounts' AS OF {seqnum}"))
                .into_iter()
                .map(|r| (r[0].as_str().unwrap().to_string(), r[1].as_str().unwrap().parse().unwrap()))
                .collect();
        let want: BTreeMap<String, i64> = want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(got, want, "as of {seqnum}");
        let total = one(
            &n,
            &format!("SELECT sum(CAST(value AS INTEGER)) FROM state WHERE book = 1 AND table_name = 'accounts' AS OF {seqnum}"),
        );
        assert_eq!(total, json!(400));
        // Every table of the query reads at the same position.
        let later = one(&n, &format!("SELECT count(*) FROM invocations WHERE book = 1 AND seqnum > {seqnum} AS OF {seqnum}"));
        assert_eq!(later, json!(0));
    }
    // Before the first open, nothing; the field form agrees with the clause.
    let (status, v) = n.json(
        "POST",
        "/v1/sql",
        json!({ "sql": "SELECT count(*) FROM state WHERE book = 1", "as_of": 1 }).to_string().as_bytes(),
    );
    assert_eq!((status, v["rows"][0][0].clone()), (200, json!(0)), "{v}");
}

#[test]
fn writes_files_and_runaway_queries_are_refused() {
    let (_dir, n) = node_with(&["--sql-time-ms", "1500", "--sql-scan-rows-max", "100000"]);
    n.deploy("bank", &guest("bank"), "");
    post(&n, "bank", "a", "open alice 100");
    for (query, code) in [
        ("DELETE FROM state", "sql_refused"),
        ("INSERT INTO functions (name) VALUES ('x')", "sql_refused"),
        ("CREATE TABLE t (a)", "sql_refused"),
        ("CREATE TEMP TABLE t (a)", "sql_refused"),
        ("ATTACH DATABASE '/etc/passwd' AS p", "sql_refused"),
        ("PRAGMA table_info(state)", "sql_refused"),
        ("SELECT load_extension('/tmp/x.so')", "sql_refused"),
        ("SELECT * FROM sqlite_master; DELETE FROM state", "sql_refused"),
        ("SELECT 1; SELECT 2", "invalid_argument"),
        ("SELECT * FROM no_such_table", "invalid_argument"),
        ("SELEKT 1", "invalid_argument"),
        ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", "sql_limit"),
        ("SELECT length(zeroblob(1000000000))", "sql_limit"),
        (
            "SELECT count(*) FROM steps a, steps b, steps c, steps d, steps e, steps f, steps g, steps h, steps i, steps j",
            "sql_limit",
        ),
    ] {
        let (status, message) = sql(&n, query).err().unwrap_or_else(|| panic!("{query} ran"));
        assert_eq!(status, 400, "{query}: {message}");
        assert!(message.starts_with(code), "{query}: {message}");
    }
    // The node still answers.
    assert_eq!(one(&n, "SELECT count(*) FROM invocations WHERE book = 1"), json!(1));
    let (status, v) = n.json("POST", "/v1/sql", b"not json");
    assert_eq!(status, 400, "{v}");
}

/// Transfers over a read-optimized, a write-optimized and a symmetric table at once, with
/// a switch (write- to read-optimized) and garbage collection running: as of every
/// transfer's result each balance is the model's, in every table, and the total is
/// constant; as of every seqnum in between each balance is the one before or after the
/// transfer (never going back), and where a transfer's writes share one record (read- and
/// write-optimized: the reads first, then both writes; not during the switch) the total
/// is constant there too.
/// What collection passed is refused with the floor, never answered from what is left.
#[test]
fn as_of_holds_across_protocols_a_switch_and_collection() {
    let (_dir, n) = node_with(&[
        "--table",
        "ro=read-optimized",
        "--table",
        "wo=write-optimized",
        "--table",
        "sym=symmetric",
        "--gc-interval-ms",
        "50",
        "--recovery-interval-ms",
        "50",
        "--history-kept-ms",
        "4000",
    ]);
    n.deploy("steps", &guest("steps"), "");
    let accounts = ["a", "b", "c"];
    let tables = ["ro", "wo", "sym"];
    let mut model: BTreeMap<&str, i64> = accounts.iter().map(|a| (*a, 100)).collect();
    let puts = |model: &BTreeMap<&str, i64>, keys: &[&str]| -> String {
        let mut ops = Vec::new();
        for t in tables {
            ops.extend(keys.iter().map(|k| format!("get {t} {k}")));
            ops.extend(keys.iter().map(|k| format!("put {t} {k} {}", model[k])));
        }
        ops.join(";")
    };
    post(&n, "steps", "open", &format!("script {}", puts(&model, &accounts)));
    let mut rng = common::Rng(11);
    let mut checkpoints = Vec::new();
    for i in 0..30 {
        if i == 12 {
            let (status, v) = n.json("PUT", "/v1/books/1/tables/wo", br#"{"protocol": "read-optimized"}"#);
            assert_eq!(status, 202, "{v}");
        }
        let from = accounts[rng.below(3) as usize];
        let to = accounts[(accounts.iter().position(|a| *a == from).unwrap() + 1 + rng.below(2) as usize) % 3];
        let amount = 1 + rng.below(40) as i64;
        *model.get_mut(from).unwrap() -= amount;
        *model.get_mut(to).unwrap() += amount;
        post(&n, "steps", &format!("t{i}"), &format!("script {}", puts(&model, &[from, to])));
        let id = one(&n, "SELECT invocation_id FROM steps WHERE book = 1 AND kind = 'init' AND value LIKE 'script%' ORDER BY seqnum DESC LIMIT 1");
        let done = one(
            &n,
            &format!(
                "SELECT seqnum FROM steps WHERE book = 1 AND invocation_id = '{}' AND kind = 'result'",
                id.as_str().unwrap()
            ),
        );
        checkpoints.push((done.as_u64().unwrap(), model.clone()));
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    // Every table's balances as of `at`, or `None` once collection passed it.
    let balances = |at: u64| -> Option<BTreeMap<String, BTreeMap<String, i64>>> {
        match sql(&n, &format!("SELECT table_name, key, value FROM state WHERE book = 1 AS OF {at}")) {
            Err((400, message)) if message.contains("keeps its history from seqnum") => None,
            Err(e) => panic!("as of {at}: {e:?}"),
            Ok(v) => {
                let mut tables: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
                for r in v["rows"].as_array().unwrap() {
                    let value = r[2].as_str().unwrap().parse().unwrap();
                    tables
                        .entry(r[0].as_str().unwrap().to_string())
                        .or_default()
                        .insert(r[1].as_str().unwrap().to_string(), value);
                }
                Some(tables)
            }
        }
    };
    let want = |m: &BTreeMap<&str, i64>| -> BTreeMap<String, i64> { m.iter().map(|(k, v)| (k.to_string(), *v)).collect() };
    let (mut exact, mut between, mut collected) = (0, 0, 0);
    for (i, pair) in checkpoints.windows(2).enumerate() {
        let ((before_at, before), (after_at, after)) = (&pair[0], &pair[1]);
        let Some(got) = balances(*after_at) else {
            collected += 1;
            continue;
        };
        for table in tables {
            assert_eq!(got[table], want(after), "{table} as of {after_at}");
        }
        exact += 1;
        // Each balance moves once, from its value before the transfer to its value after.
        let mut moved: BTreeMap<(&str, String), bool> = BTreeMap::new();
        let records = rows(
            &n,
            &format!("SELECT DISTINCT seqnum FROM steps WHERE book = 1 AND seqnum > {before_at} AND seqnum < {after_at}"),
        );
        for at in records.iter().map(|r| r[0].as_u64().unwrap()) {
            let Some(got) = balances(at) else { continue };
            for table in tables {
                for (key, value) in &got[table] {
                    let (old, new) = (before[key.as_str()], after[key.as_str()]);
                    let was = moved.entry((table, key.clone())).or_default();
                    assert!(*value == new || (*value == old && !*was), "{table} {key} as of {at}: {value}, not {old} then {new}");
                    *was |= *value == new && old != new;
                }
                // Symmetric and transitional writes are a record each.
                if table == "ro" || (table == "wo" && i + 1 < 12) {
                    assert_eq!(got[table].values().sum::<i64>(), 300, "{table} as of {at} (transfer {i}): {:?}", got[table]);
                }
            }
            between += 1;
        }
    }
    assert!(exact >= 5 && collected >= 3 && between >= 20, "{exact} exact, {between} between, {collected} collected");
    let (last, final_model) = checkpoints.last().unwrap();
    for table in tables {
        assert_eq!(balances(*last).unwrap()[table], want(final_model), "{table} at the end");
    }
    // The switch ended: `wo` is read-optimized.
    let status = n.json("GET", "/v1/books/1/tables/wo", b"").1;
    assert_eq!(status["protocol"], "read-optimized", "{status}");
}

/// With no history kept, collection moves the floor: a read as of a seqnum below it is
/// refused with what the floor is, never answered from what is left.
#[test]
fn as_of_below_the_history_floor_is_refused() {
    let (_dir, n) = node_with(&["--gc-interval-ms", "50", "--recovery-interval-ms", "50", "--history-kept-ms", "0"]);
    n.deploy("bank", &guest("bank"), "");
    post(&n, "bank", "a", "open alice 100");
    let first = one(&n, "SELECT max(seqnum) FROM steps WHERE book = 1");
    for i in 0..5 {
        post(&n, "bank", &format!("o{i}"), &format!("open alice {i}"));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match sql(&n, &format!("SELECT value FROM state WHERE book = 1 AND table_name = 'accounts' AS OF {first}")) {
            Err((400, message)) => {
                assert!(message.contains("keeps its history from seqnum"), "{message}");
                break;
            }
            other => assert!(std::time::Instant::now() < deadline, "the floor never passed {first}: {other:?}"),
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(one(&n, "SELECT value FROM state WHERE book = 1 AND table_name = 'accounts'"), json!("4"));
}
