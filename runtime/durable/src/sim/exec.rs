//! A deterministic single-threaded executor with a simulated clock: the simulator's
//! replacement for tokio. Which ready task runs next is drawn from the seed, time moves
//! only when no task is ready (to the next timer), and every task belongs to a node or
//! to the harness, so a node's crash drops exactly its tasks.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll, Wake, Waker};

use crate::env::{BoxFuture, Clock, Spawn};

use super::Rng;

pub type TaskId = u64;

/// Who a task belongs to: a node (dropped when the node crashes) or the harness.
pub type Owner = Option<usize>;

struct Task {
    owner: Owner,
    name: &'static str,
    future: BoxFuture<'static, ()>,
}

/// What tasks and futures share with the executor.
#[derive(Default)]
pub struct Shared {
    ready: BTreeSet<TaskId>,
    spawned: Vec<(TaskId, Task)>,
    next_task: TaskId,
    now_ms: u64,
    timers: BTreeMap<(u64, u64), Waker>,
    next_timer: u64,
}

pub type SharedRef = Arc<Mutex<Shared>>;

struct TaskWaker {
    id: TaskId,
    shared: SharedRef,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.shared.lock().expect("not poisoned").ready.insert(self.id);
    }
}

/// The executor.
pub struct Exec {
    pub shared: SharedRef,
    tasks: BTreeMap<TaskId, Task>,
    /// Tasks woken while their node was paused, run when it resumes.
    deferred: BTreeSet<TaskId>,
}

/// What one call of [`Exec::step`] did.
pub enum Stepped {
    /// Polled a task of this owner (it had been woken).
    Polled(Owner),
    /// Nothing was ready; time moved to the next timer.
    Advanced,
    /// Nothing is ready and no timer is set.
    Idle,
}

impl Exec {
    pub fn new() -> Exec {
        Exec { shared: Arc::new(Mutex::new(Shared::default())), tasks: BTreeMap::new(), deferred: BTreeSet::new() }
    }

    pub fn now_ms(&self) -> u64 {
        self.shared.lock().expect("not poisoned").now_ms
    }

    pub fn spawn(&mut self, owner: Owner, name: &'static str, future: BoxFuture<'static, ()>) {
        spawn_on(&self.shared, owner, name, future);
    }

    /// Drops every task of `node`, as its process dying would.
    pub fn kill(&mut self, node: usize) -> usize {
        self.adopt_spawned();
        let before = self.tasks.len();
        self.tasks.retain(|_, t| t.owner != Some(node));
        self.deferred.retain(|id| self.tasks.contains_key(id));
        before - self.tasks.len()
    }

    /// The names of the tasks left, for a report of what never finished.
    pub fn task_names(&self) -> Vec<(Owner, &'static str)> {
        self.tasks.values().map(|t| (t.owner, t.name)).collect()
    }

    fn adopt_spawned(&mut self) {
        let spawned = std::mem::take(&mut self.shared.lock().expect("not poisoned").spawned);
        for (id, task) in spawned {
            self.tasks.insert(id, task);
        }
    }

    /// Polls one ready task (drawn by `rng`) that does not belong to a paused node, or
    /// moves time to the next timer if none is ready.
    pub fn step(&mut self, rng: &mut Rng, paused: &BTreeSet<usize>, time_limit_ms: u64) -> Stepped {
        self.adopt_spawned();
        let resumable: Vec<TaskId> = self
            .deferred
            .iter()
            .copied()
            .filter(|id| self.tasks.get(id).is_some_and(|t| t.owner.is_none_or(|n| !paused.contains(&n))))
            .collect();
        for id in resumable {
            self.deferred.remove(&id);
            self.shared.lock().expect("not poisoned").ready.insert(id);
        }
        let ready: Vec<TaskId> = {
            let mut shared = self.shared.lock().expect("not poisoned");
            let ready = std::mem::take(&mut shared.ready);
            ready.into_iter().collect()
        };
        let mut runnable = Vec::new();
        for id in ready {
            match self.tasks.get(&id) {
                Some(t) if t.owner.is_some_and(|n| paused.contains(&n)) => {
                    self.deferred.insert(id);
                }
                Some(_) => runnable.push(id),
                None => {}
            }
        }
        if runnable.is_empty() {
            return self.advance(time_limit_ms);
        }
        let pick = runnable.swap_remove(rng.below(runnable.len() as u64) as usize);
        {
            let mut shared = self.shared.lock().expect("not poisoned");
            shared.ready.extend(runnable);
        }
        let owner = self.tasks[&pick].owner;
        self.poll(pick);
        Stepped::Polled(owner)
    }

    fn poll(&mut self, id: TaskId) {
        let Some(mut task) = self.tasks.remove(&id) else { return };
        let waker = Waker::from(Arc::new(TaskWaker { id, shared: self.shared.clone() }));
        let mut cx = TaskContext::from_waker(&waker);
        if task.future.as_mut().poll(&mut cx).is_pending() {
            self.tasks.insert(id, task);
        }
    }

    /// Moves time to the next timer (not past `limit_ms`) and wakes what it fires.
    fn advance(&mut self, limit_ms: u64) -> Stepped {
        let mut shared = self.shared.lock().expect("not poisoned");
        let Some((&(at, seq), _)) = shared.timers.iter().next() else { return Stepped::Idle };
        if at > limit_ms {
            shared.now_ms = shared.now_ms.max(limit_ms);
            return Stepped::Idle;
        }
        shared.now_ms = shared.now_ms.max(at);
        let waker = shared.timers.remove(&(at, seq)).expect("just seen");
        drop(shared);
        waker.wake();
        Stepped::Advanced
    }

    /// Moves time forward by `ms` (firing no timer by itself).
    pub fn set_now(&mut self, now_ms: u64) {
        let mut shared = self.shared.lock().expect("not poisoned");
        shared.now_ms = shared.now_ms.max(now_ms);
    }
}

fn spawn_on(shared: &SharedRef, owner: Owner, name: &'static str, future: BoxFuture<'static, ()>) {
    let mut s = shared.lock().expect("not poisoned");
    let id = s.next_task;
    s.next_task += 1;
    s.spawned.push((id, Task { owner, name, future }));
    s.ready.insert(id);
}

/// The clock and spawner a node (or the harness) sees.
#[derive(Clone)]
pub struct Handle {
    pub shared: SharedRef,
    pub owner: Owner,
}

impl Clock for Handle {
    fn now_ms(&self) -> u64 {
        self.shared.lock().expect("not poisoned").now_ms
    }

    /// The simulated time: the guests' wall clock readings count from 0 too.
    fn wall_ms(&self) -> u64 {
        Clock::now_ms(self)
    }

    fn sleep(&self, ms: u64) -> BoxFuture<'static, ()> {
        let deadline = self.now_ms().saturating_add(ms);
        Box::pin(Sleep { shared: self.shared.clone(), deadline, timer: None })
    }
}

impl Spawn for Handle {
    fn spawn(&self, name: &'static str, task: BoxFuture<'static, ()>) {
        spawn_on(&self.shared, self.owner, name, task);
    }
}

struct Sleep {
    shared: SharedRef,
    deadline: u64,
    timer: Option<(u64, u64)>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        let mut shared = self.shared.lock().expect("not poisoned");
        if shared.now_ms >= self.deadline {
            return Poll::Ready(());
        }
        let key = match self.timer {
            Some(k) => k,
            None => {
                let seq = shared.next_timer;
                shared.next_timer += 1;
                (self.deadline, seq)
            }
        };
        shared.timers.insert(key, cx.waker().clone());
        drop(shared);
        self.timer = Some(key);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.timer {
            if let Ok(mut shared) = self.shared.lock() {
                shared.timers.remove(&key);
            }
        }
    }
}
