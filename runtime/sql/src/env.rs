//! What a query's tables share: the node, the position the query reads at (its `AS OF`
//! seqnum, and the client's log position), and the query's budget of time and scanned
//! rows, which every page of every table draws on.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use tally_logsvc::Context;
use tally_runtime::runtime::Runtime;

use crate::SqlError;

/// A table's keys, listed once.
type Keys = Arc<Vec<Bytes>>;

pub struct Env {
    pub rt: Arc<Runtime>,
    handle: tokio::runtime::Handle,
    /// Every table reads as of this seqnum (`None`: now).
    pub as_of: Option<u64>,
    /// Where the client saw the log: every read starts there, and it moves with them.
    ctx: Mutex<Context>,
    deadline: Instant,
    scanned: AtomicU64,
    scan_rows_max: u64,
    /// The keys of the tables `state` listed, by (book, table).
    keys: Mutex<HashMap<(u64, String), Keys>>,
}

impl Env {
    pub fn new(rt: Arc<Runtime>, as_of: Option<u64>, ctx: Context, deadline: Instant, scan_rows_max: u64) -> Env {
        Env {
            rt,
            handle: tokio::runtime::Handle::current(),
            as_of,
            ctx: Mutex::new(ctx),
            deadline,
            scanned: AtomicU64::new(0),
            scan_rows_max,
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// The seqnum reads stop at.
    pub fn at(&self) -> u64 {
        self.as_of.unwrap_or(u64::MAX)
    }

    /// Runs `read` (with the query's log context) to completion on the node's runtime;
    /// called from the query's blocking thread.
    pub fn block<T, F, Fut>(&self, read: F) -> Result<T, SqlError>
    where
        F: FnOnce(Arc<Runtime>, Context) -> Fut,
        Fut: Future<Output = (Result<T, SqlError>, Context)>,
    {
        self.check_time()?;
        let ctx = self.ctx.lock().expect("not poisoned").clone();
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        let (out, ctx) = match self.handle.block_on(async { tokio::time::timeout(remaining, read(self.rt.clone(), ctx)).await }) {
            Ok(done) => done,
            Err(_) => return Err(self.past_time()),
        };
        let mut kept = self.ctx.lock().expect("not poisoned");
        kept.merge(&ctx);
        out
    }

    /// Counts `n` rows a scan of `table` read; an error past the query's budget.
    pub fn scanned(&self, table: &str, n: usize) -> Result<(), SqlError> {
        let total = self.scanned.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        if total > self.scan_rows_max {
            return Err(SqlError::Limit(format!(
                "the query read more than {} rows of its tables (last from {table}): filter on book, invocation_id, \
                 function or seqnum, which are read through the index",
                self.scan_rows_max
            )));
        }
        self.check_time()
    }

    pub fn check_time(&self) -> Result<(), SqlError> {
        if Instant::now() >= self.deadline {
            return Err(self.past_time());
        }
        Ok(())
    }

    fn past_time(&self) -> SqlError {
        SqlError::Limit("the query ran past its time limit".into())
    }

    /// The keys of `table` of `book`, listed once per query.
    pub fn keys(&self, book: u64, table: &str) -> Result<Arc<Vec<Bytes>>, SqlError> {
        let id = (book, table.to_string());
        if let Some(k) = self.keys.lock().expect("not poisoned").get(&id) {
            return Ok(k.clone());
        }
        let t = table.to_string();
        let keys = self
            .block(|rt, ctx| async move { (rt.tables().keys(tally_logsvc::BookId(book), &t).await.map_err(Into::into), ctx) })?;
        self.scanned("state", keys.len())?;
        let keys = Arc::new(keys);
        self.keys.lock().expect("not poisoned").insert(id, keys.clone());
        Ok(keys)
    }

    /// The context the query's reads reached.
    pub fn context(&self) -> Context {
        self.ctx.lock().expect("not poisoned").clone()
    }
}
