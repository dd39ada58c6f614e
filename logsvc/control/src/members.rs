//! Membership: each node registers itself under a lease at `members/<id>`; anyone can
//! list the members or follow them through a watch.
//!
//! A member key lives as long as its node keeps the lease alive: a node killed with
//! SIGKILL disappears one TTL later, a node shut down cleanly revokes at once. A node
//! that loses its lease (etcd unreachable for longer than the TTL, or the lease revoked
//! behind its back) registers again under a fresh lease, so an etcd blip does not
//! remove a live node for good; [`Registration::reregistrations`] counts those times,
//! because in between the node was absent and may have been declared down.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{EventType, GetOptions, PutOptions, WatchOptions};
use serde::{Deserialize, Serialize};
use tally_log_core::NodeId;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::sleep;
use tracing::{debug, info, warn, Instrument};

use crate::endpoints::{Retry, CALL_TIMEOUT};
use crate::error::{Error, Result};
use crate::lease::{self, Lease};
use crate::plane::{check_ttl, ControlPlane, Keys};

/// Pauses between attempts to register again or to list the members again while etcd
/// is unreachable: the first, doubled up to the last.
const RETRY_PAUSE_MIN: Duration = Duration::from_millis(100);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(1);

/// What a node does in the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberRole {
    /// Decides terms; one of the controllers leads.
    Controller,
    /// Orders a physical log's metalog.
    Sequencer,
    /// Stores shards.
    Storage,
    /// Appends, indexes and reads the log; runs functions.
    Engine,
    /// Serves HTTP only; has no log endpoint.
    Gateway,
    /// An index node of the index tier (partial mode).
    Index,
    /// An aggregator of the index tier's lookups (partial mode).
    Aggregator,
}

/// One registered node id, as stored (JSON) at `members/<id>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// The node id, as in the configuration; also the key's last part.
    pub id: NodeId,
    /// What the node does.
    pub role: MemberRole,
    /// The QUIC address of the node's log endpoint; empty for a gateway.
    pub addr: String,
    /// The HTTP address, for the roles that serve one.
    pub http: Option<String>,
    /// The name of the process (the `tally node`) that holds this id.
    pub process: String,
    /// The operating system's process id of that process.
    pub pid: u32,
    /// Changes on every start of the node, so peers can tell a restart.
    pub incarnation: u64,
}

/// A member kept registered by a background task (see the module doc). Dropping it
/// stops the task: the member then disappears once its lease expires, as it would if
/// the process were killed. [`Registration::revoke`] removes it at once.
pub struct Registration {
    id: NodeId,
    plane: ControlPlane,
    /// The lease the member is under now; the task changes it when it registers again.
    lease: Arc<AtomicI64>,
    reregistrations: watch::Receiver<u64>,
    task: JoinHandle<()>,
}

impl Registration {
    /// The registered node id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// How many times the member was registered again under a fresh lease after losing
    /// one; it was absent from etcd for a while before each.
    pub fn reregistrations(&self) -> watch::Receiver<u64> {
        self.reregistrations.clone()
    }

    /// Stops keeping the member registered and revokes its lease, which deletes the key
    /// at once (unless a later registration of the same id took the key over: its lease
    /// is not this one's). The clean way to shut a node down.
    #[tracing::instrument(name = "control.revoke", skip_all, fields(id = %self.id))]
    pub async fn revoke(mut self) -> Result<()> {
        self.task.abort();
        // Wait for the task to be gone, so it cannot register again after the revoke.
        let _ = (&mut self.task).await;
        lease::revoke(&self.plane.etcd, self.lease.load(Ordering::SeqCst)).await
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration").field("id", &self.id).field("lease", &self.lease).finish_non_exhaustive()
    }
}

/// Reads a member back: its key must name the id it holds.
pub(crate) fn decode_member(keys: &Keys, kv_key: &[u8], value: &[u8]) -> Result<Member> {
    let key = String::from_utf8_lossy(kv_key);
    let id = keys.member_id(kv_key).ok_or_else(|| Error::Corrupt(format!("member key {key} names no node id")))?;
    let member: Member =
        serde_json::from_slice(value).map_err(|e| Error::Corrupt(format!("decoding the member at {key}: {e}")))?;
    if member.id != id {
        return Err(Error::Corrupt(format!("the member at {key} says it is node {}", member.id)));
    }
    Ok(member)
}

impl ControlPlane {
    /// Registers `member` at `members/<id>` under a fresh lease of `ttl_s` seconds
    /// (1..=3600; etcd may raise short TTLs to 1.5 of its election timeout) and keeps
    /// it registered: a task refreshes the lease every third of the TTL and, if the lease
    /// is lost, registers the member again under a new one.
    ///
    /// Two registrations of one id: the later put wins and holds the key under its
    /// lease; the earlier one's revoke or expiry no longer deletes it, and if the later
    /// one goes away the key goes with it, even while the earlier is alive.
    #[tracing::instrument(name = "control.register", skip_all, fields(id = %member.id, role = ?member.role, ttl_s = ttl_s))]
    pub async fn register(&self, member: Member, ttl_s: i64) -> Result<Registration> {
        check_ttl(ttl_s)?;
        let id = member.id;
        let current = Arc::new(AtomicI64::new(0));
        let lease = put_member(self, &member, ttl_s, &current).await?;
        let (count_tx, reregistrations) = watch::channel(0);
        // On cancel (revoke or drop) the task stops refreshing; it has no errors to
        // report: it retries until it is cancelled.
        let task = tokio::spawn(
            stay_registered(self.clone(), member, ttl_s, lease, current.clone(), count_tx)
                .instrument(tracing::info_span!("task", name = "control.registration", %id)),
        );
        Ok(Registration { id, plane: self.clone(), lease: current, reregistrations, task })
    }

    /// The registered members, by node id. Entries that do not decode are left out and
    /// logged, so one bad entry does not hide the others.
    #[tracing::instrument(name = "control.members", skip_all)]
    pub async fn members(&self) -> Result<BTreeMap<NodeId, Member>> {
        Ok(self.list_members().await?.0)
    }

    /// The members with the etcd revision the list was read at.
    async fn list_members(&self) -> Result<(BTreeMap<NodeId, Member>, i64)> {
        let answer = self.etcd.get("listing the members", self.keys.members(), Some(GetOptions::new().with_prefix())).await?;
        let revision = answer.header().map(|h| h.revision()).unwrap_or_default();
        let mut members = BTreeMap::new();
        for stored in answer.kvs() {
            match decode_member(&self.keys, stored.key(), stored.value()) {
                Ok(m) => {
                    members.insert(m.id, m);
                }
                Err(e) => warn!(error = %e, "skipping a member entry"),
            }
        }
        Ok((members, revision))
    }

    /// The members, kept up to date by a background task: it lists them, then follows
    /// an etcd watch from the next revision, and lists them again whenever the watch
    /// breaks (etcd restarted, the revision was compacted, the member lost its leader).
    /// Every value is a full map as of one etcd revision. The task ends when every
    /// receiver is dropped. Fails only if the first list fails.
    #[tracing::instrument(name = "control.watch_members", skip_all)]
    pub async fn watch_members(&self) -> Result<watch::Receiver<BTreeMap<NodeId, Member>>> {
        let (members, revision) = self.list_members().await?;
        let (tx, rx) = watch::channel(members);
        // On cancel (every receiver gone) it stops; etcd errors make it list again.
        tokio::spawn(
            follow_members(self.clone(), tx, revision).instrument(tracing::info_span!("task", name = "control.members-watch")),
        );
        Ok(rx)
    }
}

/// Grants a lease and puts the member under it; `current` learns the lease first, so a
/// revoke that races with this finds it.
async fn put_member(plane: &ControlPlane, member: &Member, ttl_s: i64, current: &AtomicI64) -> Result<Lease> {
    let lease = Lease::grant(&plane.etcd, ttl_s, "control.member-lease").await?;
    current.store(lease.id(), Ordering::SeqCst);
    let value = serde_json::to_vec(member).expect("a member is plain data");
    let key = plane.keys.member(member.id);
    let options = PutOptions::new().with_lease(lease.id());
    // Harmless to repeat: the same value under the same lease.
    plane
        .etcd
        .call("registering a member", Retry::Always, |mut c| {
            let (key, value, options) = (key.clone(), value.clone(), options.clone());
            async move { c.put(key, value, Some(options)).await }
        })
        .await?;
    Ok(lease)
}

/// Waits for the lease to be lost, then registers again, until cancelled.
async fn stay_registered(
    plane: ControlPlane,
    member: Member,
    ttl_s: i64,
    mut lease: Lease,
    current: Arc<AtomicI64>,
    count: watch::Sender<u64>,
) {
    loop {
        let mut lost = lease.lost();
        // An error means the keep-alive task is gone, which only a loss explains.
        let _ = lost.wait_for(|lost| *lost).await;
        let old = lease.id();
        let mut pause = RETRY_PAUSE_MIN;
        lease = loop {
            match put_member(&plane, &member, ttl_s, &current).await {
                Ok(fresh) => break fresh,
                Err(e) => {
                    debug!(error = %e, "registering again");
                    sleep(pause).await;
                    pause = (pause * 2).min(RETRY_PAUSE_MAX);
                }
            }
        };
        // The old lease may have survived (etcd restored it after a restart): revoke it
        // so it does not linger. The key is under the new lease now.
        if let Err(e) = lease::revoke(&plane.etcd, old).await {
            debug!(error = %e, "revoking the lost lease");
        }
        count.send_modify(|n| *n += 1);
        info!(lease = lease.id(), "registered again after losing the lease");
    }
}

/// Keeps `tx` equal to the members in etcd until every receiver is gone.
async fn follow_members(plane: ControlPlane, tx: watch::Sender<BTreeMap<NodeId, Member>>, mut revision: i64) {
    let mut pause = RETRY_PAUSE_MIN;
    loop {
        tokio::select! {
            _ = tx.closed() => return,
            why = follow_from(&plane, &tx, revision) => debug!(why, "the members' watch ended; listing them again"),
        }
        loop {
            tokio::select! {
                _ = tx.closed() => return,
                listed = plane.list_members() => match listed {
                    Ok((members, at)) => {
                        tx.send_if_modified(|old| {
                            let changed = *old != members;
                            *old = members;
                            changed
                        });
                        revision = at;
                        pause = RETRY_PAUSE_MIN;
                        break;
                    }
                    Err(e) => debug!(error = %e, "listing the members"),
                },
            }
            sleep(pause).await;
            pause = (pause * 2).min(RETRY_PAUSE_MAX);
        }
    }
}

/// Applies the watch from `revision + 1` to the map in `tx` until the watch ends;
/// returns why it did.
async fn follow_from(plane: &ControlPlane, tx: &watch::Sender<BTreeMap<NodeId, Member>>, revision: i64) -> &'static str {
    let (member, client) = plane.etcd.pinned();
    let mut watcher = client.watch_client();
    let options = WatchOptions::new().with_prefix().with_start_revision(revision + 1);
    let mut stream = match tokio::time::timeout(CALL_TIMEOUT, watcher.watch(plane.keys.members(), Some(options))).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            debug!(error = %e, "watching the members");
            plane.etcd.failed(member);
            return "the watch could not start";
        }
        Err(_) => {
            plane.etcd.failed(member);
            return "the watch did not start in time";
        }
    };
    loop {
        let answer = match stream.message().await {
            Ok(Some(answer)) => answer,
            Ok(None) => {
                plane.etcd.failed(member);
                return "the stream ended";
            }
            Err(e) => {
                debug!(error = %e, "the members' watch broke");
                plane.etcd.failed(member);
                return "the stream broke";
            }
        };
        if answer.canceled() {
            debug!(reason = answer.cancel_reason(), compacted = answer.compact_revision(), "the members' watch was cancelled");
            // Most often the member lost its leader; after a compaction, moving to
            // another member does no harm.
            plane.etcd.failed(member);
            return "etcd cancelled the watch";
        }
        if answer.events().is_empty() {
            continue;
        }
        // All events of one revision come in one answer, so each update of the map is a
        // state etcd was in.
        tx.send_modify(|members| {
            for event in answer.events() {
                let Some(kv) = event.kv() else { continue };
                let Some(id) = plane.keys.member_id(kv.key()) else {
                    warn!(key = %String::from_utf8_lossy(kv.key()), "skipping a member key that names no node id");
                    continue;
                };
                match event.event_type() {
                    EventType::Delete => {
                        members.remove(&id);
                    }
                    EventType::Put => match decode_member(&plane.keys, kv.key(), kv.value()) {
                        Ok(m) => {
                            members.insert(id, m);
                        }
                        Err(e) => {
                            warn!(error = %e, "skipping a member entry");
                            members.remove(&id);
                        }
                    },
                }
            }
        });
    }
}
