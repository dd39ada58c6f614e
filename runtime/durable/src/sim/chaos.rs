//! The safety phase's changes of deployment and configuration: redeploys, a function
//! that appears late, and switches of a table's protocol, which must all complete.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tally_log_core::BookId;

use crate::config::Protocol;
use crate::env::{Clock, Spawn};
use crate::error::Error;

use super::exec::Handle;
use super::guest::{random_program, Op, Program};
use super::world::World;
use super::Rng;

/// What a look at a table's status answered.
type StatusAnswer = Result<Option<crate::switch::TableStatus>, Error>;

/// Redeploys, a function that appears late, and switches, during the safety phase.
pub(super) async fn chaos(world: Arc<World>) {
    let h = world.harness();
    let mut next_redeploy = world.opts.redeploy_every_ms;
    let mut next_switch = world.opts.switch_every_ms;
    let late_at = world.draw(world.opts.safety_ms.max(1));
    let mut late = false;
    while h.now_ms() < world.opts.safety_ms {
        h.sleep(10).await;
        let now = h.now_ms();
        if !late && now >= late_at {
            late = true;
            let program = Program { ops: vec![Op::Incr { table: 1, key: 3 }] };
            world.registry.lock().expect("not poisoned").deploy("late", program, BTreeMap::new());
        }
        if now >= next_redeploy {
            next_redeploy = now + world.opts.redeploy_every_ms;
            let i = world.draw(4);
            let mut rng = Rng::new(world.seed ^ now);
            let callees: Vec<String> = ((i + 1)..4).map(|j| format!("f{j}")).chain(["late".to_string()]).collect();
            let len = 4 + rng.below(6) as usize;
            let program = random_program(&mut rng, len, &callees, true, true);
            world.registry.lock().expect("not poisoned").deploy(&format!("f{i}"), program, BTreeMap::new());
            world.stats.lock().expect("not poisoned").redeploys += 1;
        }
        if now >= next_switch {
            next_switch = now + world.opts.switch_every_ms;
            let book = BookId(world.draw(world.opts.books));
            let target = [Protocol::ReadOptimized, Protocol::WriteOptimized, Protocol::Auto][world.draw(3) as usize];
            if let Some((n, d, _)) = world.pick_node() {
                world.stats.lock().expect("not poisoned").switches += 1;
                let answer =
                    world.on_node(n, d, "switch", move |d| async move { d.tables().switch(book, "sw", target).await }).await;
                if let Some(Err(e)) = answer {
                    if !matches!(e, Error::Conflict(_)) && !e.is_transient() {
                        world.fail(format!("a switch request failed: {e}"));
                    }
                }
            }
        }
    }
    // Every switch finishes, whichever node began it (that node may be gone for good).
    // Each look is given up after a second and made again, on a node drawn anew.
    for book in 0..world.opts.books {
        let book = BookId(book);
        loop {
            h.sleep(20).await;
            let Some((n, d, _)) = world.pick_node() else { continue };
            let answer: Arc<Mutex<Option<StatusAnswer>>> = Arc::default();
            let put = answer.clone();
            Handle { shared: world.shared.clone(), owner: Some(n) }.spawn(
                "table-status",
                Box::pin(async move {
                    let status = d.tables().status(book, "sw").await;
                    *put.lock().expect("not poisoned") = Some(status);
                }),
            );
            let mut got = None;
            for _ in 0..100 {
                h.sleep(10).await;
                got = answer.lock().expect("not poisoned").take();
                if got.is_some() {
                    break;
                }
            }
            match got {
                Some(Ok(Some(s))) if s.switching.is_some() => {}
                Some(Ok(_)) => break,
                _ => {}
            }
        }
    }
    *world.switches_done.lock().expect("not poisoned") = true;
}
