//! Leader election among the controllers, on a plain key and a lease (not etcd's
//! v3election service: the key, its lease and its revisions are all this needs, and
//! they are easier to reason about and to test when they are in plain sight).
//!
//! A candidate grants itself a lease, then creates `leader` under it only if the key is
//! absent (one transaction). If the key exists it watches it until it is deleted (the
//! leader resigned or its lease expired) and tries again. The revision at which a
//! leader created the key names its leadership: it ends when anything happens to the
//! key after that revision, or when its lease is lost.
//!
//! Leadership is for liveness: which controller acts. It is not what keeps
//! configurations safe: a leader's lease can expire before it notices, so the
//! configuration is written with a compare-and-swap ([`ControlPlane::cas_config`]).

use std::time::Duration;

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp, TxnOpResponse, WatchFilterType, WatchOptions};
use tally_log_core::NodeId;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::sleep;
use tracing::{debug, info, warn, Instrument};

use crate::endpoints::{Retry, CALL_TIMEOUT};
use crate::error::{Error, Result};
use crate::lease::{self, Lease};
use crate::plane::{check_ttl, ControlPlane};

/// Pause after a watch or a read of the leader key failed, before trying again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// This candidate leads until [`Leadership::lost`] says otherwise. A background task
/// keeps the lease alive and watches the leader key. Dropping the value stops that
/// task without deleting the key: the next candidate takes over once the lease expires,
/// as it would if the process were killed. [`Leadership::resign`] hands over at once.
pub struct Leadership {
    candidate: NodeId,
    plane: ControlPlane,
    /// The revision that created the leader key for this leadership.
    created: i64,
    lease: Lease,
    lost: watch::Receiver<bool>,
    monitor: JoinHandle<()>,
}

impl Leadership {
    /// The leading candidate.
    pub fn candidate(&self) -> NodeId {
        self.candidate
    }

    /// Turns true, once and for good, when this leadership is over: its lease could not
    /// be refreshed within the TTL or etcd no longer knows it, or the leader key was
    /// deleted or replaced. A leader checks it before acting; it may still learn of the
    /// loss late (the CAS on the configuration covers that).
    pub fn lost(&self) -> watch::Receiver<bool> {
        self.lost.clone()
    }

    /// Deletes the leader key if it is still this leadership's, and revokes the lease,
    /// so the next candidate leads at once.
    #[tracing::instrument(name = "control.resign", skip_all, fields(candidate = %self.candidate))]
    pub async fn resign(self) -> Result<()> {
        self.monitor.abort();
        let key = self.plane.keys.leader();
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, self.created)])
            .and_then([TxnOp::delete(key, None)]);
        // Harmless to repeat: the compare names this leadership's key only.
        self.plane.etcd.txn("resigning", Retry::Always, txn).await?;
        lease::revoke(&self.plane.etcd, self.lease.id()).await
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.monitor.abort();
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("candidate", &self.candidate)
            .field("created", &self.created)
            .field("lost", &*self.lost.borrow())
            .finish_non_exhaustive()
    }
}

pub(crate) fn decode_leader(value: &[u8]) -> Result<NodeId> {
    std::str::from_utf8(value)
        .ok()
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .map(NodeId)
        .ok_or_else(|| Error::Corrupt(format!("the leader key holds {:?}, not a node id", String::from_utf8_lossy(value))))
}

impl ControlPlane {
    /// Waits until `candidate` leads, under a lease of `ttl_s` seconds (1..=3600). While
    /// another candidate leads it watches the leader key and tries again once the key is
    /// deleted; a leader that was killed is replaced about one TTL later. A candidate
    /// whose id already holds the key (an earlier run of the same node) waits like any
    /// other. Fails on the first etcd error ([`Error::is_transient`]: campaign again).
    /// Dropping the future gives up; a lease it granted then expires.
    #[tracing::instrument(name = "control.campaign", skip_all, fields(%candidate, ttl_s = ttl_s))]
    pub async fn campaign(&self, candidate: NodeId, ttl_s: i64) -> Result<Leadership> {
        check_ttl(ttl_s)?;
        let key = self.keys.leader();
        let mut lease = Lease::grant(&self.etcd, ttl_s, "control.leader-lease").await?;
        loop {
            if *lease.lost().borrow() {
                lease = Lease::grant(&self.etcd, ttl_s, "control.leader-lease").await?;
            }
            let txn = Txn::new()
                .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(key.clone(), candidate.0.to_string(), Some(PutOptions::new().with_lease(lease.id())))])
                .or_else([TxnOp::get(key.clone(), None)]);
            // Harmless to repeat: if a lost answer had created the key, the repeat finds
            // it under this candidate's lease, and this candidate leads.
            let answer = self.etcd.txn("campaigning", Retry::Always, txn).await?;
            let revision = answer.header().map(|h| h.revision()).unwrap_or_default();
            if answer.succeeded() {
                info!(%candidate, created = revision, "leading");
                return Ok(Leadership::start(self.clone(), candidate, revision, lease));
            }
            let held = answer.op_responses().into_iter().find_map(|op| match op {
                TxnOpResponse::Get(got) => got.kvs().first().cloned(),
                _ => None,
            });
            if let Some(kv) = held.as_ref().filter(|kv| kv.lease() == lease.id()) {
                info!(%candidate, created = kv.create_revision(), "leading (an earlier try created the key)");
                return Ok(Leadership::start(self.clone(), candidate, kv.create_revision(), lease));
            }
            let held = held.map(|kv| (kv.mod_revision(), decode_leader(kv.value())));
            // A transaction is atomic, so the read finds the key the compare found; were
            // it missing, watching from the transaction's revision on would still do.
            let (seen_at, leader) = held.map_or((revision, None), |(at, leader)| (at, leader.ok()));
            debug!(%candidate, ?leader, "waiting for the leader to go");
            let mut lost = lease.lost();
            tokio::select! {
                _ = lost.wait_for(|lost| *lost) => debug!("the candidate's lease was lost while waiting"),
                _ = self.leader_deleted_after(seen_at) => {}
            }
        }
    }

    /// Who leads now, if anyone.
    #[tracing::instrument(name = "control.leader", skip_all)]
    pub async fn leader(&self) -> Result<Option<NodeId>> {
        let answer = self.read_leader().await?;
        answer.kvs().first().map(|kv| decode_leader(kv.value())).transpose()
    }

    async fn read_leader(&self) -> Result<etcd_client::GetResponse> {
        self.etcd.get("reading the leader", self.keys.leader(), None).await
    }

    /// Returns once the leader key was deleted after revision `after`, or once the watch
    /// for it failed (after a pause), so the caller looks again.
    async fn leader_deleted_after(&self, after: i64) {
        let options = WatchOptions::new().with_start_revision(after + 1).with_filters([WatchFilterType::NoPut]);
        if self.watch_leader(options).await {
            return;
        }
        sleep(RETRY_PAUSE).await;
    }

    /// Watches the leader key with `options` on the pinned member: true once an event
    /// came, false once the watch failed (the member is then passed over).
    async fn watch_leader(&self, options: WatchOptions) -> bool {
        let (member, client) = self.etcd.pinned();
        let mut watcher = client.watch_client();
        match tokio::time::timeout(CALL_TIMEOUT, watcher.watch(self.keys.leader(), Some(options))).await {
            Ok(Ok(mut stream)) => loop {
                match stream.message().await {
                    Ok(Some(answer)) if answer.canceled() => {
                        debug!(reason = answer.cancel_reason(), "the leader's watch was cancelled");
                        break;
                    }
                    Ok(Some(answer)) if !answer.events().is_empty() => return true,
                    Ok(Some(_)) => continue,
                    Ok(None) => break,
                    Err(e) => {
                        debug!(error = %e, "the leader's watch broke");
                        break;
                    }
                }
            },
            Ok(Err(e)) => debug!(error = %e, "watching the leader"),
            Err(_) => debug!("watching the leader: no answer in time"),
        }
        self.etcd.failed(member);
        false
    }

    /// Returns why the leader key created at revision `created` is no longer that one:
    /// deleted, or deleted and created again. Follows a watch, and reads the key
    /// whenever the watch breaks.
    async fn leader_changed(&self, created: i64) -> &'static str {
        let mut from = created + 1;
        loop {
            if self.watch_leader(WatchOptions::new().with_start_revision(from)).await {
                return "the leader key was deleted or replaced";
            }
            // The watch broke (etcd restarted, the revision was compacted): read the key
            // to learn whether it is still this leadership's, and watch on from there.
            loop {
                match self.read_leader().await {
                    Ok(answer) => {
                        if answer.kvs().first().map(|kv| kv.create_revision()) != Some(created) {
                            return "the leader key was deleted or replaced";
                        }
                        from = answer.header().map(|h| h.revision()).unwrap_or(from) + 1;
                        break;
                    }
                    Err(e) => {
                        debug!(error = %e, "reading the leader");
                        sleep(RETRY_PAUSE).await;
                    }
                }
            }
        }
    }
}

impl Leadership {
    fn start(plane: ControlPlane, candidate: NodeId, created: i64, lease: Lease) -> Leadership {
        let (lost_tx, lost) = watch::channel(false);
        let mut lease_lost = lease.lost();
        let lease_id = lease.id();
        let watcher = plane.clone();
        // On cancel (resign or drop) it stops watching; it has no errors to report:
        // failures to reach etcd end in the lease's loss.
        let monitor = tokio::spawn(
            async move {
                let why = tokio::select! {
                    _ = lease_lost.wait_for(|lost| *lost) => "the lease was lost",
                    why = watcher.leader_changed(created) => why,
                };
                warn!(why, "leadership lost");
                lost_tx.send_replace(true);
                // Let the next candidate in now rather than when the lease expires.
                if let Err(e) = lease::revoke(&watcher.etcd, lease_id).await {
                    debug!(error = %e, "revoking the lost leader's lease");
                }
            }
            .instrument(tracing::info_span!("task", name = "control.leadership", %candidate)),
        );
        Leadership { candidate, plane, created, lease, lost, monitor }
    }
}
