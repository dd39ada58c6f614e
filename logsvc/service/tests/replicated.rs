//! A replicated metalog on a loopback cluster: entries written unsynced, and what a power
//! loss of every sequencer (emulated: torn journals, another boot's marker) leaves.

use std::path::Path;

use anyhow::{ensure, Context as _};
use bytes::Bytes;
use tally_logsvc::{BookId, Cluster, ClusterBuilder, Context, MetalogMode, Tag};

mod common;
use common::{cluster, data, stream, TestDir};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replicated_metalog_writes_entries_unsynced_and_needs_three_sequencers() -> anyhow::Result<()> {
    let dir = TestDir::new();
    let refused = cluster(&dir, |b| {
        (b.sequencers, b.n_meta) = (1, 1);
        b.sequencer_config.metalog = MetalogMode::Replicated;
    })
    .await;
    let refused = refused.err().context("a replicated metalog of one sequencer")?;
    ensure!(format!("{refused:#}").contains("n_meta >= 3"), "{refused:#}");

    let cluster = cluster(&dir, |b| b.sequencer_config.metalog = MetalogMode::Replicated).await?;
    let mut ctx = Context::new();
    for i in 0..20 {
        cluster.client(0).append(&mut ctx, BookId(1), &[Tag(1)], data(&format!("record {i}"))).await?;
    }
    // Spare backups write theirs within `spare_persist_us`.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    cluster.shutdown().await;
    // Every sequencer marked its journal with this boot before its first unsynced write.
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?;
    for id in 1..=3 {
        let marker = dir.path().join(format!("sequencer-{id}")).join("UNSYNCED");
        let marked = std::fs::read_to_string(&marker).with_context(|| format!("reading {}", marker.display()))?;
        ensure!(marked.trim() == boot.trim(), "{} holds {marked:?}", marker.display());
    }
    Ok(())
}

/// What a power loss leaves of a journal written unsynced: its last frames torn (the
/// bytes of the last `bytes` before the end of what was written zeroed), and the boot
/// marker of another boot.
fn lose_power(journal_dir: &Path, bytes: u64) -> anyhow::Result<()> {
    let mut segments: Vec<_> = std::fs::read_dir(journal_dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "journal"))
        .collect();
    segments.sort();
    let last = segments.last().context("a journal segment")?;
    let contents = std::fs::read(last)?;
    let end = contents.iter().rposition(|b| *b != 0).context("frames in the segment")? as u64 + 1;
    let file = std::fs::OpenOptions::new().write(true).open(last)?;
    let from = end.saturating_sub(bytes).max(16);
    std::os::unix::fs::FileExt::write_all_at(&file, &vec![0; (end - from) as usize], from)?;
    std::fs::write(journal_dir.join("UNSYNCED"), "a boot before the power loss")?;
    Ok(())
}

/// Every record of `book`'s tag 1 as each of the cluster's two engines reads it: the
/// same on both.
async fn read_everywhere(cluster: &Cluster, book: BookId) -> anyhow::Result<Vec<Bytes>> {
    let mut seen: Option<Vec<Bytes>> = None;
    for engine in 0..2 {
        let mut ctx = Context::new();
        let read: Vec<Bytes> = stream(&cluster.client(engine), &mut ctx, book, Tag(1)).await?.into_iter().map(|r| r.1).collect();
        ensure!(seen.as_ref().is_none_or(|s| *s == read), "the engines read different logs");
        seen = Some(read);
    }
    seen.context("two engines")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replicated_metalog_keeps_what_any_sequencer_kept_when_every_sequencer_loses_power() -> anyhow::Result<()> {
    let dir = TestDir::new();
    let shape = |b: &mut ClusterBuilder| b.sequencer_config.metalog = MetalogMode::Replicated;
    let book = BookId(9);
    let mut acked = Vec::new();
    // Every sequencer's machine loses power twice: first one of them keeps every entry
    // (it had synced them), then none does.
    for (round, torn) in [[600, 600, 0], [600, 600, 600]].into_iter().enumerate() {
        let before = cluster(&dir, shape).await?;
        let mut ctx = Context::new();
        for i in 0..40 {
            let record = data(&format!("round {round} record {i}"));
            before.client(0).append(&mut ctx, book, &[Tag(1)], record.clone()).await?;
            acked.push(record);
        }
        before.shutdown().await;
        for (id, bytes) in (1..=3).zip(torn) {
            lose_power(&dir.path().join(format!("sequencer-{id}")), bytes)?;
        }
        let cluster = cluster(&dir, shape).await?;
        let read = read_everywhere(&cluster, book).await?;
        match round {
            // A seal waits for every amnesiac sequencer, and keeps the longest tail.
            0 => ensure!(read == acked, "{} of {} acknowledged records kept", read.len(), acked.len()),
            // What none kept is lost: a suffix of what was acknowledged, no more.
            _ => {
                ensure!(acked.starts_with(&read), "the {} records read are no prefix of the acknowledged", read.len());
                ensure!(read.len() < acked.len(), "nothing was lost: the journals were not torn where the entries were");
                acked.truncate(read.len());
            }
        }
        // The log serves on.
        let s = cluster.client(1).append(&mut ctx, book, &[Tag(1)], data("after")).await?;
        let last = cluster.client(0).check_tail(&mut ctx, book, Tag(1)).await?.context("a tail")?;
        ensure!(last.seqnum == s && last.data == data("after"), "the log serves after the loss");
        acked.push(data("after"));
        cluster.shutdown().await;
    }
    Ok(())
}
