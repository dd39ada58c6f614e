//! The index node's task (partial mode): its inbox and ticks. It keeps no store: a
//! restarted index node replays the metalog and fetches every record's metadata again.

use super::*;

/// How long a request is held before the node reports it, and how often.
const STALL_REPORT_US: u64 = 2_000_000;

/// Asks a running index node for its counters and sizes (`/metrics`).
#[derive(Clone, Debug)]
pub struct IndexProbe(mpsc::Sender<oneshot::Sender<IndexNodeReport>>);

impl IndexProbe {
    /// The node's report; `None` once it has stopped.
    pub async fn report(&self) -> Option<IndexNodeReport> {
        let (tx, rx) = oneshot::channel();
        self.0.send(tx).await.ok()?;
        rx.await.ok()
    }
}

/// Starts an index node of the index tier.
///
/// Task `tally-index-<id>`: cancelled, the node stops between two awaits and its state
/// is gone; the other replica of its shard answers meanwhile.
pub fn spawn_index(
    id: NodeId,
    controllers: Vec<NodeId>,
    cfg: IndexNodeConfig,
    transport: Transport,
    inbox: mpsc::Receiver<(NodeId, Message)>,
) -> (JoinHandle<()>, IndexProbe) {
    let incarnation = new_incarnation();
    let node = IndexNode::new(id, controllers, incarnation, cfg);
    info!(%id, incarnation, "index node started");
    let (probe, probes) = mpsc::channel(4);
    (spawn_node("index", id, run_index(node, transport, inbox, probes)), IndexProbe(probe))
}

async fn run_index(
    mut node: IndexNode,
    transport: Transport,
    mut inbox: mpsc::Receiver<(NodeId, Message)>,
    mut probes: mpsc::Receiver<oneshot::Sender<IndexNodeReport>>,
) {
    let mut ticks = Ticks::new();
    let (mut reported, mut counted, mut stats) = (0, 0, node.stats);
    loop {
        tokio::select! {
            Some(reply) = probes.recv() => {
                let _ = reply.send(node.report());
            }
            m = inbox.recv() => match m {
                Some((from, msg)) => {
                    node.on_message(now_us(), from, msg);
                    if ticks.input() {
                        ticks.ticked(node.on_tick(now_us()));
                    }
                }
                None => return,
            },
            _ = &mut ticks.sleep => ticks.ticked(node.on_tick(now_us())),
        }
        // A request held for seconds: the node does not reach its position.
        let now = now_us();
        if now >= reported + STALL_REPORT_US {
            if let Some(report) = node.stall_report(now, STALL_REPORT_US) {
                warn!("{report}");
                reported = now;
            }
        }
        if (node.stats.copies_taken, node.stats.replays) != (stats.copies_taken, stats.replays) {
            let how = if node.stats.copies_taken > stats.copies_taken { "copied a replica's state" } else { "replays the log" };
            info!(id = %node.id(), "index node {how}: it serves its shard from there");
            stats = node.stats;
        }
        if now >= counted + STALL_REPORT_US && node.stats != stats {
            (counted, stats) = (now, node.stats);
            debug!(id = %node.id(), ?stats, "index node requests");
        }
        for action in node.take_actions() {
            match action {
                IndexNodeAction::Send(to, msg) => transport.send(to, msg),
                IndexNodeAction::Applied { .. } => {}
            }
        }
    }
}
