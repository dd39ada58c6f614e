//! [`Completions`]: awaits of promises (and waits of queues and locks) waiting in place
//! on this node, woken at once by a completion made here.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// Awaits of promises waiting in place on this node, by promise: a completion made on
/// this node wakes them at once (one made elsewhere is seen at their next look).
#[derive(Default)]
pub(crate) struct Completions {
    next: std::sync::atomic::AtomicU64,
    waiting: Mutex<HashMap<String, Vec<(u64, std::task::Waker)>>>,
}

impl Completions {
    /// Wakes the awaits of `promise` waiting here.
    pub(crate) fn notify(&self, promise: &str) {
        let woken = self.waiting.lock().expect("not poisoned").remove(promise);
        for (_, waker) in woken.into_iter().flatten() {
            waker.wake();
        }
    }

    /// Completes when `promise` is completed on this node (or the future is dropped).
    pub(crate) fn wait<'a>(&'a self, promise: &'a str) -> Completion<'a> {
        Completion { completions: self, promise, id: None }
    }
}

/// A wait for a completion made on this node (see [`Completions::wait`]).
pub(crate) struct Completion<'a> {
    completions: &'a Completions,
    promise: &'a str,
    id: Option<u64>,
}

impl std::future::Future for Completion<'_> {
    type Output = ();

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        let this = self.get_mut();
        let mut waiting = this.completions.waiting.lock().expect("not poisoned");
        let id = match this.id {
            // Notified: `notify` took the entry away.
            Some(id) if !waiting.get(this.promise).is_some_and(|w| w.iter().any(|(i, _)| *i == id)) => {
                return std::task::Poll::Ready(());
            }
            Some(id) => id,
            None => {
                let id = this.completions.next.fetch_add(1, Ordering::Relaxed);
                this.id = Some(id);
                id
            }
        };
        let list = waiting.entry(this.promise.to_string()).or_default();
        list.retain(|(i, _)| *i != id);
        list.push((id, cx.waker().clone()));
        std::task::Poll::Pending
    }
}

impl Drop for Completion<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        let mut waiting = self.completions.waiting.lock().expect("not poisoned");
        if let Some(list) = waiting.get_mut(self.promise) {
            list.retain(|(i, _)| *i != id);
            if list.is_empty() {
                waiting.remove(self.promise);
            }
        }
    }
}
