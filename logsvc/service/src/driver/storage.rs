//! The storage node's task: its inbox and ticks, the group commit's completions and its
//! reads, and the spans of traced records (`crate::trace`).

use super::*;

/// Write completions a storage node may have waiting before the group commit thread
/// waits for the node (see `spawn_storage`).
const WRITTEN_QUEUE_MAX: usize = 65_536;

/// Records read for a storage node that wait for it to answer; a read task waits
/// beyond that.
const READS_DONE_QUEUE_MAX: usize = 4096;

/// The stores of one storage node.
pub struct StorageStores {
    pub records: Arc<dyn RecordStore>,
    pub group_commit: GroupCommitConfig,
    /// Where the spans of traced records go, once set.
    pub spans: SpanSinks,
}

/// Starts a storage node over `records`, recovering what it holds.
///
/// Task `tally-storage-<id>`: cancelled, the node stops and drops its group commit,
/// which finishes the batch in progress and fails the queued ones (their records were
/// never acknowledged, so engines send them again). On an error (a failed write or
/// sync, after which the store cannot say what is durable) it logs and stops the node;
/// it has to restart and recover.
pub fn spawn_storage(
    id: NodeId,
    controllers: Vec<NodeId>,
    cfg: StorageConfig,
    stores: StorageStores,
    transport: Transport,
    inbox: mpsc::Receiver<(NodeId, Message)>,
) -> Result<JoinHandle<()>> {
    let incarnation = new_incarnation();
    let recovered = stores.records.recover()?;
    let n_recovered = recovered.len();
    let node = StorageNode::recover(id, controllers, incarnation, cfg, recovered);
    let group = GroupCommit::start(stores.records.clone(), stores.group_commit)?;
    info!(%id, incarnation, recovered = n_recovered, "storage node started");
    let (records, traces) = (stores.records, StorageTraces::new(stores.spans));
    Ok(spawn_node("storage", id, async move {
        if let Err(e) = run_storage(node, records, group, traces, transport, inbox).await {
            error!(%id, error = %e, "storage node stopped");
        }
    }))
}

/// A record a storage node's read task got from the store, for the node to answer with.
struct ReadDone {
    to: NodeId,
    req: u64,
    seqnum: SeqNum,
    stored: Result<Option<StoredData>>,
}

async fn run_storage(
    mut node: StorageNode,
    store: Arc<dyn RecordStore>,
    group: GroupCommit,
    mut traces: StorageTraces,
    transport: Transport,
    mut inbox: mpsc::Receiver<(NodeId, Message)>,
) -> Result<()> {
    let mut ticks = Ticks::new();
    let (written_tx, mut written) = mpsc::channel::<(u64, Result<()>)>(WRITTEN_QUEUE_MAX);
    let (read_tx, mut reads) = mpsc::channel::<ReadDone>(READS_DONE_QUEUE_MAX);
    loop {
        tokio::select! {
            m = inbox.recv() => match m {
                Some((from, msg)) => {
                    traces.received(&msg);
                    node.on_message(now_us(), from, msg);
                    if ticks.input() {
                        ticks.ticked(node.on_tick(now_us()));
                    }
                }
                None => return Ok(()),
            },
            Some((batch, result)) = written.recv() => {
                result?;
                // And every other batch made durable by now: one progress report for
                // all (the group commit completes each write of a sync on its own).
                let mut batches = vec![batch];
                while let Ok((batch, result)) = written.try_recv() {
                    result?;
                    batches.push(batch);
                }
                traces.written(&batches);
                node.on_written(&batches);
                if ticks.input() {
                    ticks.ticked(node.on_tick(now_us()));
                }
            }
            Some(ReadDone { to, req, seqnum, stored }) = reads.recv() => node.on_read(to, req, seqnum, stored),
            _ = &mut ticks.sleep => ticks.ticked(node.on_tick(now_us())),
        }
        for action in node.take_actions() {
            match action {
                StorageAction::Send(to, msg) => transport.send(to, msg),
                StorageAction::Write { batch, records } => {
                    traces.writing(batch, &records);
                    let tx = written_tx.clone();
                    let done = Box::new(move |result: Result<()>| {
                        // Runs on the group commit thread, which is not a runtime
                        // thread: when the node is this far behind, waiting here is the
                        // backpressure we want. A closed channel means the node stopped.
                        if let Err(mpsc::error::TrySendError::Full(v)) = tx.try_send((batch, result)) {
                            let _ = tx.blocking_send(v);
                        }
                    });
                    if let Err(e) = group.submit(records, done) {
                        // The records stay unacknowledged; their engine sends them
                        // again after its retransmit interval.
                        warn!(batch, error = %e, "dropping a write");
                    }
                }
                StorageAction::Read { to, req, seqnum, location } => {
                    let (store, read_tx) = (store.clone(), read_tx.clone());
                    // Task storage.read: ends after handing the record to the node, which
                    // answers; cancelled, the engine asks again after its fetch retry. A
                    // failed read answers Missing.
                    tokio::spawn(async move {
                        let read = tokio::task::spawn_blocking(move || store.read(location)).await;
                        let stored = read.unwrap_or_else(|e| Err(Error::Storage(format!("read task failed: {e}"))));
                        let _ = read_tx.send(ReadDone { to, req, seqnum, stored }).await;
                    });
                }
                StorageAction::ReadMetas { to_node, req, shard, from, to } => {
                    let (store, transport) = (store.clone(), transport.clone());
                    // Task storage.read_metas: ends after one reply, as a read does.
                    tokio::spawn(async move {
                        let read = tokio::task::spawn_blocking(move || store.read_metas(shard, from, to)).await;
                        let metas = read.unwrap_or_else(|e| Err(Error::Storage(format!("read task failed: {e}"))));
                        transport.send(to_node, meta_reply(req, shard, from, to, metas));
                    });
                }
                StorageAction::Reclaim(locations) => {
                    let store = store.clone();
                    // Reclaiming is best effort: trimmed data left behind is only space.
                    tokio::task::spawn_blocking(move || {
                        if let Err(e) = store.reclaim(&locations) {
                            warn!(error = %e, "reclaim failed");
                        }
                    });
                }
                StorageAction::Discard { shard, from } => {
                    let store = store.clone();
                    // Discarded records were never ordered; left behind, a later
                    // recovery finds them in a sealed term and discards them again.
                    tokio::task::spawn_blocking(move || {
                        if let Err(e) = store.discard(shard, from) {
                            warn!(shard = shard.0, error = %e, "discard failed");
                        }
                    });
                }
            }
        }
    }
}
