//! Group commit: many writers share one write and one fsync.
//!
//! ```text
//!   submit ─┐                      ┌──────────── tally-group-commit thread ────────────┐
//!   submit ─┼─► bounded queue ───► │ take what is queued (up to batch_bytes_max)       │
//!   submit ─┘   (queue_records_max)│ store.write(all records); store.sync()            │
//!                                  │ complete every request of the batch, in order     │
//!                                  └───────────────────────────────────────────────────┘
//! ```
//!
//! A storage node reports a record in its progress only once it is durable, and an
//! fsync costs about as much for one record as for a thousand, so the fsync rate, not
//! the record rate, is what the disk sets. Requests complete in submission order, and a
//! request completes only after the sync that follows its write, so an empty request is
//! a barrier: it completes once everything submitted before it is durable.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use tally_log_core::{Error, Location, Record, Result};
use tokio::sync::{mpsc, oneshot};

use super::RecordStore;

/// Limits of a [`GroupCommit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupCommitConfig {
    /// Record data taken into one batch. A batch always takes at least one request, so
    /// a single larger request still goes through, alone.
    pub batch_bytes_max: usize,
    /// Records waiting in the queue; `submit` fails beyond it. An empty request counts
    /// as one record.
    pub queue_records_max: usize,
    /// A test hook: each sync waits this long first, as a slow disk's would.
    pub sync_delay_ms: u64,
}

impl Default for GroupCommitConfig {
    fn default() -> Self {
        GroupCommitConfig { batch_bytes_max: 4 << 20, queue_records_max: 65536, sync_delay_ms: 0 }
    }
}

/// Counters since start. `syncs` below `records` is the point of group commit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupCommitStats {
    /// Batches taken from the queue, failed ones included.
    pub batches: u64,
    /// Records written, in requests that completed successfully.
    pub records: u64,
    /// Calls of [`RecordStore::sync`].
    pub syncs: u64,
}

/// Called with the outcome of a request, on the group commit thread: it must be quick
/// and must not block (hand the result to another task instead).
pub type GroupCommitDone = Box<dyn FnOnce(Result<()>) + Send>;

/// One submitted request. Dropping it without completing it reports an error, so every
/// `done` runs exactly once, also when the thread stops or unwinds.
struct Request {
    records: Vec<(Location, Record)>,
    done: Option<GroupCommitDone>,
}

impl Request {
    /// What the request counts against `queue_records_max`.
    fn cost(&self) -> usize {
        self.records.len().max(1)
    }

    fn data_bytes(&self) -> usize {
        self.records.iter().map(|(_, r)| r.data.len()).sum()
    }

    fn complete(mut self, result: Result<()>) {
        if let Some(done) = self.done.take() {
            done(result);
        }
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            done(Err(Error::Unavailable("group commit stopped before persisting the records".into())));
        }
    }
}

struct Shared {
    /// Records queued and not yet taken by the thread.
    queued_records: AtomicUsize,
    stopping: AtomicBool,
    batches: AtomicU64,
    records: AtomicU64,
    syncs: AtomicU64,
}

/// Group commit on top of a [`RecordStore`], run by one dedicated OS thread named
/// `tally-group-commit` (the store's calls block, so they stay off the async runtime).
///
/// Dropping a `GroupCommit` stops the thread: the batch in progress finishes (its
/// requests complete normally), every request still queued completes with
/// [`Error::Unavailable`] without being written, and the drop waits for the thread to
/// end. After a failed write or sync the thread stops the same way, because the store
/// can no longer say which writes are durable (a failed fsync may have dropped dirty
/// pages); the node has to restart and recover.
pub struct GroupCommit {
    queue: Option<mpsc::Sender<Request>>,
    shared: Arc<Shared>,
    config: GroupCommitConfig,
    thread: Option<JoinHandle<()>>,
}

impl GroupCommit {
    pub fn start(store: Arc<dyn RecordStore>, config: GroupCommitConfig) -> Result<GroupCommit> {
        if config.batch_bytes_max == 0 {
            return Err(Error::InvalidArgument("batch_bytes_max must be positive".into()));
        }
        if config.queue_records_max == 0 || config.queue_records_max > tokio::sync::Semaphore::MAX_PERMITS {
            return Err(Error::InvalidArgument(format!(
                "queue_records_max must be in 1..={}, not {}",
                tokio::sync::Semaphore::MAX_PERMITS,
                config.queue_records_max
            )));
        }
        // Every request costs at least one record, so the record limit also bounds the
        // channel and `try_send` never finds it full while the count admits a request.
        let (tx, rx) = mpsc::channel(config.queue_records_max);
        let shared = Arc::new(Shared {
            queued_records: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            batches: AtomicU64::new(0),
            records: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        });
        let worker = Worker {
            store,
            rx,
            shared: shared.clone(),
            batch_bytes_max: config.batch_bytes_max,
            sync_delay: std::time::Duration::from_millis(config.sync_delay_ms),
        };
        let thread = std::thread::Builder::new()
            .name("tally-group-commit".into())
            .spawn(move || worker.run())
            .map_err(|e| Error::Storage(format!("cannot spawn the group commit thread: {e}")))?;
        Ok(GroupCommit { queue: Some(tx), shared, config, thread: Some(thread) })
    }

    /// Queues `records` to be written and synced; `done` gets the outcome (see [`GroupCommitDone`]).
    ///
    /// Never blocks. Returns [`Error::Unavailable`] if the queue is full or the thread
    /// has stopped, and [`Error::InvalidArgument`] if the request alone exceeds the
    /// queue; on an error `done` is dropped without being called.
    pub fn submit(&self, records: Vec<(Location, Record)>, done: GroupCommitDone) -> Result<()> {
        let request = Request { records, done: Some(done) };
        self.enqueue(request).map_err(|(mut request, e)| {
            request.done = None;
            e
        })
    }

    fn enqueue(&self, request: Request) -> std::result::Result<(), (Request, Error)> {
        let stopped = || Error::Unavailable("group commit has stopped".into());
        let full = || Error::Unavailable("the group commit queue is full".into());
        let Some(queue) = &self.queue else { return Err((request, stopped())) };
        if self.shared.stopping.load(Ordering::Acquire) {
            return Err((request, stopped()));
        }
        let (cost, max) = (request.cost(), self.config.queue_records_max);
        if cost > max {
            let e =
                Error::InvalidArgument(format!("a request of {cost} records exceeds the group commit queue of {max} records"));
            return Err((request, e));
        }
        let reserved = self
            .shared
            .queued_records
            .try_update(Ordering::AcqRel, Ordering::Acquire, |queued| queued.checked_add(cost).filter(|n| *n <= max));
        if reserved.is_err() {
            return Err((request, full()));
        }
        queue.try_send(request).map_err(|e| {
            self.shared.queued_records.fetch_sub(cost, Ordering::AcqRel);
            match e {
                mpsc::error::TrySendError::Full(r) => (r, full()),
                mpsc::error::TrySendError::Closed(r) => (r, stopped()),
            }
        })
    }

    /// Writes `records` and returns once they are durable. Dropping the future does not
    /// cancel the write; it only stops waiting for it.
    pub async fn persist(&self, records: Vec<(Location, Record)>) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.submit(
            records,
            Box::new(move |result| {
                // The receiver is gone only if the caller stopped waiting, which is
                // allowed: the records are persisted all the same.
                let _ = tx.send(result);
            }),
        )?;
        rx.await.map_err(|_| Error::Unavailable("group commit stopped before persisting the records".into()))?
    }

    pub fn stats(&self) -> GroupCommitStats {
        GroupCommitStats {
            batches: self.shared.batches.load(Ordering::Relaxed),
            records: self.shared.records.load(Ordering::Relaxed),
            syncs: self.shared.syncs.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting requests and tells the thread to fail what is queued once its
    /// current batch is done; the first half of dropping.
    fn close(&mut self) {
        self.shared.stopping.store(true, Ordering::Release);
        // Dropping the sender wakes the thread if it waits on an empty queue.
        self.queue = None;
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        self.close();
        let Some(thread) = self.thread.take() else { return };
        // A `done` callback may drop the last handle on the thread itself; joining
        // would then wait for ever, and the thread is about to end anyway.
        if thread.thread().id() == std::thread::current().id() {
            return;
        }
        if thread.join().is_err() {
            tracing::error!("the group commit thread panicked");
        }
    }
}

struct Worker {
    store: Arc<dyn RecordStore>,
    rx: mpsc::Receiver<Request>,
    shared: Arc<Shared>,
    batch_bytes_max: usize,
    sync_delay: std::time::Duration,
}

impl Worker {
    fn run(mut self) {
        tracing::debug!("group commit started");
        // A request taken from the queue that did not fit in the previous batch.
        let mut carried: Option<Request> = None;
        loop {
            let first = match carried.take() {
                Some(request) => request,
                None => match self.rx.blocking_recv() {
                    Some(request) => self.taken(request),
                    None => break,
                },
            };
            if self.shared.stopping.load(Ordering::Acquire) {
                drop(first);
                break;
            }
            let mut bytes = first.data_bytes();
            let mut batch = vec![first];
            while bytes < self.batch_bytes_max {
                let Ok(request) = self.rx.try_recv() else { break };
                let request = self.taken(request);
                let request_bytes = request.data_bytes();
                if bytes + request_bytes > self.batch_bytes_max {
                    carried = Some(request);
                    break;
                }
                bytes += request_bytes;
                batch.push(request);
            }
            if let Err(e) = self.commit(batch, bytes) {
                tracing::error!(error = %e, "group commit failed; failing queued requests and stopping");
                break;
            }
        }
        // Whatever is still queued completes with an error as it is dropped. Closing
        // first makes new submits fail rather than queue behind a thread that is gone.
        drop(carried);
        self.rx.close();
        while let Ok(request) = self.rx.try_recv() {
            drop(self.taken(request));
        }
        tracing::debug!("group commit stopped");
    }

    fn taken(&self, request: Request) -> Request {
        self.shared.queued_records.fetch_sub(request.cost(), Ordering::AcqRel);
        request
    }

    /// Writes and syncs one batch and completes its requests, in order.
    fn commit(&self, mut batch: Vec<Request>, bytes: usize) -> Result<()> {
        self.shared.batches.fetch_add(1, Ordering::Relaxed);
        let mut records = Vec::with_capacity(batch.iter().map(|r| r.records.len()).sum());
        for request in &mut batch {
            records.append(&mut request.records);
        }
        let count = records.len();
        // A batch of empty requests only waits for earlier batches, which were synced
        // before they completed, so it needs no write and no sync.
        let result = if records.is_empty() {
            Ok(())
        } else {
            self.store.write(&records).and_then(|()| {
                self.shared.syncs.fetch_add(1, Ordering::Relaxed);
                if !self.sync_delay.is_zero() {
                    std::thread::sleep(self.sync_delay);
                }
                self.store.sync()
            })
        };
        tracing::trace!(requests = batch.len(), records = count, bytes, ok = result.is_ok(), "group commit batch");
        match &result {
            Ok(()) => {
                self.shared.records.fetch_add(count as u64, Ordering::Relaxed);
            }
            // Stopping before completing means a submitter that saw this error cannot
            // queue behind it.
            Err(_) => self.shared.stopping.store(true, Ordering::Release),
        }
        for request in batch {
            request.complete(result.clone());
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc as std_mpsc;
    use std::sync::Mutex;
    use std::time::Duration;

    use bytes::Bytes;
    use tally_log_core::{BookId, MemStore, RecordMeta, ShardId};

    use super::*;
    use crate::store::{FsyncPolicy, RecoveredRecord, RocksStore, StoredData};

    /// Long enough for any healthy run; a lost completion fails the test instead of
    /// hanging it.
    const COMPLETION_WAIT: Duration = Duration::from_secs(60);

    fn loc(shard: u32, local_id: u64) -> Location {
        Location { shard: ShardId(shard), local_id }
    }

    fn record(data_bytes: usize) -> Record {
        Record { meta: RecordMeta::plain(BookId(1), vec![]), data: Bytes::from(vec![7u8; data_bytes]) }
    }

    /// A [`MemStore`] whose `sync` announces itself and then waits for the test to open
    /// the gate, so a test can hold the group commit thread inside a batch while it
    /// queues more requests. Dropping the gate's sender opens it for good.
    struct GatedStore {
        inner: MemStore,
        entered: std_mpsc::Sender<()>,
        gate: Mutex<std_mpsc::Receiver<()>>,
        /// Records per `write` call, in order.
        writes: Mutex<Vec<usize>>,
        fail_writes: bool,
    }

    struct Gate {
        store: Arc<GatedStore>,
        entered: std_mpsc::Receiver<()>,
        open: Option<std_mpsc::Sender<()>>,
    }

    impl Gate {
        fn new(fail_writes: bool) -> Gate {
            let (entered_tx, entered) = std_mpsc::channel();
            let (open, gate) = std_mpsc::channel();
            let store = GatedStore {
                inner: MemStore::new(),
                entered: entered_tx,
                gate: Mutex::new(gate),
                writes: Mutex::new(Vec::new()),
                fail_writes,
            };
            Gate { store: Arc::new(store), entered, open: Some(open) }
        }

        fn wait_entered(&self) {
            self.entered.recv_timeout(COMPLETION_WAIT).expect("the group commit thread reached sync");
        }

        fn open(&mut self) {
            self.open = None;
        }
    }

    impl RecordStore for GatedStore {
        fn write(&self, records: &[(Location, Record)]) -> Result<()> {
            self.writes.lock().unwrap().push(records.len());
            if self.fail_writes {
                return Err(Error::Storage("disk on fire".into()));
            }
            self.inner.write(records)
        }

        fn sync(&self) -> Result<()> {
            let _ = self.entered.send(());
            // An error means the test dropped the sender: the gate is open.
            let _ = self.gate.lock().unwrap().recv();
            self.inner.sync()
        }

        fn read(&self, location: Location) -> Result<Option<StoredData>> {
            self.inner.read(location)
        }

        fn read_metas(&self, shard: ShardId, from: u64, to: u64) -> Result<Vec<RecordMeta>> {
            self.inner.read_metas(shard, from, to)
        }

        fn reclaim(&self, locations: &[Location]) -> Result<()> {
            self.inner.reclaim(locations)
        }

        fn discard(&self, shard: ShardId, from: u64) -> Result<()> {
            self.inner.discard(shard, from)
        }

        fn recover(&self) -> Result<Vec<RecoveredRecord>> {
            self.inner.recover()
        }
    }

    fn done_to(tx: &std_mpsc::Sender<(u64, Result<()>)>, id: u64) -> GroupCommitDone {
        let tx = tx.clone();
        Box::new(move |result| {
            let _ = tx.send((id, result));
        })
    }

    /// Completions, collected on a channel.
    struct Completions {
        tx: std_mpsc::Sender<(u64, Result<()>)>,
        rx: std_mpsc::Receiver<(u64, Result<()>)>,
    }

    impl Completions {
        fn new() -> Completions {
            let (tx, rx) = std_mpsc::channel();
            Completions { tx, rx }
        }

        fn done(&self, id: u64) -> GroupCommitDone {
            done_to(&self.tx, id)
        }

        /// The next `n` completions, in the order they arrived.
        fn take(&self, n: usize) -> Vec<(u64, Result<()>)> {
            (0..n).map(|_| self.rx.recv_timeout(COMPLETION_WAIT).expect("a request completed")).collect()
        }
    }

    fn start(store: Arc<dyn RecordStore>, batch_bytes_max: usize, queue_records_max: usize) -> GroupCommit {
        GroupCommit::start(store, GroupCommitConfig { batch_bytes_max, queue_records_max, sync_delay_ms: 0 })
            .expect("group commit starts")
    }

    #[test]
    fn concurrent_submits_share_syncs() {
        let mut gate = Gate::new(false);
        let commit = start(gate.store.clone(), 4 << 20, 65536);
        let completions = Completions::new();
        commit.submit(vec![(loc(0, 0), record(10))], completions.done(0)).unwrap();
        gate.wait_entered();
        // While the first batch waits in its sync, eight threads queue 100 requests each.
        std::thread::scope(|s| {
            for t in 1..=8u32 {
                let (commit, tx) = (&commit, completions.tx.clone());
                s.spawn(move || {
                    for i in 0..100u64 {
                        let id = u64::from(t) * 1000 + i;
                        commit.submit(vec![(loc(t, i), record(10))], done_to(&tx, id)).unwrap();
                    }
                });
            }
        });
        gate.open();
        let done = completions.take(801);
        assert!(done.iter().all(|(_, r)| r.is_ok()), "{done:?}");
        // Each submitter's requests complete in the order it submitted them.
        for t in 1..=8u64 {
            let ids: Vec<u64> = done.iter().map(|(id, _)| *id).filter(|id| id / 1000 == t).collect();
            assert_eq!(ids, (0..100).map(|i| t * 1000 + i).collect::<Vec<_>>());
        }
        assert_eq!(commit.stats(), GroupCommitStats { batches: 2, records: 801, syncs: 2 });
        // Completed means durable: everything survives a crash of the store.
        gate.store.inner.crash();
        assert_eq!(gate.store.inner.recover().unwrap().len(), 801);
    }

    #[test]
    fn batches_end_at_batch_bytes_max() {
        /// Queues one-record requests of `sizes` data bytes behind a held batch and
        /// checks how many records each following write took.
        fn check(batch_bytes_max: usize, sizes: &[usize], expect: &[usize]) {
            let mut gate = Gate::new(false);
            let commit = start(gate.store.clone(), batch_bytes_max, 1024);
            let completions = Completions::new();
            commit.submit(vec![(loc(0, 0), record(0))], completions.done(0)).unwrap();
            gate.wait_entered();
            for (i, size) in sizes.iter().enumerate() {
                commit.submit(vec![(loc(1, i as u64), record(*size))], completions.done(1)).unwrap();
            }
            gate.open();
            assert!(completions.take(1 + sizes.len()).iter().all(|(_, r)| r.is_ok()));
            let writes = gate.store.writes.lock().unwrap().clone();
            assert_eq!(writes[1..], *expect, "batch_bytes_max {batch_bytes_max}, sizes {sizes:?}");
        }
        check(10, &[], &[]);
        check(10, &[3, 3, 3], &[3]);
        check(10, &[3, 3, 3, 3], &[3, 1]);
        check(10, &[4, 6, 1], &[2, 1]);
        check(10, &[25, 1], &[1, 1]);
        check(10, &[1, 25, 1], &[1, 1, 1]);
        check(10, &[0, 0, 10, 0], &[3, 1]);
    }

    #[test]
    fn a_full_queue_refuses_without_blocking() {
        let mut gate = Gate::new(false);
        let commit = start(gate.store.clone(), 4 << 20, 4);
        let completions = Completions::new();
        commit.submit(vec![(loc(0, 0), record(1))], completions.done(0)).unwrap();
        gate.wait_entered();
        commit.submit(vec![(loc(1, 0), record(1)), (loc(1, 1), record(1))], completions.done(1)).unwrap();
        commit.submit(vec![(loc(1, 2), record(1))], completions.done(2)).unwrap();
        commit.submit(vec![], completions.done(3)).unwrap();
        let called = Arc::new(AtomicBool::new(false));
        let flag = |called: &Arc<AtomicBool>| -> GroupCommitDone {
            let called = called.clone();
            Box::new(move |_| called.store(true, Ordering::SeqCst))
        };
        let full = commit.submit(vec![(loc(1, 3), record(1))], flag(&called));
        assert!(matches!(full, Err(Error::Unavailable(ref m)) if m.contains("full")), "{full:?}");
        let empty = commit.submit(vec![], flag(&called));
        assert!(matches!(empty, Err(Error::Unavailable(_))), "{empty:?}");
        let huge = commit.submit((0..5).map(|i| (loc(2, i), record(1))).collect(), flag(&called));
        assert!(matches!(huge, Err(Error::InvalidArgument(_))), "{huge:?}");
        assert!(!called.load(Ordering::SeqCst), "a refused request's done ran");
        gate.open();
        assert!(completions.take(4).iter().all(|(_, r)| r.is_ok()));
        // The queue drained, so it accepts again.
        commit.submit(vec![(loc(1, 3), record(1))], completions.done(4)).unwrap();
        assert!(completions.take(1)[0].1.is_ok());
    }

    #[test]
    fn stopping_fails_queued_requests() {
        let mut gate = Gate::new(false);
        let mut commit = start(gate.store.clone(), 4 << 20, 64);
        let completions = Completions::new();
        commit.submit(vec![(loc(0, 0), record(1))], completions.done(0)).unwrap();
        gate.wait_entered();
        for i in 1..=3 {
            commit.submit(vec![(loc(1, i), record(1))], completions.done(i)).unwrap();
        }
        // The first half of a drop, so the gate can open after it.
        commit.close();
        assert!(matches!(commit.submit(vec![], completions.done(9)), Err(Error::Unavailable(_))));
        gate.open();
        let done = completions.take(4);
        assert_eq!(done[0], (0, Ok(())));
        for (i, (id, result)) in done[1..].iter().enumerate() {
            assert_eq!(*id, i as u64 + 1);
            assert!(matches!(result, Err(Error::Unavailable(_))), "{result:?}");
        }
        drop(commit);
        assert_eq!(gate.store.inner.read(loc(1, 1)).unwrap(), None);
    }

    #[test]
    fn a_failed_write_fails_its_batch_and_stops() {
        let mut gate = Gate::new(true);
        gate.open();
        let commit = start(gate.store.clone(), 4 << 20, 64);
        let completions = Completions::new();
        commit.submit(vec![(loc(0, 0), record(1))], completions.done(0)).unwrap();
        let done = completions.take(1);
        assert!(matches!(done[0].1, Err(Error::Storage(_))), "{done:?}");
        let after = commit.submit(vec![(loc(0, 1), record(1))], completions.done(1));
        assert!(matches!(after, Err(Error::Unavailable(_))), "{after:?}");
        assert_eq!(commit.stats(), GroupCommitStats { batches: 1, records: 0, syncs: 0 });
    }

    #[test]
    fn dropping_the_last_handle_in_a_callback_does_not_deadlock() {
        let mut gate = Gate::new(false);
        let commit = Arc::new(start(gate.store.clone(), 4 << 20, 64));
        let (tx, rx) = std_mpsc::channel();
        let handle = commit.clone();
        let done: GroupCommitDone = Box::new(move |result| {
            drop(handle);
            let _ = tx.send(result);
        });
        commit.submit(vec![(loc(0, 0), record(1))], done).unwrap();
        gate.wait_entered();
        drop(commit);
        gate.open();
        assert_eq!(rx.recv_timeout(COMPLETION_WAIT), Ok(Ok(())));
    }

    #[test]
    fn config_limits_are_checked() {
        let store: Arc<dyn RecordStore> = Arc::new(MemStore::new());
        for (batch_bytes_max, queue_records_max) in [(0, 1), (1, 0), (1, usize::MAX)] {
            let started =
                GroupCommit::start(store.clone(), GroupCommitConfig { batch_bytes_max, queue_records_max, sync_delay_ms: 0 });
            assert!(matches!(started, Err(Error::InvalidArgument(_))), "{batch_bytes_max} {queue_records_max}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn persist_on_rocks_is_durable_across_reopen() -> anyhow::Result<()> {
        const TASKS: u32 = 32;
        const PERSISTS: u64 = 50;
        let dir = tempfile::TempDir::new()?;
        let store = Arc::new(RocksStore::open(dir.path(), FsyncPolicy::EveryBatch)?);
        let commit = Arc::new(GroupCommit::start(store.clone(), GroupCommitConfig::default())?);
        let mut tasks = tokio::task::JoinSet::new();
        for t in 0..TASKS {
            let commit = commit.clone();
            tasks.spawn(async move {
                for i in 0..PERSISTS {
                    commit.persist(vec![(loc(t, i), record(100))]).await?;
                }
                Ok::<(), Error>(())
            });
        }
        while let Some(task) = tasks.join_next().await {
            task??;
        }
        let stats = commit.stats();
        assert_eq!(stats.records, u64::from(TASKS) * PERSISTS);
        assert_eq!(stats.syncs, stats.batches);
        assert!(stats.syncs <= stats.records, "{stats:?}");
        drop(commit);
        drop(store);
        let reopened = RocksStore::open(dir.path(), FsyncPolicy::EveryBatch)?;
        assert_eq!(reopened.recover()?.len() as u64, u64::from(TASKS) * PERSISTS);
        assert_eq!(reopened.read(loc(TASKS - 1, PERSISTS - 1))?, Some(StoredData::Record(record(100))));
        Ok(())
    }
}
