//! Fair shares (`shares.rs`): a flood of one book at ten times the node's places gets
//! 429s with `Retry-After` and loses nothing (each of its requests, retried with its
//! key, counts once), while another book is never refused and is not starved. The
//! other book invokes `hello`, which logs nothing: its latency is the places' share,
//! not the log's (the flood's increments append, and every book shares the disk).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{guest, node_with, Node};

const PLACES: usize = 4;

/// The latencies of `count` sequential invocations of `hello` on `book`, in
/// microseconds.
fn latencies(n: &Node, book: u64, count: usize) -> Vec<u64> {
    (0..count)
        .map(|_| {
            let t0 = Instant::now();
            let (status, body) = n.invoke("hello", book, "hi");
            assert_eq!(status, 200, "book {book} was refused: {}", String::from_utf8_lossy(&body));
            t0.elapsed().as_micros() as u64
        })
        .collect()
}

fn p99(mut took: Vec<u64>) -> u64 {
    took.sort_unstable();
    took[took.len() * 99 / 100]
}

#[test]
fn a_flooding_book_gets_429s_and_loses_nothing_while_another_keeps_its_latency() {
    let (_dir, n) = node_with(&[
        "--invocations-max",
        &PLACES.to_string(),
        "--book-invocations-max",
        &(PLACES / 2).to_string(),
        "--book-queue-max",
        "4",
        "--queue-wait-ms",
        "1000",
    ]);
    n.deploy("counter", &guest("counter"), "");
    n.deploy("hello", &guest("hello"), "");
    latencies(&n, 2, 50); // warm

    // Ten times the node's places, in closed loops: each request keeps its key until
    // it is answered 200, and waits as its 429's Retry-After says.
    let stop = Arc::new(AtomicBool::new(false));
    // While paused, the flood's clients wait: book 2 is measured alone and beside the
    // flood in turns, so that both see the same background load of the machine.
    let paused = Arc::new(AtomicBool::new(true));
    let (sent, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let flood: Vec<_> = (0..PLACES * 10)
        .map(|c| {
            let (url, stop, paused) = (n.url.clone(), stop.clone(), paused.clone());
            let (sent, refused) = (sent.clone(), refused.clone());
            thread::spawn(move || {
                let n = Node::attach(&url);
                let mut done = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if paused.load(Ordering::Relaxed) {
                        thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    let key = format!("flood-{c}-{done}");
                    loop {
                        let a = n.send("POST", "/v1/functions/counter/invoke?book=1", &[("idempotency-key", &key)], b"incr");
                        if a.status == 200 {
                            break;
                        }
                        assert_eq!(a.status, 429, "{}", a.text());
                        let after: u64 = a.header("retry-after").first().expect("a Retry-After").parse().unwrap();
                        assert!(after >= 1);
                        refused.fetch_add(1, Ordering::Relaxed);
                        thread::sleep(Duration::from_secs(after));
                    }
                    done += 1;
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    for _ in 0..6 {
        paused.store(true, Ordering::Relaxed);
        thread::sleep(Duration::from_millis(100));
        alone.extend(latencies(&n, 2, 50));
        paused.store(false, Ordering::Relaxed);
        thread::sleep(Duration::from_millis(200));
        beside.extend(latencies(&n, 2, 50));
    }
    let (unloaded, flooded) = (p99(alone), p99(beside));
    stop.store(true, Ordering::Relaxed);
    for t in flood {
        t.join().unwrap();
    }
    let (sent, refused) = (sent.load(Ordering::Relaxed), refused.load(Ordering::Relaxed));
    eprintln!("book 2's p99: {unloaded} µs unloaded, {flooded} µs beside the flood ({sent} answered, {refused} refused)");
    assert!(refused > 0, "the flood was never refused");
    let counted: u64 = n.invoke_ok("counter", 1, "get").trim().parse().unwrap();
    assert_eq!(counted, sent, "every flood request counted once, refusals and retries included");
    // Starved, book 2 would wait behind the flood's 40 requests (a queue of its own
    // length times an invocation). Beside it, what is left is the flood's share of two
    // cores, which a debug build on a shared machine puts at 1.5-2.5x; the soak bench
    // measures the ratio in a release build (the goal is 2x).
    assert!(flooded <= 4 * unloaded, "book 2's p99 went from {unloaded} to {flooded} µs");
}
