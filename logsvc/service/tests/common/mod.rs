//! Helpers of the cluster tests: a temporary directory kept on failure, a cluster built
//! in it, and a stream read whole. Each test binary uses some of them.
#![allow(dead_code)]

use anyhow::Context as _;
use bytes::Bytes;
use tally_logsvc::{BookId, Cluster, ClusterBuilder, Context, LogClient, SeqNum, Tag};

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_test_writer()
        .try_init();
}

/// A test's temporary directory; kept on failure when `TALLY_KEEP_DIR` is set.
pub struct TestDir(Option<tempfile::TempDir>);

impl TestDir {
    pub fn new() -> TestDir {
        TestDir(Some(tempfile::tempdir().expect("a temporary directory")))
    }

    pub fn path(&self) -> &std::path::Path {
        self.0.as_ref().expect("present until dropped").path()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if std::thread::panicking() && std::env::var_os("TALLY_KEEP_DIR").is_some() {
            let dir = self.0.take().expect("present until dropped").keep();
            eprintln!("kept the cluster directory {}", dir.display());
        }
    }
}

pub async fn cluster(dir: &TestDir, change: impl FnOnce(&mut ClusterBuilder)) -> anyhow::Result<Cluster> {
    init_tracing();
    let mut b = ClusterBuilder::new(dir.path());
    change(&mut b);
    b.build().await.context("building the cluster")
}

pub fn data(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Every record of `tag`'s stream of `book`, read forwards one by one.
pub async fn stream(c: &LogClient, ctx: &mut Context, book: BookId, tag: Tag) -> anyhow::Result<Vec<(SeqNum, Bytes)>> {
    let mut out = Vec::new();
    let mut min = SeqNum::MIN;
    while let Some(r) = c.read_next(ctx, book, tag, min).await? {
        out.push((r.seqnum, r.data));
        min = SeqNum(r.seqnum.0 + 1);
    }
    Ok(out)
}
