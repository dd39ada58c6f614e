//! The thread that applies each write's metadata batch to RocksDB (see "Writes" in the
//! parent module's documentation).

use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rocksdb::{WriteBatch, WriteOptions, DB};

use tally_log_core::{Error, Result};

pub(super) fn no_wal() -> WriteOptions {
    let mut opts = WriteOptions::default();
    opts.disable_wal(true);
    opts
}

/// The thread that applies each write's metadata batch to RocksDB, in order, so that a
/// `sync` runs its `fdatasync` while RocksDB takes the batch (a RocksDB write costs a
/// third of an fsync here): see "Writes" in the module documentation.
pub(super) struct MetaThread {
    /// `None` only while dropping, which closes the channel so the thread ends.
    batches: Option<mpsc::Sender<WriteBatch>>,
    applied: Arc<(Mutex<Applied>, Condvar)>,
    thread: Option<JoinHandle<()>>,
    /// Held by a test to keep the thread from applying batches.
    #[cfg(test)]
    pub(super) paused: Arc<Mutex<()>>,
}

/// How far the [`MetaThread`] got.
#[derive(Default)]
struct Applied {
    queued: u64,
    done: u64,
    /// The first failure: every later `settle` reports it.
    failed: Option<String>,
}

impl MetaThread {
    pub(super) fn start(db: Arc<DB>) -> Result<MetaThread> {
        let (tx, rx) = mpsc::channel::<WriteBatch>();
        let applied = Arc::new((Mutex::new(Applied::default()), Condvar::new()));
        let shared = applied.clone();
        #[cfg(test)]
        let paused = Arc::new(Mutex::new(()));
        #[cfg(test)]
        let pause = paused.clone();
        let thread = std::thread::Builder::new()
            .name("tally-journal-meta".into())
            .spawn(move || {
                // However the thread ends (a panic included), a `settle` waiting for a
                // batch it did not apply fails rather than waits forever.
                let _stopped = Stopped(shared.clone());
                while let Ok(batch) = rx.recv() {
                    #[cfg(test)]
                    let _paused = pause.lock().unwrap_or_else(|e| e.into_inner());
                    let result = db.write_opt(batch, &no_wal());
                    let (state, done) = &*shared;
                    let mut a = state.lock().unwrap_or_else(|e| e.into_inner());
                    a.done += 1;
                    if let Err(e) = result {
                        a.failed.get_or_insert_with(|| e.to_string());
                    }
                    done.notify_all();
                }
            })
            .map_err(|e| Error::Storage(format!("starting the journal's metadata thread: {e}")))?;
        Ok(MetaThread {
            batches: Some(tx),
            applied,
            thread: Some(thread),
            #[cfg(test)]
            paused,
        })
    }

    /// Hands `batch` to the thread. The caller holds the writer lock, so batches are
    /// applied in the order of their frames in the journal.
    pub(super) fn apply(&self, batch: WriteBatch) -> Result<()> {
        let stopped = || Error::Storage("the journal's metadata thread stopped".into());
        let tx = self.batches.as_ref().ok_or_else(stopped)?;
        self.applied.0.lock().unwrap_or_else(|e| e.into_inner()).queued += 1;
        tx.send(batch).map_err(|_| stopped())
    }

    /// Waits until every batch handed over so far is in RocksDB.
    pub(super) fn settle(&self) -> Result<()> {
        let (state, done) = &*self.applied;
        let mut a = state.lock().unwrap_or_else(|e| e.into_inner());
        while a.done < a.queued && a.failed.is_none() {
            a = done.wait(a).unwrap_or_else(|e| e.into_inner());
        }
        match &a.failed {
            Some(e) => Err(Error::Storage(format!("writing record metadata: {e}"))),
            None => Ok(()),
        }
    }
}

/// Marks the [`MetaThread`] stopped when dropped.
struct Stopped(Arc<(Mutex<Applied>, Condvar)>);

impl Drop for Stopped {
    fn drop(&mut self) {
        let (state, done) = &*self.0;
        let mut a = state.lock().unwrap_or_else(|e| e.into_inner());
        if a.done < a.queued {
            a.failed.get_or_insert_with(|| "the metadata thread stopped".into());
        }
        done.notify_all();
    }
}

impl Drop for MetaThread {
    /// Stops the thread once it applied every batch, so that the database it shares
    /// is closed when the store is dropped.
    fn drop(&mut self) {
        drop(self.batches.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
