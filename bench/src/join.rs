//! The `index` suite's join case (the spec's Measure 3): what it costs a function node
//! to join a running cluster, on logs of growing length, in each index mode.
//!
//! A loopback cluster (1 sequencer, 3 storage nodes, 2 engines; partial mode with S = 2,
//! R = 1) takes `records` appends of 256 B from 32 concurrent clients; then a third
//! engine starts. Measured from its start: until a configuration binds it
//! (registration), until its first read of the log's last record answers (with the
//! writer's position, so it must see that record), and until its first append is
//! acknowledged; and how many terms the join added. Partial mode binds it in a version
//! of the running term and it follows from there; complete mode seals the term, and the
//! new engine replays the metalog and every record's metadata before it answers.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use tally_logsvc::{BookId, ClusterBuilder, Context, SeqNum, Tag};

use crate::report::Report;

const BOOK: BookId = BookId(9);
const CLIENTS: u64 = 32;

pub async fn run(report: &mut Report, sizes: &[u64]) -> anyhow::Result<()> {
    for &records in sizes {
        for partial in [true, false] {
            let mode = if partial { "partial" } else { "complete" };
            let j = join(partial, records).await.with_context(|| format!("join, {mode}, {records} records"))?;
            let case = format!("join,mode={mode},records={records}");
            report.record(&case, "registered_ms", j.registered.as_secs_f64() * 1e3, "ms")?;
            report.record(&case, "first_read_ms", j.first_read.as_secs_f64() * 1e3, "ms")?;
            report.record(&case, "first_append_ms", j.first_append.as_secs_f64() * 1e3, "ms")?;
            report.record(&case, "terms_added", j.terms_added as f64, "terms")?;
        }
    }
    Ok(())
}

struct Join {
    registered: Duration,
    first_read: Duration,
    first_append: Duration,
    terms_added: u16,
}

async fn join(partial: bool, records: u64) -> anyhow::Result<Join> {
    let dir = tempfile::tempdir().context("creating the cluster directory")?;
    let mut b = ClusterBuilder::new(dir.path());
    b.sequencers = 1;
    b.n_meta = 1;
    b.storage_nodes = 3;
    b.n_data = 3;
    b.engines = 2;
    b.local_delivery = false;
    if partial {
        b.tier = Some((2, 1));
    }
    b.engine_config.op_timeout_us = 60_000_000;
    let mut cluster = b.build().await.context("starting the loopback cluster")?;
    let result = async {
        let data = Bytes::from(vec![5u8; 256]);
        let writers: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (client, data) = (cluster.client((c % 2) as usize), data.clone());
                let n = records / CLIENTS + u64::from(c < records % CLIENTS);
                tokio::spawn(async move {
                    let mut ctx = Context::new();
                    for _ in 0..n {
                        client.append(&mut ctx, BookId(100 + c), &[Tag(c + 1)], data.clone()).await?;
                    }
                    anyhow::Ok(())
                })
            })
            .collect();
        for w in writers {
            w.await??;
        }
        let mut ctx = Context::new();
        let last = cluster.client(0).append(&mut ctx, BOOK, &[Tag(1)], data.clone()).await?;
        let before = cluster.configuration().context("a configuration")?.current().term;
        eprintln!("index: join after {records} records ({})", if partial { "partial" } else { "complete" });
        let start = Instant::now();
        let joined = cluster.add_engine().await?;
        let id = cluster.engine_id(joined);
        let bound = cluster.wait_for_config(Duration::from_secs(600), |c| c.current().engines.contains(&id)).await?;
        let registered = start.elapsed();
        let fresh = cluster.client(joined);
        let found = loop {
            match fresh.read_prev(&mut ctx.clone(), BOOK, Tag(1), SeqNum::MAX).await {
                Ok(found) => break found,
                Err(_) if start.elapsed() < Duration::from_secs(600) => tokio::time::sleep(Duration::from_millis(10)).await,
                Err(e) => return Err(e.into()),
            }
        };
        let first_read = start.elapsed();
        anyhow::ensure!(found.as_ref().map(|r| r.seqnum) == Some(last), "the new engine read {found:?}, not {last:?}");
        fresh.append(&mut ctx, BOOK, &[Tag(1)], data).await?;
        let first_append = start.elapsed();
        let terms_added = bound.current().term.0 - before.0;
        anyhow::Ok(Join { registered, first_read, first_append, terms_added })
    }
    .await;
    cluster.shutdown().await;
    result
}
