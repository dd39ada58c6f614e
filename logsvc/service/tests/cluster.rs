//! The shared log end to end: every role with its real stores in one process, through the
//! client API (the nodes deliver to each other in process, as `ClusterBuilder` does by
//! default; each still has its QUIC endpoint, which `frames.rs` speaks to).
//!
//! Each test builds its own cluster in its own temporary directory. Set `TALLY_KEEP_DIR=1`
//! to keep the directory (its path is printed) when a test fails.
//!
//! Among them: many books on one physical log, acknowledged appends that survive a storage
//! node killed with `n_data = 3`, bad input refused while the nodes keep serving, engines that forward to the indexers of a log, whole-cluster restarts over
//! one directory, and a log added to a running cluster.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Context as _};
use bytes::Bytes;
use tally_logsvc::store::{open_record_store, FsyncPolicy, JournalMetalogStore, RecordStoreKind};
use tally_logsvc::{book_to_log, BookId, Cluster, ClusterBuilder, Cond, Context, Error, LogId, MetalogMode, SeqNum, Tag, Term};
use tokio::task::JoinSet;

mod common;
use common::{cluster, data, stream, TestDir};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn append_then_read_round_trips_and_reads_your_writes() -> anyhow::Result<()> {
    let dir = TestDir::new();
    let cluster = cluster(&dir, |_| {}).await?;
    let (c0, c1) = (cluster.client(0), cluster.client(1));
    let book = BookId(7);
    let mut ctx = Context::new();
    let mut seqnums = Vec::new();
    for i in 0..3 {
        seqnums.push(c0.append(&mut ctx, book, &[Tag(1)], data(&format!("record {i}"))).await?);
    }
    ensure!(seqnums.windows(2).all(|w| w[0] < w[1]), "seqnums within a book increase: {seqnums:?}");

    let first = c0.read_next(&mut ctx, book, Tag(1), SeqNum::MIN).await?.context("a first record")?;
    assert_eq!((first.seqnum, first.data.clone()), (seqnums[0], data("record 0")));
    assert_eq!(first.tags, vec![Tag(1)]);
    let after_first = c0.read_next(&mut ctx, book, Tag::ALL, SeqNum(seqnums[0].0 + 1)).await?.context("a second record")?;
    assert_eq!((after_first.seqnum, after_first.data), (seqnums[1], data("record 1")));
    let before_last =
        c0.read_prev(&mut ctx, book, Tag(1), SeqNum(seqnums[2].0 - 1)).await?.context("a record before the last")?;
    assert_eq!(before_last.seqnum, seqnums[1]);
    let tail = c0.check_tail(&mut ctx, book, Tag(1)).await?.context("a tail")?;
    assert_eq!((tail.seqnum, tail.data), (seqnums[2], data("record 2")));
    assert_eq!(c0.read_next(&mut ctx, book, Tag(1), SeqNum(seqnums[2].0 + 1)).await?, None);
    assert_eq!(c0.check_tail(&mut ctx, BookId(8), Tag::ALL).await?, None, "another book is empty");

    // A child invocation on the other engine inherits the parent's view: it must see
    // the parent's last append at once, whatever that engine's index has applied.
    let mut child = ctx.child();
    let s = c0.append(&mut ctx, book, &[], data("latest")).await?;
    let mut child_of_latest = ctx.child();
    let seen = c1.check_tail(&mut child_of_latest, book, Tag::ALL).await?.context("the child sees a tail")?;
    assert_eq!((seen.seqnum, seen.data), (s, data("latest")));
    assert!(child.position(tally_logsvc::LogId(0)) <= ctx.position(tally_logsvc::LogId(0)));
    let earlier = c1.read_prev(&mut child, book, Tag(1), SeqNum::MAX).await?.context("the child sees tag 1")?;
    assert_eq!(earlier.seqnum, seqnums[2]);

    // Aux data is best-effort cache data: setting it must succeed; reading it back is
    // allowed to miss.
    c0.set_aux_data(&mut ctx, book, s, data("view")).await?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_select_records_by_tag() -> anyhow::Result<()> {
    let dir = TestDir::new();
    let cluster = cluster(&dir, |_| {}).await?;
    let c = cluster.client(0);
    let mut ctx = Context::new();
    let book = BookId(42);
    let s1 = c.append(&mut ctx, book, &[Tag(1)], data("one")).await?;
    let s2 = c.append(&mut ctx, book, &[Tag(2)], data("two")).await?;
    let s12 = c.append(&mut ctx, book, &[Tag(1), Tag(2)], data("both")).await?;
    assert_eq!(stream(&c, &mut ctx, book, Tag(1)).await?, vec![(s1, data("one")), (s12, data("both"))]);
    assert_eq!(stream(&c, &mut ctx, book, Tag(2)).await?, vec![(s2, data("two")), (s12, data("both"))]);
    assert_eq!(stream(&c, &mut ctx, book, Tag::ALL).await?, vec![(s1, data("one")), (s2, data("two")), (s12, data("both"))]);
    assert_eq!(stream(&c, &mut ctx, book, Tag(3)).await?, vec![]);
    // Backwards too.
    assert_eq!(c.read_prev(&mut ctx, book, Tag(2), SeqNum(s12.0 - 1)).await?.map(|r| r.seqnum), Some(s2));
    assert_eq!(c.read_prev(&mut ctx, book, Tag(1), SeqNum(s12.0 - 1)).await?.map(|r| r.seqnum), Some(s1));
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_is_refused_and_the_node_keeps_serving() -> anyhow::Result<()> {
    let dir = TestDir::new();
    let cluster = cluster(&dir, |b| b.engine_config.record_bytes_max = 64 << 10).await?;
    let (user, platform) = (cluster.client(0), cluster.platform_client(0));
    let mut ctx = Context::new();
    let book = BookId(3);

    let big = Bytes::from(vec![7u8; (64 << 10) + 1]);
    match user.append(&mut ctx, book, &[], big).await {
        Err(Error::TooLarge { size, limit, .. }) => {
            assert_eq!((size, limit), ((64 << 10) + 1, 64 << 10))
        }
        other => anyhow::bail!("an oversized record must be refused with TooLarge, got {other:?}"),
    }
    let reserved = Tag::platform(1);
    for outcome in [
        user.append(&mut ctx, book, &[reserved], data("x")).await.map(|_| ()),
        user.cond_append(&mut ctx, book, &[], data("x"), reserved, 0).await.map(|_| ()),
        user.read_next(&mut ctx, book, reserved, SeqNum::MIN).await.map(|_| ()),
        user.trim(&mut ctx, book, reserved, SeqNum::MIN).await,
    ] {
        assert!(matches!(outcome, Err(Error::InvalidArgument(_))), "a reserved tag from a user: {outcome:?}");
    }
    let s = user.append(&mut ctx, book, &[Tag(1)], data("fine")).await?;
    let p = platform.append(&mut ctx, book, &[reserved], data("platform")).await?;
    assert!(s < p);
    let r = platform.read_next(&mut ctx, book, reserved, SeqNum::MIN).await?.context("the platform record")?;
    assert_eq!((r.seqnum, r.data), (p, data("platform")));
    // Through the `LogBook` trait a read the engine answers in place takes a fast path:
    // it refuses what the usual path refuses, and answers what it answers.
    let user_book: &dyn tally_log_core::LogBook = &user;
    for outcome in [
        user_book.read_next(&mut ctx, book, reserved, SeqNum::MIN).await.map(|_| ()),
        user_book.read_prev(&mut ctx, book, reserved, SeqNum::MAX).await.map(|_| ()),
        user_book.read_prev(&mut ctx, BookId::platform(3), Tag(1), SeqNum::MAX).await.map(|_| ()),
    ] {
        assert!(matches!(outcome, Err(Error::InvalidArgument(_))), "a reserved tag or book from a user: {outcome:?}");
    }
    let r = user_book.read_prev(&mut ctx, book, Tag::ALL, SeqNum::MAX).await?.context("the newest record")?;
    assert_eq!(r.seqnum, p);
    assert!(r.tags.iter().all(|t| !t.is_mark()), "a user sees no marks: {:?}", r.tags);
    let r = user_book.read_next(&mut ctx, book, Tag(1), SeqNum::MIN).await?.context("the user's record")?;
    assert_eq!((r.seqnum, r.data), (s, data("fine")));
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conditional_appends_race_and_exactly_one_wins() -> anyhow::Result<()> {
    let dir = TestDir::new();
    let cluster = cluster(&dir, |_| {}).await?;
    let book = BookId(11);
    let cond_tag = Tag(5);
    for position in 0..3u64 {
        let mut racers = JoinSet::new();
        for i in 0..2 {
            let c = cluster.client(i);
            racers.spawn(async move {
                let mut ctx = Context::new();
                let d = data(&format!("racer {i} at {position}"));
                (i, c.cond_append(&mut ctx, book, &[], d, cond_tag, position).await)
            });
        }
        let mut outcomes = HashMap::new();
        while let Some(joined) = racers.join_next().await {
            let (i, outcome) = joined?;
            outcomes.insert(i, outcome);
        }
        let winners: Vec<(usize, SeqNum)> = outcomes.iter().filter_map(|(&i, o)| o.as_ref().ok().map(|&s| (i, s))).collect();
        ensure!(winners.len() == 1, "exactly one winner at {position}: {outcomes:?}");
        let (winner, seqnum) = winners[0];
        let loser = outcomes[&(1 - winner)].clone();
        assert_eq!(loser, Err(Error::Conflict { holder: Some(seqnum) }), "the loser names the winner");
        let mut ctx = Context::new();
        let tail = cluster.client(0).check_tail(&mut ctx, book, cond_tag).await?.context("the winner's record")?;
        assert_eq!((tail.seqnum, tail.data), (seqnum, data(&format!("racer {winner} at {position}"))));
    }
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_conditional_append_on_unchanged_streams_fails_once_one_of_them_moved() -> anyhow::Result<()> {
    let dir = TestDir::new();
    let cluster = cluster(&dir, |_| {}).await?;
    let (a, b) = (cluster.client(0), cluster.client(1));
    let (book, watched, own) = (BookId(12), Tag(7), Tag(8));
    let mut ctx = Context::new();
    let first = a.append(&mut ctx, book, &[watched], data("watched 0")).await?;
    // Through another engine, which forwards it to an indexer of the book's log.
    let unchanged = [Cond { tag: watched, position: 1 }, Cond { tag: Tag(9), position: 0 }];
    let placed = b.cond_append_if(&mut ctx, book, &[], data("first"), own, 0, &unchanged).await?;
    let last = a.check_tail(&mut ctx, book, watched).await?.context("the watched record")?;
    assert_eq!(last.seqnum, first, "a condition does not join its stream");
    let joined = a.append(&mut ctx, book, &[watched], data("watched 1")).await?;
    let moved = b.cond_append_if(&mut ctx, book, &[], data("second"), own, 1, &unchanged).await;
    assert_eq!(moved, Err(Error::Conflict { holder: Some(joined) }), "names what joined the watched stream");
    let unchanged = [Cond { tag: watched, position: 2 }];
    let second = a.cond_append_if(&mut ctx, book, &[], data("second"), own, 1, &unchanged).await?;
    let got = a.read_next(&mut ctx, book, own, SeqNum::MIN).await?.context("the first record")?;
    assert_eq!(got.seqnum, placed);
    let got = a.read_next(&mut ctx, book, own, SeqNum(placed.0 + 1)).await?.context("the second record")?;
    assert_eq!((got.seqnum, got.data), (second, data("second")));
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn trimmed_records_leave_the_stream() -> anyhow::Result<()> {
    let dir = TestDir::new();
    let cluster = cluster(&dir, |_| {}).await?;
    let c = cluster.client(0);
    let mut ctx = Context::new();
    let book = BookId(5);
    let mut s = Vec::new();
    for i in 0..5 {
        s.push(c.append(&mut ctx, book, &[Tag(1)], data(&format!("r{i}"))).await?);
    }
    let other = c.append(&mut ctx, book, &[Tag(2)], data("other stream")).await?;
    c.trim(&mut ctx, book, Tag(1), s[3]).await?;
    let first = c.read_next(&mut ctx, book, Tag(1), SeqNum::MIN).await?.context("records from the trim point")?;
    assert_eq!((first.seqnum, first.data), (s[3], data("r3")));
    assert_eq!(c.read_prev(&mut ctx, book, Tag(1), s[2]).await?, None, "nothing below the trim point");
    // Another engine, given the trimmer's view, agrees.
    let mut child = ctx.child();
    let seen = cluster.client(1).read_next(&mut child, book, Tag(1), SeqNum::MIN).await?.map(|r| r.seqnum);
    assert_eq!(seen, Some(s[3]));
    // Tag 2's stream is untouched.
    let r = c.read_next(&mut ctx, book, Tag(2), SeqNum::MIN).await?.map(|r| r.seqnum);
    assert_eq!(r, Some(other));
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_books_share_one_physical_log() -> anyhow::Result<()> {
    const BOOKS: u64 = 100_000;
    const TASKS: u64 = 8;
    const INFLIGHT_PER_TASK: usize = 256;
    const TWICE_EVERY: u64 = 100;
    const VERIFY_EVERY: u64 = 4;
    let dir = TestDir::new();
    let cluster = cluster(&dir, |b| b.fsync = tally_logsvc::store::FsyncPolicy::EveryBatch).await?;
    assert_eq!(cluster.n_logs(), 1);
    let started = std::time::Instant::now();
    let mut tasks = JoinSet::new();
    for t in 0..TASKS {
        let c = cluster.client(t as usize % 2);
        tasks.spawn(async move {
            let mut acked: Vec<(u64, SeqNum)> = Vec::new();
            let mut inflight = JoinSet::new();
            let books = (t..BOOKS).step_by(TASKS as usize);
            for b in books {
                if inflight.len() >= INFLIGHT_PER_TASK {
                    acked.push(inflight.join_next().await.expect("nonempty")??);
                }
                let c = c.clone();
                inflight.spawn(async move {
                    let mut ctx = Context::new();
                    let s = c.append(&mut ctx, BookId(b), &[Tag(1)], Bytes::from(b.to_le_bytes().to_vec())).await?;
                    anyhow::Ok((b, s))
                });
            }
            while let Some(r) = inflight.join_next().await {
                acked.push(r??);
            }
            anyhow::Ok(acked)
        });
    }
    let mut first: HashMap<u64, SeqNum> = HashMap::new();
    while let Some(r) = tasks.join_next().await {
        for (b, s) in r?? {
            ensure!(first.insert(b, s).is_none(), "book {b} acked twice");
        }
    }
    ensure!(first.len() as u64 == BOOKS);
    let appended = started.elapsed();

    // A second record on a sample of books: seqnums within a book increase.
    let c = cluster.client(0);
    let mut ctx = Context::new();
    let mut second = HashMap::new();
    for b in (0..BOOKS).step_by(TWICE_EVERY as usize) {
        let s = c.append(&mut ctx, BookId(b), &[Tag(1)], data("second")).await?;
        ensure!(s > first[&b], "book {b}: {s} after {}", first[&b]);
        second.insert(b, s);
    }
    // Every book's tail is its own record; the sampled books also keep their first.
    let mut readers = JoinSet::new();
    let first = Arc::new(first);
    let second = Arc::new(second);
    for t in 0..TASKS {
        let (c, first, second) = (cluster.client(t as usize % 2), first.clone(), second.clone());
        let mut ctx = ctx.child();
        readers.spawn(async move {
            // Every fourth book (which includes every book appended to twice) keeps
            // the test's time down in debug builds.
            for b in (0..BOOKS).step_by(VERIFY_EVERY as usize).skip(t as usize).step_by(TASKS as usize) {
                let tail = c.check_tail(&mut ctx, BookId(b), Tag::ALL).await?.context("a tail")?;
                match second.get(&b) {
                    Some(&s) => {
                        ensure!(tail.seqnum == s && tail.data == data("second"), "book {b}: tail {tail:?}");
                        let prev = c.read_prev(&mut ctx, BookId(b), Tag(1), SeqNum(s.0 - 1)).await?.context("the first")?;
                        ensure!(prev.seqnum == first[&b], "book {b}: first {prev:?}");
                    }
                    None => ensure!(
                        tail.seqnum == first[&b] && tail.data[..] == b.to_le_bytes()[..],
                        "book {b}: tail {tail:?}, expected {}",
                        first[&b]
                    ),
                }
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = readers.join_next().await {
        r??;
    }
    eprintln!("appended {BOOKS} books in {appended:?}, verified in {:?}", started.elapsed() - appended);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acked_appends_survive_a_storage_node_kill() -> anyhow::Result<()> {
    const APPENDS_AFTER_KILL: usize = 50;
    let dir = TestDir::new();
    let mut cluster = cluster(&dir, |b| {
        b.storage_nodes = 3;
        b.n_data = 3;
        b.failure_timeout_us = 1_000_000;
        b.engine_config.retransmit_us = 100_000;
    })
    .await?;
    let term = cluster.configuration().context("a configuration")?.current().term;
    let killed = Arc::new(AtomicBool::new(false));
    let mut writers = JoinSet::new();
    for w in 0..2u64 {
        let (c, killed) = (cluster.client(w as usize), killed.clone());
        writers.spawn(async move {
            let book = BookId(1000 + w);
            let mut ctx = Context::new();
            let mut acked = Vec::new();
            let mut after_kill = 0;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            for i in 0u64.. {
                ensure!(tokio::time::Instant::now() < deadline, "writer {w} stalled with {after_kill} appends after the kill");
                let d = Bytes::from(format!("writer {w} append {i}"));
                match c.append(&mut ctx, book, &[], d.clone()).await {
                    Ok(s) => {
                        acked.push((s, d));
                        if killed.load(Ordering::SeqCst) {
                            after_kill += 1;
                            if after_kill == APPENDS_AFTER_KILL {
                                break;
                            }
                        }
                    }
                    // Unacknowledged: the record may or may not land, either is fine.
                    Err(Error::Timeout(_) | Error::Unavailable(_)) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            anyhow::Ok((book, acked, ctx))
        });
    }
    // Let the writers get going, then kill a replica of every shard.
    let c = cluster.client(0);
    let mut probe = Context::new();
    loop {
        let seen = c.check_tail(&mut probe, BookId(1000), Tag::ALL).await?;
        if seen.is_some_and(|r| r.data.ends_with(b"append 20")) || probe.position(tally_logsvc::LogId(0)).index > 40 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cluster.kill_storage(1).await;
    killed.store(true, Ordering::SeqCst);
    let config = cluster.wait_for_term(Term(term.0 + 1), Duration::from_secs(10)).await?;
    ensure!(!config.current().storage.contains(&cluster.storage_id(1)), "the new term leaves the dead node out");

    let mut all = Vec::new();
    // A reader that has seen what the writers saw: a fresh context on another engine
    // may read before that engine has applied the writers' last entries.
    let mut ctx = Context::new();
    while let Some(r) = writers.join_next().await {
        let (book, acked, seen) = r??;
        ensure!(acked.windows(2).all(|w| w[0].0 < w[1].0), "acked seqnums of one writer increase");
        ctx.merge(&seen);
        all.push((book, acked));
    }
    for (book, acked) in &all {
        for (s, d) in acked {
            let r = c.read_next(&mut ctx, *book, Tag::ALL, *s).await?.with_context(|| format!("acked {s} is readable"))?;
            ensure!(r.seqnum == *s && r.data == *d, "acked {s}: read {r:?}");
        }
    }
    // The killed node comes back over its own directory.
    cluster.restart_storage(1).await?;
    let s = c.append(&mut ctx, BookId(1000), &[], data("after restart")).await?;
    ensure!(s > all[0].1.last().context("acked")?.0);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_engine_without_the_index_forwards_to_one_that_has_it() -> anyhow::Result<()> {
    let dir = TestDir::new();
    let cluster = cluster(&dir, |b| {
        b.engines = 2;
        b.indexers_per_log = Some(1);
    })
    .await?;
    let config = cluster.configuration().context("a configuration")?;
    let log = tally_logsvc::LogId(0);
    let (indexer, forwarder) = if config.indexes(log, cluster.engine_id(0)) { (0, 1) } else { (1, 0) };
    ensure!(!config.indexes(log, cluster.engine_id(forwarder)), "exactly one engine indexes the log: {:?}", config.indexers);
    let c = cluster.client(forwarder);
    let book = BookId(21);
    let mut ctx = Context::new();

    // Appends stay local; the read right after goes to the indexer and still sees them.
    let first = c.append(&mut ctx, book, &[Tag(1)], data("one")).await?;
    let second = c.append(&mut ctx, book, &[Tag(1)], data("two")).await?;
    let read = c.read_next(&mut ctx, book, Tag(1), first).await?.context("the first record")?;
    assert_eq!((read.seqnum, read.data), (first, data("one")));
    let tail = c.check_tail(&mut ctx, book, Tag(1)).await?.context("the tail")?;
    assert_eq!(tail.seqnum, second);

    // Conditional appends and their conflicts, decided by the indexer.
    let won = c.cond_append(&mut ctx, book, &[], data("cond"), Tag(2), 0).await?;
    let lost = c.cond_append(&mut ctx, book, &[], data("late"), Tag(2), 0).await;
    assert_eq!(lost, Err(Error::Conflict { holder: Some(won) }));

    // Aux data lands where reads are served.
    c.set_aux_data(&mut ctx, book, second, data("view")).await?;
    let read = c.read_prev(&mut ctx, book, Tag(1), SeqNum::MAX).await?.context("the tail")?;
    assert_eq!(read.aux, Some(data("view")));

    // The indexer accepts aux data only for a live record of the caller's book: not for
    // a record of another book of the same log, nor for a seqnum never written. The
    // other book's record reads back without it.
    let n_logs = cluster.n_logs();
    let other = (book.0 + 1..).map(BookId).find(|&b| book_to_log(b, n_logs) == book_to_log(book, n_logs)).expect("a book");
    let theirs = c.append(&mut ctx, other, &[Tag(1)], data("theirs")).await?;
    let never = SeqNum(theirs.0 + 1_000_000);
    for seqnum in [theirs, never] {
        let refused = c.set_aux_data(&mut ctx, book, seqnum, data("poison")).await;
        ensure!(matches!(refused, Err(Error::InvalidArgument(_))), "aux data of book {} on {seqnum}: {refused:?}", book.0);
    }
    let read = cluster.client(indexer).check_tail(&mut ctx.child(), other, Tag(1)).await?.context("the other book's tail")?;
    assert_eq!((read.seqnum, read.aux), (theirs, None));

    // A trim through the forwarder is seen by a reader of the indexer.
    c.trim(&mut ctx, book, Tag(1), second).await?;
    let mut other = ctx.child();
    let after = cluster.client(indexer).read_next(&mut other, book, Tag(1), SeqNum::MIN).await?;
    assert_eq!(after.map(|r| r.seqnum), Some(second), "the trim removed the first record only");
    Ok(())
}

/// What the restart tests appended, to read back after every restart.
#[derive(Default)]
struct Written {
    /// Per book, its records in append order: seqnum, tags, data.
    books: BTreeMap<BookId, Vec<(SeqNum, Vec<Tag>, Bytes)>>,
    /// Per book, the seqnum below which a trim of every stream removed its records.
    trimmed: HashMap<BookId, SeqNum>,
    /// The records of the step log, won by conditional appends at offsets 0, 1, ...
    steps: Vec<SeqNum>,
}

const RESTART_BOOKS: u64 = 6;
const RESTART_RECORDS_PER_ROUND: u64 = 4;
const RESTART_TAGS: [Tag; 5] = [Tag::ALL, Tag(1), Tag(2), Tag(3), Tag(10)];
const STEP_BOOK: BookId = BookId(300);
const STEP_TAG: Tag = Tag(20);

impl Written {
    /// Appends a round of records to every book, spread over the engines, and the
    /// next step of the step log; each lands after everything its book had before.
    async fn append_round(&mut self, cluster: &Cluster, engines: u64, round: u64) -> anyhow::Result<()> {
        let mut ctx = Context::new();
        for b in 0..RESTART_BOOKS {
            let book = BookId(200 + b);
            for i in 0..RESTART_RECORDS_PER_ROUND {
                let c = cluster.client(((b + i) % engines) as usize);
                let tags = if i % 2 == 0 { vec![Tag(1 + i % 3)] } else { vec![Tag(1 + i % 3), Tag(10)] };
                let d = data(&format!("round {round} book {} record {i}", book.0));
                let s = c.append(&mut ctx, book, &tags, d.clone()).await?;
                let records = self.books.entry(book).or_default();
                if let Some(last) = records.last() {
                    ensure!(s > last.0, "book {}: appended {s} after {}", book.0, last.0);
                }
                records.push((s, tags, d));
            }
        }
        // Step `round` of a step log: the conditional append at offset `round` wins (the
        // offsets of earlier runs count), and another one there names the winner.
        let c = cluster.client(0);
        let d = data(&format!("step {round}"));
        let step = c.cond_append(&mut ctx, STEP_BOOK, &[], d, STEP_TAG, round).await?;
        let again = c.cond_append(&mut ctx, STEP_BOOK, &[], data("again"), STEP_TAG, round).await;
        ensure!(again == Err(Error::Conflict { holder: Some(step) }), "step {round} again: {again:?}");
        self.steps.push(step);
        Ok(())
    }

    /// Trims every stream of `book` below its `k`-th record.
    async fn trim(&mut self, cluster: &Cluster, book: BookId, k: usize) -> anyhow::Result<()> {
        let below = self.books[&book][k].0;
        cluster.client(0).trim(&mut Context::new(), book, Tag::ALL, below).await?;
        self.trimmed.insert(book, below);
        Ok(())
    }

    /// Reads every stream of every book back on every engine, each through a fresh
    /// context, as a new process would.
    async fn check(&self, cluster: &Cluster, engines: u64) -> anyhow::Result<()> {
        for e in 0..engines as usize {
            let c = cluster.client(e);
            let mut ctx = Context::new();
            for (book, records) in &self.books {
                let floor = self.trimmed.get(book).copied().unwrap_or(SeqNum::MIN);
                let live: Vec<_> = records.iter().filter(|r| r.0 >= floor).collect();
                for tag in RESTART_TAGS {
                    let expect: Vec<(SeqNum, Bytes)> =
                        live.iter().filter(|r| tag == Tag::ALL || r.1.contains(&tag)).map(|r| (r.0, r.2.clone())).collect();
                    let got = stream(&c, &mut ctx, *book, tag).await?;
                    ensure!(got == expect, "engine {e}, book {}, tag {}: read {got:?}, expected {expect:?}", book.0, tag.0);
                }
                let tail = c.check_tail(&mut ctx, *book, Tag::ALL).await?.map(|r| (r.seqnum, r.tags, r.data));
                ensure!(tail.as_ref() == live.last().copied(), "engine {e}, book {}: tail {tail:?}", book.0);
            }
            let steps: Vec<SeqNum> = stream(&c, &mut ctx, STEP_BOOK, STEP_TAG).await?.into_iter().map(|(s, _)| s).collect();
            ensure!(steps == self.steps, "engine {e}: the step log holds {steps:?}, expected {:?}", self.steps);
        }
        Ok(())
    }
}

/// Builds a cluster over one directory three times, shutting it down in between. Every
/// build reads back every record of the earlier ones (same seqnums, same data, trims
/// and conditional offsets kept) and appends after them.
async fn restarts_keep_every_book(change: impl Fn(&mut ClusterBuilder)) -> anyhow::Result<()> {
    let dir = TestDir::new();
    let mut written = Written::default();
    let mut last_term = Term(0);
    // The engines the cluster is built with, not those of the installed configuration:
    // right after a restart that may be a term none of them joined yet.
    let engines = {
        let mut b = ClusterBuilder::new(dir.path());
        change(&mut b);
        u64::from(b.engines)
    };
    for run in 0..3u64 {
        let started = std::time::Instant::now();
        let cluster = cluster(&dir, &change).await.with_context(|| format!("build {run}"))?;
        let config = cluster.configuration().context("a configuration")?;
        let term = config.current().term;
        ensure!(term > last_term, "build {run} installed {term:?}, after {last_term:?}");
        written.check(&cluster, engines).await.with_context(|| format!("reading back after build {run}"))?;
        let ready = started.elapsed();
        written.append_round(&cluster, engines, run).await.with_context(|| format!("appending in build {run}"))?;
        if run == 0 {
            written.trim(&cluster, BookId(200), 2).await?;
        }
        written.check(&cluster, engines).await.with_context(|| format!("reading in build {run}"))?;
        cluster.shutdown().await;
        eprintln!("build {run}: term {}, read back in {ready:?}, done in {:?}", term.0, started.elapsed());
        last_term = term;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restarts_keep_every_book_with_three_replicas() -> anyhow::Result<()> {
    restarts_keep_every_book(|b| {
        b.n_logs = 2;
        // Storage nodes keep the metadata of two ordered records per shard in memory,
        // and sequencers one entry per metalog: engines replaying after a restart fetch
        // the rest from RocksDB.
        b.storage_config.meta_window = 2;
        b.sequencer_config.entries_kept = 1;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restarts_keep_every_book_with_a_replicated_metalog() -> anyhow::Result<()> {
    // Sequencers acknowledge entries they wrote without syncing them: a restart of the
    // processes (not of the machine) keeps them.
    restarts_keep_every_book(|b| {
        b.sequencer_config.metalog = MetalogMode::Replicated;
        b.sequencer_config.unsynced_max_us = 1_000_000;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restarts_keep_every_book_on_a_single_node_of_each_role() -> anyhow::Result<()> {
    // What `tally dev` runs.
    restarts_keep_every_book(|b| {
        b.sequencers = 1;
        b.storage_nodes = 1;
        b.engines = 1;
        b.n_meta = 1;
        b.n_data = 1;
    })
    .await
}

/// The records of `tag`'s stream of every book, read through each of the cluster's
/// `engines` with a fresh context and with `ctx`. (Not the installed configuration's
/// engines: right after a restart it may be a term that none of them joined yet.)
async fn streams_everywhere(
    cluster: &Cluster,
    engines: u32,
    ctx: &mut Context,
    books: &[BookId],
    tag: Tag,
) -> anyhow::Result<BTreeMap<BookId, Vec<Bytes>>> {
    let mut seen: Option<BTreeMap<BookId, Vec<Bytes>>> = None;
    for engine in 0..engines as usize {
        for fresh in [true, false] {
            let c = cluster.client(engine);
            let mut mine = if fresh { Context::new() } else { ctx.child() };
            let mut got = BTreeMap::new();
            for &b in books {
                let records = stream(&c, &mut mine, b, tag).await?;
                got.insert(b, records.into_iter().map(|r| r.1).collect::<Vec<_>>());
            }
            match &seen {
                None => seen = Some(got),
                Some(s) => ensure!(*s == got, "engine {engine} (fresh context: {fresh}) reads {got:?}, another read {s:?}"),
            }
        }
    }
    seen.context("the cluster has engines")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_added_log_takes_over_its_books_with_their_history() -> anyhow::Result<()> {
    let dir = TestDir::new();
    const ENGINES: u32 = 2;
    let shape = |b: &mut ClusterBuilder| {
        b.engines = ENGINES;
        b.indexers_per_log = Some(1);
    };
    let mut cluster = cluster(&dir, shape).await?;
    // Books that move to log 1 when a second log is added, and one that stays.
    let moving: Vec<BookId> = (0..).map(BookId).filter(|&b| book_to_log(b, 2) == LogId(1)).take(3).collect();
    let staying = (0..).map(BookId).find(|&b| book_to_log(b, 2) == LogId(0)).expect("a book");
    let books: Vec<BookId> = moving.iter().copied().chain([staying]).collect();
    let c = cluster.client(0);
    let mut ctx = Context::new();
    let mut steps = BTreeMap::new();
    for &b in &books {
        for i in 0..4 {
            c.append(&mut ctx, b, &[Tag(1)], data(&format!("{}-{i}", b.0))).await?;
        }
        steps.insert(b, c.cond_append(&mut ctx, b, &[], data("step 0"), Tag(2), 0).await?);
    }
    // A trim before the move holds after it.
    let second = stream(&c, &mut ctx, moving[0], Tag(1)).await?[1].0;
    c.trim(&mut ctx, moving[0], Tag(1), second).await?;
    let before = streams_everywhere(&cluster, ENGINES, &mut ctx, &books, Tag(1)).await?;
    assert_eq!(before[&moving[0]].len(), 3);

    let config = cluster.add_logs(2).await?;
    assert_eq!((config.n_logs, config.added_at(LogId(1))), (2, Some(config.current().term)));
    assert_eq!(
        streams_everywhere(&cluster, ENGINES, &mut ctx, &books, Tag(1)).await?,
        before,
        "every book reads the same after the move"
    );

    for &b in &books {
        // New records go to the book's new log, after its old ones.
        let at = c.append(&mut ctx, b, &[Tag(1)], data(&format!("{}-after", b.0))).await?;
        assert_eq!(at.log(), book_to_log(b, 2), "book {} appends to its log of the new term", b.0);
        // Offsets go on where they were: offset 0 is held by the step appended
        // before the move, offset 1 is free.
        let lost = c.cond_append(&mut ctx, b, &[], data("late step 0"), Tag(2), 0).await;
        assert_eq!(lost, Err(Error::Conflict { holder: Some(steps[&b]) }), "book {}", b.0);
        c.cond_append(&mut ctx, b, &[], data("step 1"), Tag(2), 1).await?;
    }
    // A trim after the move reaches the records written before it.
    let third = stream(&c, &mut ctx, moving[1], Tag(1)).await?[2].0;
    c.trim(&mut ctx, moving[1], Tag(1), third).await?;
    let after = streams_everywhere(&cluster, ENGINES, &mut ctx, &books, Tag(1)).await?;
    for &b in &books {
        let trimmed = if b == moving[0] {
            1
        } else if b == moving[1] {
            2
        } else {
            0
        };
        let mut expect: Vec<Bytes> = (trimmed..4).map(|i| data(&format!("{}-{i}", b.0))).collect();
        expect.push(data(&format!("{}-after", b.0)));
        assert_eq!(after[&b], expect, "book {}", b.0);
    }

    // A restart replays every term: each engine takes the moved books over again.
    cluster.shutdown().await;
    let cluster = self::cluster(&dir, shape).await?;
    assert_eq!(cluster.n_logs(), 2, "a log once added stays");
    assert_eq!(streams_everywhere(&cluster, ENGINES, &mut Context::new(), &books, Tag(1)).await?, after);
    for &b in &books {
        let c = cluster.client(1);
        let lost = c.cond_append(&mut Context::new(), b, &[], data("late step 1"), Tag(2), 1).await;
        ensure!(matches!(lost, Err(Error::Conflict { holder: Some(_) })), "book {}: {lost:?}", b.0);
    }
    cluster.shutdown().await;
    Ok(())
}

/// Whether a thread of this process is named `name`.
fn thread_named(name: &str) -> bool {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return false };
    tasks.flatten().any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|comm| comm.trim_end() == name))
}

/// The nodes run on a thread of their own, and a cluster dropped without `shutdown`
/// stops them before the drop returns: right after it (on the one thread of this test,
/// which the nodes never ran on) the sequencer's and the storage node's stores open,
/// and a build over the directory finds the record the first one appended.
#[tokio::test(flavor = "current_thread")]
async fn a_dropped_cluster_frees_its_directory_before_the_drop_returns() -> anyhow::Result<()> {
    let dir = TestDir::new();
    let single = |b: &mut ClusterBuilder| {
        b.sequencers = 1;
        b.storage_nodes = 1;
        b.engines = 1;
        b.n_meta = 1;
        b.n_data = 1;
    };
    let first = cluster(&dir, single).await?;
    ensure!(thread_named("tally-nodes"), "the nodes run on a thread named tally-nodes");
    let book = BookId(5);
    let written = first.client(0).append(&mut Context::new(), book, &[Tag(1)], data("kept")).await?;
    drop(first);
    // Node ids: the controller 0, then the sequencer, the storage node, the engine.
    let metalog = JournalMetalogStore::open(&dir.path().join("sequencer-1")).context("the sequencer's store")?;
    let records = open_record_store(&dir.path().join("storage-2"), RecordStoreKind::default(), FsyncPolicy::default())
        .context("the storage node's store")?;
    drop((metalog, records));
    let again = cluster(&dir, single).await.context("a build right after the drop")?;
    let read = again.client(0).read_next(&mut Context::new(), book, Tag(1), SeqNum::MIN).await?;
    assert_eq!(read.map(|r| (r.seqnum, r.data)), Some((written, data("kept"))));
    again.shutdown().await;
    Ok(())
}

/// The LogBook contract (`tally_log_core::logbook_conformance`) on the engine's client,
/// from the engine that indexes the book and from another: the same suite runs against
/// the exactly-once simulator's log (`tally-durable`'s tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_engines_client_keeps_the_logbook_contract() -> anyhow::Result<()> {
    let dir = TestDir::new();
    let cluster = cluster(&dir, |_| {}).await?;
    tally_log_core::logbook_conformance::run_all(&cluster.platform_client(0), BookId(21), "engine-0").await;
    tally_log_core::logbook_conformance::run_all(&cluster.platform_client(1), BookId(22), "engine-1").await;
    Ok(())
}
