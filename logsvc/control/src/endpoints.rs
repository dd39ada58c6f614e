//! The etcd members a control plane talks to, with failover.
//!
//! Calls go to one *pinned* member; a member that fails a call (refuses connections,
//! breaks the connection, has no leader, does not answer in time) is passed over and
//! the next one is pinned. This replaces etcd-client's balanced channel over every
//! endpoint, which keeps handing a share of the requests to a member that is down: the
//! connection error comes back as the call's error, for as long as the member is down.
//!
//! A call that failed is tried again on the next member while its time lasts (2 s), if
//! trying again is harmless: always for reads, and for writes only when the request
//! cannot have been applied (the connection was refused, or the member said it had no
//! leader). A write whose outcome is unknown (the connection broke, the time ran out)
//! is the caller's to read back.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, ConnectOptions, GetOptions, GetResponse, Txn, TxnResponse};
use tokio::time::{sleep, timeout_at, Instant};
use tracing::debug;

use crate::error::{Error, Result};

/// Every call is given up after this long, retries included (and so is connecting): a
/// control plane that hangs is worse than one that says it cannot reach etcd.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// HTTP/2 pings on connections with open streams (watches, lease keep-alives), so a
/// peer that hangs without closing the connection is noticed. etcd answers a client
/// that pings more often than its `--grpc-keepalive-min-time` (5 s by default), or at
/// all on a connection without streams, with GOAWAY "too_many_pings", which breaks
/// every stream on the connection: pinging every 2 s broke each watch after about 8 s.
const PING_INTERVAL: Duration = Duration::from_secs(10);
const PING_TIMEOUT: Duration = Duration::from_secs(5);
const _: () = assert!(PING_INTERVAL.as_secs() > 5, "etcd refuses pings more often than every 5 s");

/// Pause between two tries of one call.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Whether a call may be tried again after an error whose outcome is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    /// A read, or a write that is harmless to repeat (revoking a lease).
    Always,
    /// A write that must not be applied twice (a compare-and-swap, a put).
    IfNotApplied,
}

/// Clients of each etcd member, one of them pinned. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Endpoints {
    inner: Arc<Inner>,
}

struct Inner {
    members: Vec<(String, Client)>,
    pinned: AtomicUsize,
}

impl Endpoints {
    /// Makes a client per endpoint; they connect on their first call, over TLS with a
    /// client certificate if `tls` is given.
    pub(crate) async fn new(endpoints: &[String], tls: Option<&crate::EtcdTls>) -> Result<Endpoints> {
        if endpoints.is_empty() {
            return Err(Error::InvalidArgument("no etcd endpoint given".into()));
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(CALL_TIMEOUT)
            .with_timeout(CALL_TIMEOUT)
            .with_keep_alive(PING_INTERVAL, PING_TIMEOUT)
            .with_keep_alive_while_idle(false)
            // A member cut off from its leader fails requests (and cancels watches) at
            // once instead of serving a stale view.
            .with_require_leader(true);
        if let Some(tls) = tls {
            options = options.with_tls(
                etcd_client::TlsOptions::new()
                    .ca_certificate(etcd_client::Certificate::from_pem(&tls.ca_pem))
                    .identity(etcd_client::Identity::from_pem(&tls.cert_pem, &tls.key_pem))
                    .domain_name(crate::ETCD_SERVER_NAME),
            );
        }
        let mut members = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let client = match Client::connect([endpoint], Some(options.clone())).await {
                Ok(client) => client,
                Err(e @ (etcd_client::Error::InvalidArgs(_) | etcd_client::Error::InvalidUri(_))) => {
                    return Err(Error::InvalidArgument(format!("etcd endpoint {endpoint:?}: {e}")))
                }
                Err(e) => return Err(Error::Etcd(format!("connecting to {endpoint}: {e}"))),
            };
            members.push((endpoint.clone(), client));
        }
        Ok(Endpoints { inner: Arc::new(Inner { members, pinned: AtomicUsize::new(0) }) })
    }

    /// The pinned member's index and client, for a stream: report a broken stream with
    /// [`Endpoints::failed`].
    pub(crate) fn pinned(&self) -> (usize, Client) {
        let i = self.inner.pinned.load(Ordering::SeqCst);
        (i, self.inner.members[i].1.clone())
    }

    /// Member `i` failed a call: pin the next one, unless another failure already moved
    /// the pin away from `i`.
    pub(crate) fn failed(&self, i: usize) {
        let next = (i + 1) % self.inner.members.len();
        if self.inner.pinned.compare_exchange(i, next, Ordering::SeqCst, Ordering::SeqCst).is_ok() && next != i {
            debug!(failed = %self.inner.members[i].0, pinned = %self.inner.members[next].0, "etcd failover");
        }
    }

    /// Runs `op` on the pinned member, failing over and trying again as the module doc
    /// says, within [`CALL_TIMEOUT`]. `what` says what the call was for, in errors.
    pub(crate) async fn call<T, F, Fut>(&self, what: &'static str, retry: Retry, mut op: F) -> Result<T>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let (i, client) = self.pinned();
            let endpoint = &self.inner.members[i].0;
            let e = match timeout_at(deadline, op(client)).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(e)) => e,
                Err(_) => {
                    self.failed(i);
                    return Err(Error::Etcd(format!("{what}: no answer within {CALL_TIMEOUT:?} (last tried {endpoint})")));
                }
            };
            match classify(&e) {
                Failure::Refused => return Err(Error::Etcd(format!("{what}: {endpoint}: {e}"))),
                Failure::Unknown if retry == Retry::IfNotApplied => {
                    self.failed(i);
                    return Err(Error::Etcd(format!("{what} (it may have been applied): {endpoint}: {e}")));
                }
                Failure::Unknown | Failure::NotApplied => self.failed(i),
            }
            if Instant::now() + RETRY_PAUSE >= deadline {
                return Err(Error::Etcd(format!("{what}: {endpoint}: {e}")));
            }
            debug!(what, %endpoint, error = %e, "trying again");
            sleep(RETRY_PAUSE).await;
        }
    }
}

impl Endpoints {
    /// Reads `key` (a range, with `options`): linearizable, tried again on failure.
    pub(crate) async fn get(&self, what: &'static str, key: String, options: Option<GetOptions>) -> Result<GetResponse> {
        self.call(what, Retry::Always, |mut c| {
            let (key, options) = (key.clone(), options.clone());
            async move { c.get(key, options).await }
        })
        .await
    }

    /// Runs `txn`, tried again as `retry` allows.
    pub(crate) async fn txn(&self, what: &'static str, retry: Retry, txn: Txn) -> Result<TxnResponse> {
        self.call(what, retry, |mut c| {
            let txn = txn.clone();
            async move { c.txn(txn).await }
        })
        .await
    }
}

/// What a failed call says about the member and about the request.
enum Failure {
    /// etcd answered and refused the request (bad argument, lease not found, …): the
    /// member is fine and trying again would not help.
    Refused,
    /// The request cannot have been applied: the connection was refused, or the member
    /// had no leader.
    NotApplied,
    /// The connection broke or something else went wrong on the way: the request may or
    /// may not have been applied.
    Unknown,
}

fn classify(e: &etcd_client::Error) -> Failure {
    use etcd_client::Error as E;
    match e {
        E::GRpcStatus(status) => {
            let message = status.message();
            // tonic reports a failed connect as Unavailable "tcp connect error"; etcd
            // refuses requests on a member without a leader before proposing them.
            if message.contains("tcp connect error") || message.contains("no leader") {
                return Failure::NotApplied;
            }
            // gRPC codes (tonic::Code): 1 cancelled, 2 unknown, 4 deadline exceeded,
            // 14 unavailable: the transport's and the cluster's troubles. Anything else
            // is etcd's answer to this request.
            match status.code() as i32 {
                1 | 2 | 4 | 14 => Failure::Unknown,
                _ => Failure::Refused,
            }
        }
        E::TransportError(_) | E::IoError(_) | E::WatchError(_) | E::LeaseKeepAliveError(_) | E::Internal(_) => Failure::Unknown,
        _ => Failure::Refused,
    }
}
