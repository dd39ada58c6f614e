//! etcd leases kept alive by a background task, with an honest report of their loss.
//!
//! The keep-alive task refreshes a lease every third of its TTL and tracks the earliest
//! moment etcd may expire it: the time a refresh was *sent* plus the TTL etcd answered
//! with (etcd counts from when it received the refresh, which is later). Past that
//! moment without an answer, or once etcd says it does not know the lease, the lease is
//! reported lost. So a holder hears of the loss no later than etcd acts on it, up to
//! the scheduling delay of this task.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout_at, Instant};
use tracing::{debug, warn, Instrument};

use crate::endpoints::{Endpoints, Retry};
use crate::error::{Error, Result};

/// Pause before reopening a keep-alive stream that failed.
const REOPEN_PAUSE: Duration = Duration::from_millis(100);

/// A granted lease, kept alive until this value is dropped (the lease then expires by
/// its TTL) or the lease is lost ([`Lease::lost`]).
pub(crate) struct Lease {
    id: i64,
    lost: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

impl Lease {
    /// Grants a lease of `ttl_s` seconds (etcd may grant more: it raises TTLs to at least
    /// 1.5 election timeouts) and starts keeping it alive. `name` names the task.
    pub(crate) async fn grant(etcd: &Endpoints, ttl_s: i64, name: &'static str) -> Result<Lease> {
        let asked = Instant::now();
        // Harmless to repeat: a lease granted by a lost answer expires unused.
        let granted =
            etcd.call("granting a lease", Retry::Always, |mut c| async move { c.lease_grant(ttl_s, None).await }).await?;
        if !granted.error().is_empty() {
            return Err(Error::Etcd(format!("granting a lease: {}", granted.error())));
        }
        let id = granted.id();
        let ttl = Duration::from_secs(granted.ttl().max(1) as u64);
        let (lost_tx, lost) = watch::channel(false);
        // On cancel (the Lease dropped) the task just stops refreshing; it has no errors
        // to report other than the loss itself.
        let task = tokio::spawn(keep_alive(etcd.clone(), id, ttl, asked + ttl, lost_tx).instrument(tracing::info_span!(
            "task",
            name,
            lease = id
        )));
        Ok(Lease { id, lost, task })
    }

    pub(crate) fn id(&self) -> i64 {
        self.id
    }

    /// Turns true, once and for good, when the lease is lost.
    pub(crate) fn lost(&self) -> watch::Receiver<bool> {
        self.lost.clone()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Revokes lease `id`, deleting the keys attached to it. A lease etcd no longer knows
/// (expired, or revoked before) counts as revoked.
pub(crate) async fn revoke(etcd: &Endpoints, id: i64) -> Result<()> {
    etcd.call("revoking a lease", Retry::Always, |mut c| async move {
        match c.lease_revoke(id).await {
            Err(etcd_client::Error::GRpcStatus(status)) if status.message().contains("lease not found") => Ok(()),
            answer => answer.map(drop),
        }
    })
    .await
}

/// Refreshes lease `id` every `ttl / 3` until it is lost, then sets `lost`. `expires`
/// is the earliest moment etcd may expire the lease as of the grant.
async fn keep_alive(etcd: Endpoints, id: i64, ttl: Duration, mut expires: Instant, lost: watch::Sender<bool>) {
    let period = ttl / 3;
    let why = 'lost: loop {
        let (member, client) = etcd.pinned();
        let mut leases = client.lease_client();
        // (Re)open the keep-alive stream; opening it refreshes the lease once.
        let sent = Instant::now();
        if sent >= expires {
            break 'lost "no refresh within the TTL";
        }
        let (mut keeper, mut answers) = match timeout_at(expires, leases.keep_alive(id)).await {
            Err(_) => break 'lost "no refresh within the TTL",
            Ok(Err(etcd_client::Error::LeaseKeepAliveError(e))) if e.contains("not found") => {
                break 'lost "etcd no longer knows the lease"
            }
            Ok(Err(e)) => {
                debug!(error = %e, "opening a lease keep-alive stream");
                etcd.failed(member);
                sleep(REOPEN_PAUSE).await;
                continue;
            }
            Ok(Ok(stream)) => {
                expires = expires.max(sent + ttl);
                stream
            }
        };
        loop {
            sleep(period).await;
            let sent = Instant::now();
            if keeper.keep_alive().await.is_err() {
                etcd.failed(member);
                break;
            }
            match timeout_at(expires, answers.message()).await {
                Err(_) => break 'lost "no refresh within the TTL",
                Ok(Ok(Some(answer))) if answer.ttl() <= 0 => break 'lost "etcd no longer knows the lease",
                Ok(Ok(Some(answer))) => expires = sent + Duration::from_secs(answer.ttl() as u64),
                Ok(Ok(None)) => {
                    etcd.failed(member);
                    break;
                }
                Ok(Err(e)) => {
                    debug!(error = %e, "a lease keep-alive stream broke");
                    etcd.failed(member);
                    break;
                }
            }
        }
    };
    warn!(lease = id, why, "lease lost");
    lost.send_replace(true);
}
