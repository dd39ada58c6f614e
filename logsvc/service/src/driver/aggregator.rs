//! The aggregator's task (partial mode): its inbox and ticks. It keeps no store and
//! only per-lookup state: a restarted aggregator starts empty, and callers whose
//! lookups it lost ask another.

use super::*;

/// A running aggregator's counters and lookups in flight (`/metrics`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AggregatorReport {
    pub id: NodeId,
    pub stats: AggregatorStats,
    pub in_flight: usize,
}

/// Reads a running aggregator's last report.
#[derive(Clone, Debug)]
pub struct AggregatorProbe(watch::Receiver<AggregatorReport>);

impl AggregatorProbe {
    pub fn report(&self) -> AggregatorReport {
        *self.0.borrow()
    }
}

/// Starts an aggregator of index-tier lookups.
///
/// Task `tally-aggregator-<id>`: cancelled, the node stops between two awaits.
pub fn spawn_aggregator(
    id: NodeId,
    controllers: Vec<NodeId>,
    cfg: AggregatorConfig,
    transport: Transport,
    mut inbox: mpsc::Receiver<(NodeId, Message)>,
) -> (JoinHandle<()>, AggregatorProbe) {
    let mut node = AggregatorNode::new(id, controllers, new_incarnation(), cfg);
    info!(%id, "aggregator started");
    let (report, probe) = watch::channel(AggregatorReport { id, stats: AggregatorStats::default(), in_flight: 0 });
    let task = spawn_node("aggregator", id, async move {
        let mut ticks = Ticks::new();
        loop {
            tokio::select! {
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
            for (to, msg) in node.take_actions() {
                transport.send(to, msg);
            }
            let now = AggregatorReport { id, stats: node.stats, in_flight: node.in_flight() };
            report.send_if_modified(|r| std::mem::replace(r, now) != now);
        }
    });
    (task, AggregatorProbe(probe))
}
