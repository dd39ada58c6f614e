//! The shared log in partial mode (INDILOG) end to end, in one process: index nodes
//! (S = 2, R = 2) beside the log's roles, engines with local indexes.
//!
//! Tier reads also go through an aggregator node, and outlive it.
//!
//! With both replicas of one index shard down, lookups through the tier and aux data
//! fail with `Unavailable` after the operation timeout, while local hits and plain appends
//! go on, and nothing wrong is ever returned; a replica started again replays the log and
//! serves.

use std::time::Duration;

use anyhow::{ensure, Context as _};
use bytes::Bytes;
use tally_logsvc::{BookId, Cluster, ClusterBuilder, Context, Error, SeqNum, Tag};

async fn partial_cluster(dir: &std::path::Path) -> anyhow::Result<Cluster> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_test_writer()
        .try_init();
    let mut b = ClusterBuilder::new(dir);
    b.engines = 2;
    b.tier = Some((2, 2));
    b.engine_config.op_timeout_us = 1_500_000;
    b.build().await.context("building the cluster")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shard_without_replicas_fails_tier_reads_while_local_paths_go_on() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut c = partial_cluster(dir.path()).await?;
    let config = c.configuration().context("a configuration")?;
    let tier = config.tier.clone().context("partial mode")?;
    ensure!(tier.shards.len() == 2 && tier.shards.iter().all(|r| r.len() == 2), "{tier:?}");
    let (writer, other) = (c.client(0), c.client(1));
    let (book, tag) = (BookId(3), Tag(7));
    let mut ctx = Context::new();
    let mut written = Vec::new();
    for i in 0..5 {
        written.push(writer.append(&mut ctx, book, &[tag], Bytes::from(format!("r{i}"))).await?);
    }
    // Read through the tier on the other engine first: its answer is the log's.
    let unseen = BookId(4);
    let none = other.read_next(&mut ctx.clone(), unseen, tag, SeqNum::MIN).await?;
    ensure!(none.is_none(), "an empty book read {none:?}");

    // Both replicas of shard 0 go (the layout's nodes are the builder's index nodes in
    // id order: shard s has nodes s and s + S).
    c.kill_index(0).await;
    c.kill_index(2).await;
    // Plain appends and local hits go on.
    let more = writer.append(&mut ctx, book, &[tag], Bytes::from_static(b"r5")).await?;
    let read = writer.read_next(&mut ctx, book, tag, written[1]).await?.context("a local hit")?;
    ensure!(read.seqnum == written[1] && read.data == Bytes::from_static(b"r1"), "{read:?}");
    let last = writer.read_prev(&mut ctx, book, tag, SeqNum::MAX).await?.context("a local hit")?;
    ensure!(last.seqnum == more, "the tail is {last:?}, appended {more:?}");
    // A read the local index cannot answer needs every shard: Unavailable, never a
    // wrong answer.
    let e = other.read_next(&mut ctx.clone(), unseen, tag, SeqNum::MIN).await.expect_err("shard 0 is down");
    ensure!(matches!(e, Error::Unavailable(_)), "{e:?}");
    let e = other.set_aux_data(&mut ctx.clone(), book, written[0], Bytes::from_static(b"v")).await.expect_err("down");
    ensure!(matches!(e, Error::Unavailable(_)), "{e:?}");

    // One replica back: it replays the log, and the tier serves again.
    c.restart_index(0).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match other.read_next(&mut ctx.clone(), unseen, tag, SeqNum::MIN).await {
            Ok(None) => break,
            Ok(Some(r)) => anyhow::bail!("an empty book read {r:?}"),
            Err(Error::Unavailable(_) | Error::Timeout(_)) if tokio::time::Instant::now() < deadline => {}
            Err(e) => return Err(e.into()),
        }
    }
    other.set_aux_data(&mut ctx.clone(), book, written[0], Bytes::from_static(b"v")).await?;
    let e = other.set_aux_data(&mut ctx.clone(), unseen, written[0], Bytes::from_static(b"x")).await.expect_err("not its book");
    ensure!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    c.shutdown().await;
    Ok(())
}

/// Function nodes join a running cluster and leave it (the spec's item 8): no new term,
/// a version each, the new node serves reads (older records through the tier) and
/// appends from its first call without replaying the log, and every record appended
/// through a node that died stays readable elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn function_nodes_join_and_leave_without_a_new_term() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut c = partial_cluster(dir.path()).await?;
    let before = c.configuration().context("a configuration")?;
    let (book, tag) = (BookId(5), Tag(9));
    let mut ctx = Context::new();
    let mut written = Vec::new();
    for i in 0..20 {
        written.push(c.client(0).append(&mut ctx, book, &[tag], Bytes::from(format!("old{i}"))).await?);
    }
    let joined = c.add_engine().await?;
    let id = c.engine_id(joined);
    let timeout = Duration::from_secs(20);
    let bound = c.wait_for_config(timeout, |cfg| cfg.current().engines.contains(&id)).await?;
    ensure!(bound.current().term == before.current().term, "a join made term {:?}", bound.current().term);
    ensure!(bound.current().version > before.current().version, "{:?}", bound.stamp());
    // The new node: reads of records older than its start, through the tier, with the
    // caller's position; then its own appends, read back in place.
    let fresh = c.client(joined);
    let mut reader = Context::new();
    let first = fresh.read_next(&mut reader, book, tag, SeqNum::MIN).await?.context("the first record")?;
    ensure!(first.seqnum == written[0] && first.data == Bytes::from_static(b"old0"), "{first:?}");
    let last = fresh.read_prev(&mut ctx.clone(), book, tag, SeqNum::MAX).await?.context("the last record")?;
    ensure!(last.seqnum == written[19], "read {:?}, appended {:?}", last.seqnum, written[19]);
    let mine = fresh.append(&mut ctx, book, &[tag], Bytes::from_static(b"new")).await?;
    let back = c.client(1).read_prev(&mut ctx, book, tag, SeqNum::MAX).await?.context("the new record")?;
    ensure!(back.seqnum == mine && back.data == Bytes::from_static(b"new"), "{back:?}");
    // The node dies: a version unbinds it, still no new term, and what it wrote stays.
    c.kill_engine(joined).await;
    let left = c.wait_for_config(timeout, |cfg| !cfg.current().engines.contains(&id)).await?;
    ensure!(left.current().term == before.current().term, "a leave made term {:?}", left.current().term);
    let again = c.client(0).read_prev(&mut ctx, book, tag, SeqNum::MAX).await?.context("the new record")?;
    ensure!(again.seqnum == mine, "{again:?}");
    c.shutdown().await;
    Ok(())
}

/// With one aggregator, over QUIC, tier reads go through it (the engine has no local
/// index, so every read does); killed, it costs reads only until a version drops it, and the
/// engines aggregate their own lookups from then on. Every answer is the log's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tier_reads_go_through_the_aggregator_and_outlive_it() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut b = ClusterBuilder::new(dir.path());
    b.engines = 2;
    b.tier = Some((2, 1));
    b.aggregators = 1;
    b.engine_config.local_index = None;
    // Over QUIC: the tier's messages and the configuration cross the wire encoded.
    b.local_delivery = false;
    b.engine_config.op_timeout_us = 1_500_000;
    let mut c = b.build().await.context("building the cluster")?;
    let tier = c.configuration().context("a configuration")?.tier.clone().context("partial mode")?;
    ensure!(tier.aggregators.len() == 1, "{tier:?}");
    let (writer, reader) = (c.client(0), c.client(1));
    let (book, tag) = (BookId(3), Tag(7));
    let mut ctx = Context::new();
    let mut written = Vec::new();
    for i in 0..6 {
        written.push(writer.append(&mut ctx, book, &[tag], Bytes::from(format!("r{i}"))).await?);
    }
    let check = |ctx: &Context| {
        let (reader, written, ctx) = (reader.clone(), written.clone(), ctx.clone());
        async move {
            for (i, &s) in written.iter().enumerate() {
                // The record itself (type 2), and the one after a bound between two (type 3).
                let exact = reader.read_next(&mut ctx.clone(), book, tag, s).await?.context("exact")?;
                ensure!(exact.seqnum == s && exact.data == format!("r{i}"), "{exact:?}");
                let after = reader.read_next(&mut ctx.clone(), book, tag, SeqNum(s.0 + 1)).await?;
                ensure!(after.map(|r| r.seqnum) == written.get(i + 1).copied(), "after {s:?}");
            }
            let last = reader.read_prev(&mut ctx.clone(), book, tag, SeqNum::MAX).await?;
            ensure!(last.map(|r| r.seqnum) == written.last().copied(), "the tail");
            anyhow::Ok(())
        }
    };
    check(&ctx).await?;
    let through = reader.partial_stats().context("partial mode")?.reads;
    ensure!(through.tier_reads >= 13 && through.tier_resends == 0, "{through:?}");
    let gathered = c.aggregator_report(0).stats;
    ensure!(gathered.done >= 13 && gathered.refused == 0, "{gathered:?}");

    c.kill_aggregator(0).await;
    let (term, version) = c.configuration().context("a configuration")?.stamp();
    let dropped =
        c.wait_for_config(Duration::from_secs(10), |cfg| cfg.tier.as_ref().is_some_and(|t| t.aggregators.is_empty())).await?;
    ensure!(dropped.stamp().0 == term && dropped.stamp().1 > version, "a version, no new term: {:?}", dropped.stamp());
    check(&ctx).await?;
    c.shutdown().await;
    Ok(())
}
