//! [`Durable`]: a node's exactly-once layer, in named parts: the [`Core`] its instances
//! run on (the log, the state store, time, the tables' transition logs, the books), and
//! above it the node's invocations (`invoke/`), schedules (`schedule/`) and switches
//! (`switch.rs`), with the functions it runs. Background loops (recovery, `auto`,
//! switches, schedules) hold it weakly and end once [`Durable::stop`] is called.
//!
//! The core knows this layer only as [`Invoker`]: a child call and running a lock's
//! holder again go through it, so that no file below imports this one.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tally_log_core::{BookId, Context};

use crate::attempt::Functions;
use crate::config::StateConfig;
use crate::core::{ChildCall, Core, CoreParts, Invoker, NodeBounds};
use crate::env::{BoxFuture, Clock, LogBook, Observe, Peers, Spawn};
use crate::error::{Error, Result};
use crate::id::InstanceId;
use crate::instance::{Instance, Of};
use crate::invoke::runs::{Run, Running};
use crate::schedule::Drivers;
use crate::store::StateStore;
use crate::tags::TagKey;

/// The parts a node's exactly-once layer runs on.
pub struct Parts {
    pub log: Arc<dyn LogBook>,
    pub store: Arc<dyn StateStore>,
    pub clock: Arc<dyn Clock>,
    pub spawn: Arc<dyn Spawn>,
    pub functions: Arc<dyn Functions>,
    /// Which books this node looks after (see [`Peers`]).
    pub peers: Arc<dyn Peers>,
    /// What the node measures of executions (see [`Observe`]).
    pub observe: Arc<dyn Observe>,
    /// A fresh secret, proposed as the cluster's tag key if it has none yet.
    pub tag_key: TagKey,
    /// Where this node's invocation IDs start (random, so nodes and restarts differ).
    pub id_prefix: u64,
}

/// The cluster's schedules, as a node offers them (`schedule/driver.rs`).
pub struct Schedules<'a>(pub(crate) &'a Arc<Durable>);

/// Invocations by ID: their listing, cancellation and the completion of their promises
/// (`invoke/status.rs`, `invoke/waking.rs`).
pub struct Invocations<'a>(pub(crate) &'a Arc<Durable>);

/// The tables' protocols and their switches (`switch.rs`).
pub struct Tables<'a>(pub(crate) &'a Arc<Durable>);

/// The state of Boki's libraries (objects, queues, locks), for operators (`inspect.rs`).
pub struct Libraries<'a>(pub(crate) &'a Core);

/// A node's exactly-once layer.
pub struct Durable {
    /// What its instances run on.
    pub(crate) core: Arc<Core>,
    pub(crate) functions: Arc<dyn Functions>,
    pub(crate) running: Running,
    /// The schedules this node knows and drives.
    pub(crate) drivers: Drivers,
    /// Switches this node is completing, by (book, table).
    pub(crate) completing: Mutex<BTreeSet<(BookId, String)>>,
    /// Lock holders this node ran again for their waiters, and when (`locks.rs`).
    pub(crate) kicked: Mutex<HashMap<InstanceId, u64>>,
    /// What this node has seen of transition logs (`switch.rs`): a status or a switch
    /// reads from there, so it sees the node's own transitions even while the index
    /// lags behind the acknowledged appends.
    pub(crate) transitions_seen: Mutex<Context>,
    /// Set by [`Durable::stop`]: the background loops end at their next turn.
    stopped: AtomicBool,
}

impl Durable {
    /// Agrees on the cluster's tag key and reads the registered books. Background work
    /// starts with [`Durable::start_background`].
    pub async fn start(parts: Parts, config: StateConfig, bounds: NodeBounds) -> Result<Arc<Durable>, Error> {
        let core_parts = CoreParts {
            log: parts.log,
            store: parts.store,
            clock: parts.clock,
            spawn: parts.spawn,
            peers: parts.peers,
            observe: parts.observe,
            tag_key: parts.tag_key,
        };
        let core = Arc::new(Core::start(core_parts, config, bounds).await?);
        let durable = Arc::new(Durable {
            core,
            functions: parts.functions,
            running: Running::new(parts.id_prefix),
            drivers: Default::default(),
            completing: Mutex::new(BTreeSet::new()),
            kicked: Mutex::new(HashMap::new()),
            transitions_seen: Mutex::new(Context::new()),
            stopped: AtomicBool::new(false),
        });
        let invoker: Weak<dyn Invoker> = Arc::downgrade(&(durable.clone() as Arc<dyn Invoker>));
        durable.core.set_invoker(invoker);
        Ok(durable)
    }

    /// Ends the node's background loops (the recovery scan, `auto`, the resumption of
    /// switches) at their next turn, though the node is still referenced: a node whose
    /// log is shutting down must not keep scanning it.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// The node behind a background loop's `weak`, unless it is gone or stopped.
    pub(crate) fn live(weak: &Weak<Durable>) -> Option<Arc<Durable>> {
        weak.upgrade().filter(|d| !d.stopped.load(Ordering::Acquire))
    }

    /// The cluster's schedules.
    pub fn schedules(self: &Arc<Self>) -> Schedules<'_> {
        Schedules(self)
    }

    /// Invocations by ID (their status is [`Durable::invocation`]).
    pub fn invocations(self: &Arc<Self>) -> Invocations<'_> {
        Invocations(self)
    }

    /// The tables' protocols.
    pub fn tables(self: &Arc<Self>) -> Tables<'_> {
        Tables(self)
    }

    /// The state of objects, queues and locks.
    pub fn libraries(&self) -> Libraries<'_> {
        Libraries(&self.core)
    }

    /// Every book registered so far (by any node).
    pub async fn books(&self) -> Result<BTreeSet<BookId>, Error> {
        self.core.books().await
    }

    /// The state store (for tests that look at what garbage collection leaves).
    pub fn store(&self) -> &Arc<dyn StateStore> {
        &self.core.store
    }

    /// An instance of an invocation on this node's core, for those who drive one
    /// directly (benchmarks, tests).
    pub fn instance(&self, of: Of) -> Instance {
        Instance::new(self.core.clone(), of)
    }

    /// The node's configuration of `[state]`.
    pub fn config(&self) -> &StateConfig {
        &self.core.config
    }
}

impl Tables<'_> {
    /// The tables of `book` that have a transition log.
    pub async fn list(&self, book: BookId) -> Result<BTreeSet<String>, Error> {
        self.0.core.tables(book).await
    }
}

impl Invoker for Durable {
    fn call(self: Arc<Self>, child: ChildCall) -> BoxFuture<'static, (Result<Vec<u8>>, Context)> {
        Box::pin(async move { self.run(Run::child(child)).await })
    }

    fn kick_holder(self: Arc<Self>, ctx: &Context, book: BookId, root: &InstanceId) {
        Durable::kick_holder(&self, ctx, book, root)
    }
}
