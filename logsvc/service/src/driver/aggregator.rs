//! The aggregator's task (partial mode): its inbox and ticks. It keeps no store and
//! only per-lookup state: a restarted aggregator starts empty, and callers whose
//! lookups it lost ask another.

use super::*;

/// Starts an aggregator of index-tier lookups.
///
/// Task `tally-aggregator-<id>`: cancelled, the node stops between two awaits.
pub fn spawn_aggregator(
    id: NodeId,
    controllers: Vec<NodeId>,
    cfg: AggregatorConfig,
    transport: Transport,
    mut inbox: mpsc::Receiver<(NodeId, Message)>,
) -> JoinHandle<()> {
    let mut node = AggregatorNode::new(id, controllers, new_incarnation(), cfg);
    info!(%id, "aggregator started");
    spawn_node("aggregator", id, async move {
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
        }
    })
}
