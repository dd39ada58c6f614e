//! QUIC transport between the nodes of the cluster: a lossy, per-connection ordered
//! message network, the real counterpart of the simulator's.
//!
//! ```text
//!  node A                                                         node B
//!  send(B, m) --try_send--> queue(B) --> net.peer(B) ===QUIC===> net.conn(A) --deliver-------> inbox
//!   never waits;            peer_queue_max  connects lazily,      reads hello,    inbox_max; when full
//!   drops when full                         one uni stream per    then frames     the reader waits and
//!                                           connection, frames                    QUIC flow control holds
//!                                           coalesced per write                   A's writes back
//! ```
//!
//! Every node dials the peers it sends to and accepts the peers that send to it, so a
//! pair of nodes talking both ways has two connections, each carrying one direction.
//! Messages on one connection arrive in order; a message may be lost whenever a queue
//! is full, a peer is unknown or unreachable, or a connection breaks. The protocols
//! above retransmit, as they must over any network, so the transport never blocks the
//! state machine drivers to avoid a loss.
//!
//! **Architecture Invariant:** the transport does not know what messages mean. It
//! knows their size and their name (for logs), nothing else.
//!
//! A peer that restarts at the same address is noticed within a keep-alive interval:
//! its stateless-reset key is derived from the cluster secret and its node id (see
//! `Certs::reset_key`), so the new process can reset connections of the old one.
//! A peer that moves is given its new address with [`Transport::set_peer`].
//!
//! Trust: mutual TLS under the cluster's CA ([`Certs`]: generated for a dev cluster, issued
//! by `ClusterCa` for a cluster of processes) decides who may connect; the hello on each
//! stream says which node is talking, and must be a node the certificate names. See
//! `frame.rs` for the bytes. A malformed hello or frame closes only its own connection.
//!
//! Nodes of one process (a dev cluster, or the roles of one `tally node`) may join a
//! [`LocalNet`]: a message between two of its members goes straight from `send` into
//! the receiver's inbox, moved rather than encoded, encrypted, sent and decoded, with
//! the same contract (never waits, dropped when the inbox is full, in order per pair,
//! partitions honoured). QUIC stays the path to every other node.

mod certs;
mod frame;
#[cfg(feature = "fuzzing")]
pub(crate) mod fuzzing;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn::{
    Connection, ConnectionId, ConnectionIdGenerator, Endpoint, EndpointConfig, Incoming, SendStream, TokioRuntime,
    TransportConfig, VarInt,
};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tracing::{debug, info, info_span, warn, Instrument};

pub use certs::{node_name, Certs, ClusterCa};

use tally_log_core::{Error, Message, NodeId, Result};

/// QUIC application close codes, so a peer's logs say why a connection ended.
const CLOSE_SHUTDOWN: VarInt = VarInt::from_u32(0);
const CLOSE_BAD_FRAME: VarInt = VarInt::from_u32(1);
const CLOSE_BAD_HELLO: VarInt = VarInt::from_u32(2);
const CLOSE_PEER_MOVED: VarInt = VarInt::from_u32(3);

/// Flow-control windows sized for a datacenter or loopback: a few records of several
/// MiB in flight without waiting for the reader, at the cost of that much buffer per
/// connection when a reader stalls.
const STREAM_RECEIVE_WINDOW_BYTES: u32 = 16 << 20;
const RECEIVE_WINDOW_BYTES: u32 = 16 << 20;
const SEND_WINDOW_BYTES: u64 = 16 << 20;
/// Keep-alives keep idle connections open and detect dead peers within the idle
/// timeout, instead of losing the first messages after a quiet period.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(1);
const IDLE_TIMEOUT_MS: u32 = 10_000;
/// A datacenter round trip is far below QUIC's default guess of 333 ms; a closer guess
/// makes the first handshake retransmit quickly when a packet is lost.
const INITIAL_RTT: Duration = Duration::from_millis(10);

/// Reconnection backoff after failed connection attempts. The first attempt after a
/// lost connection is immediate.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// A peer task stops draining its queue into one write at this size, so one write
/// does not hold up a reconnect or an address change for long.
const COALESCE_BYTES_MAX: usize = 1 << 20;
/// Spare capacity the batch buffer keeps: small batches are carved out of one
/// allocation instead of allocating one each.
const BATCH_RESERVE_BYTES: usize = 64 << 10;
/// At most one warning about dropped messages per this interval, per transport.
const DROP_WARN_INTERVAL_MS: u64 = 1_000;

/// Limits of a [`Transport`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetConfig {
    /// Largest message body sent or accepted, in bytes. A peer sending a larger frame
    /// is disconnected; a larger message is dropped by its sender. At most `u32::MAX`.
    pub frame_bytes_max: usize,
    /// Messages waiting to be written to one peer; `send` drops past this.
    pub peer_queue_max: usize,
    /// Received messages waiting for the node; past this the connection readers wait,
    /// and QUIC flow control holds the senders back.
    pub inbox_max: usize,
    /// Bound on a connection handshake, and on the wait for a stream's hello.
    pub connect_timeout_ms: u64,
    /// Incoming connections served at once; more are refused.
    pub incoming_connections_max: usize,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            // Records are up to a few MiB and engines batch several per message.
            frame_bytes_max: 64 << 20,
            peer_queue_max: 8192,
            inbox_max: 8192,
            connect_timeout_ms: 3_000,
            incoming_connections_max: 1024,
        }
    }
}

impl NetConfig {
    fn check(&self) -> Result<()> {
        let checks = [
            (self.frame_bytes_max > 0 && self.frame_bytes_max <= u32::MAX as usize, "frame_bytes_max must be in 1..=u32::MAX"),
            (self.peer_queue_max > 0, "peer_queue_max must be positive"),
            (self.inbox_max > 0, "inbox_max must be positive"),
            (self.connect_timeout_ms > 0, "connect_timeout_ms must be positive"),
            (
                self.incoming_connections_max > 0 && self.incoming_connections_max <= Semaphore::MAX_PERMITS,
                "incoming_connections_max must be positive and fit a semaphore",
            ),
        ];
        match checks.iter().find(|(ok, _)| !ok) {
            Some((_, what)) => Err(Error::InvalidArgument(format!("net config: {what}"))),
            None => Ok(()),
        }
    }

    fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }
}

/// Counters since the transport was bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Handed to QUIC (or to the local inbox, for messages to this node).
    pub messages_sent: u64,
    /// Delivered into the inbox, from peers or from this node.
    pub messages_received: u64,
    /// Dropped before being handed to QUIC, or in a write that failed (those may have
    /// arrived anyway).
    pub messages_dropped: u64,
    /// Incoming connections closed because of a malformed hello or frame.
    pub connections_closed_bad_frame: u64,
    /// Outgoing connection attempts that failed or timed out.
    pub connects_failed: u64,
}

/// A node's endpoint in the cluster network. Cloning shares the transport; the
/// endpoint closes when the last clone is dropped or at [`Transport::shutdown`].
#[derive(Clone)]
pub struct Transport {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport").field("me", &self.inner.shared.me).field("addr", &self.inner.local_addr).finish()
    }
}

/// Transports of one process that deliver to each other directly (see the module
/// docs). Cloning shares it. It holds no inbox open: a member that stopped (its
/// transport dropped or shut down) is skipped, and a member that restarts under its
/// node id joins again and takes its place.
#[derive(Clone, Default)]
pub struct LocalNet {
    members: Arc<RwLock<HashMap<NodeId, LocalMember>>>,
}

#[derive(Clone)]
struct LocalMember {
    inbox: mpsc::WeakSender<(NodeId, Message)>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LocalNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ids: Vec<NodeId> = read_lock(&self.members).keys().copied().collect();
        ids.sort();
        f.debug_struct("LocalNet").field("members", &ids).finish()
    }
}

impl LocalNet {
    pub fn new() -> LocalNet {
        LocalNet::default()
    }

    fn member(&self, node: NodeId) -> Option<LocalMember> {
        read_lock(&self.members).get(&node).cloned()
    }
}

struct Inner {
    shared: Arc<Shared>,
    /// The process's other nodes, reached without QUIC, once joined.
    local: std::sync::OnceLock<LocalNet>,
    endpoint: Endpoint,
    local_addr: SocketAddr,
    /// For messages to this node, which never leave the process.
    inbox: mpsc::Sender<(NodeId, Message)>,
    peers: RwLock<Peers>,
    /// `set_peer` spawns peer tasks and may be called from outside the runtime.
    runtime: tokio::runtime::Handle,
}

struct Peers {
    by_node: HashMap<NodeId, PeerHandle>,
    closed: bool,
}

struct PeerHandle {
    queue: mpsc::Sender<Message>,
    addr: watch::Sender<SocketAddr>,
}

/// What the transport's tasks share. It holds no channel ends, so tasks holding it do
/// not keep each other alive.
struct Shared {
    me: NodeId,
    config: NetConfig,
    sent: AtomicU64,
    received: AtomicU64,
    dropped: AtomicU64,
    bad_frames: AtomicU64,
    connects_failed: AtomicU64,
    started: Instant,
    drop_warn_next_ms: AtomicU64,
    drops_unreported: AtomicU64,
    /// A test hook: while set, every message to or from another node is dropped, as a
    /// network partition would (see [`Transport::set_partitioned`]).
    partitioned: AtomicBool,
}

impl Shared {
    /// Counts dropped messages and warns at most once per interval, with the number
    /// of drops not reported since the last warning.
    fn dropped(&self, peer: NodeId, count: u64, reason: &'static str, msg: &'static str) {
        self.dropped.fetch_add(count, Ordering::Relaxed);
        let now_ms = self.started.elapsed().as_millis() as u64;
        let next_ms = self.drop_warn_next_ms.load(Ordering::Relaxed);
        let turn = now_ms >= next_ms
            && self
                .drop_warn_next_ms
                .compare_exchange(next_ms, now_ms + DROP_WARN_INTERVAL_MS, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if turn {
            let unreported = self.drops_unreported.swap(0, Ordering::Relaxed);
            warn!(%peer, reason, msg, count, unreported, "dropping messages");
        } else {
            self.drops_unreported.fetch_add(count, Ordering::Relaxed);
        }
    }
}

fn read_lock<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    // The guarded maps are updated in single statements: a panic elsewhere while the
    // lock was held cannot leave them half-changed.
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write_lock<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

fn transport_config(incoming_uni_streams: u8) -> Arc<TransportConfig> {
    let mut config = TransportConfig::default();
    config
        .max_concurrent_uni_streams(incoming_uni_streams.into())
        .max_concurrent_bidi_streams(0u8.into())
        .datagram_receive_buffer_size(None)
        .stream_receive_window(VarInt::from_u32(STREAM_RECEIVE_WINDOW_BYTES))
        .receive_window(VarInt::from_u32(RECEIVE_WINDOW_BYTES))
        .send_window(SEND_WINDOW_BYTES)
        .keep_alive_interval(Some(KEEP_ALIVE_INTERVAL))
        .max_idle_timeout(Some(VarInt::from_u32(IDLE_TIMEOUT_MS).into()))
        .initial_rtt(INITIAL_RTT);
    Arc::new(config)
}

/// Connection ids that a restarted node does not reject.
///
/// quinn's default generator signs its ids with a random per-process key and silently
/// drops packets whose id it did not sign, so a restarted node would never answer a
/// packet of its predecessor's connections with a stateless reset (see
/// `Certs::reset_key`). These ids are unsigned: distinct (a bijective mix of a
/// counter) and unpredictable enough for a cluster network. The price is that any
/// stray short-header packet gets a reset, which quinn rate-limits and keeps smaller
/// than the packet that caused it.
struct CidGenerator {
    state: u64,
}

impl CidGenerator {
    const LEN: usize = 8;

    fn new() -> CidGenerator {
        use std::hash::{BuildHasher, Hasher};
        // `RandomState` is seeded from the OS: a random start without a rand dependency.
        let seed = std::collections::hash_map::RandomState::new().build_hasher().finish();
        CidGenerator { state: seed }
    }
}

impl ConnectionIdGenerator for CidGenerator {
    fn generate_cid(&mut self) -> ConnectionId {
        // splitmix64: the state walks through every u64 once, and the output mix is a
        // bijection, so ids repeat only after 2^64 of them.
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ConnectionId::new(&(z ^ (z >> 31)).to_be_bytes())
    }

    fn cid_len(&self) -> usize {
        Self::LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

impl Transport {
    /// Binds one UDP socket at `listen` that accepts connections from peers and dials
    /// them, and starts accepting. Messages from every peer arrive on the returned
    /// receiver, with the id their sender's hello gave.
    pub async fn bind(
        me: NodeId,
        listen: SocketAddr,
        certs: &Certs,
        config: NetConfig,
    ) -> Result<(Transport, mpsc::Receiver<(NodeId, Message)>)> {
        config.check()?;
        // A connection carries one direction: the acceptor takes the dialer's single
        // stream and the dialer takes none.
        let server = certs.server_config(transport_config(1))?;
        let client = certs.client_config(transport_config(0))?;
        let bind_error = |e: std::io::Error| Error::Transport(format!("binding {listen}: {e}"));
        let socket = std::net::UdpSocket::bind(listen).map_err(bind_error)?;
        let mut endpoint_config = EndpointConfig::new(certs.reset_key(me));
        endpoint_config.cid_generator(|| Box::new(CidGenerator::new()));
        let mut endpoint = Endpoint::new(endpoint_config, Some(server), socket, Arc::new(TokioRuntime)).map_err(bind_error)?;
        endpoint.set_default_client_config(client);
        let local_addr = endpoint.local_addr().map_err(|e| Error::Transport(format!("local address: {e}")))?;
        let (inbox, inbox_rx) = mpsc::channel(config.inbox_max);
        let shared = Arc::new(Shared {
            me,
            config,
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            bad_frames: AtomicU64::new(0),
            connects_failed: AtomicU64::new(0),
            started: Instant::now(),
            drop_warn_next_ms: AtomicU64::new(0),
            drops_unreported: AtomicU64::new(0),
            partitioned: AtomicBool::new(false),
        });
        // Task net.accept: ends when the endpoint closes (shutdown, or the last
        // Transport clone dropped). It has no errors of its own: a failed connection
        // ends only that connection's task. Cancelled (runtime shutdown), it just stops
        // accepting; the connection tasks are cancelled alike.
        tokio::spawn(
            accept_loop(endpoint.clone(), shared.clone(), inbox.clone())
                .instrument(info_span!("net.accept", me = %me, addr = %local_addr)),
        );
        info!(%me, addr = %local_addr, "transport bound");
        let inner = Inner {
            shared,
            local: std::sync::OnceLock::new(),
            endpoint,
            local_addr,
            inbox,
            peers: RwLock::new(Peers { by_node: HashMap::new(), closed: false }),
            runtime: tokio::runtime::Handle::current(),
        };
        Ok((Transport { inner: Arc::new(inner) }, inbox_rx))
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr
    }

    /// Joins `net`: from now on messages between this node and the net's other members
    /// bypass QUIC. A transport joins one net, once; a second call is ignored.
    pub fn join_local(&self, net: &LocalNet) {
        if self.inner.local.set(net.clone()).is_err() {
            return;
        }
        let member = LocalMember { inbox: self.inner.inbox.downgrade(), shared: self.inner.shared.clone() };
        write_lock(&net.members).insert(self.inner.shared.me, member);
    }

    /// Records where `node` listens. A changed address takes effect at once: the
    /// connection to the old address is closed and the next message dials the new one.
    pub fn set_peer(&self, node: NodeId, addr: SocketAddr) {
        let shared = &self.inner.shared;
        if node == shared.me {
            return;
        }
        let mut peers = write_lock(&self.inner.peers);
        if peers.closed {
            return;
        }
        if let Some(peer) = peers.by_node.get(&node) {
            peer.addr.send_if_modified(|current| {
                let changed = *current != addr;
                *current = addr;
                changed
            });
            return;
        }
        let (queue, queue_rx) = mpsc::channel(shared.config.peer_queue_max);
        let (addr_tx, addr_rx) = watch::channel(addr);
        let task = PeerTask {
            shared: shared.clone(),
            endpoint: self.inner.endpoint.clone(),
            peer: node,
            queue: queue_rx,
            addr: addr_rx,
            link: None,
            buf: BytesMut::new(),
            backoff: BACKOFF_MIN,
            retry_at: Instant::now(),
            failures: 0,
        };
        // Task net.peer: ends when its queue or address closes, which happens when the
        // transport forgets the peer (shutdown, or the last Transport clone dropped);
        // its connection then closes. Errors never end it: a failed connect or write
        // drops the messages at hand and the next message tries again. Cancelled
        // (runtime shutdown), the queued messages are lost like any in flight.
        self.inner.runtime.spawn(task.run().instrument(info_span!("net.peer", me = %shared.me, peer = %node)));
        peers.by_node.insert(node, PeerHandle { queue, addr: addr_tx });
    }

    /// Queues `msg` for `to` and returns at once, never waiting. The message is
    /// dropped (counted, and warned about at a limited rate) when `to` is unknown or its
    /// queue is full; see the module docs. A message to this node goes straight into
    /// the inbox, or is dropped if the inbox is full.
    pub fn send(&self, to: NodeId, msg: Message) {
        let shared = &self.inner.shared;
        if to == shared.me {
            match self.inner.inbox.try_reserve() {
                Ok(permit) => {
                    shared.sent.fetch_add(1, Ordering::Relaxed);
                    shared.received.fetch_add(1, Ordering::Relaxed);
                    permit.send((to, msg));
                }
                Err(TrySendError::Full(())) => shared.dropped(to, 1, "inbox full", msg.name()),
                Err(TrySendError::Closed(())) => shared.dropped(to, 1, "inbox closed", msg.name()),
            }
            return;
        }
        if shared.partitioned.load(Ordering::Relaxed) {
            shared.dropped(to, 1, "partitioned", msg.name());
            return;
        }
        if let Some(peer) = self.inner.local.get().and_then(|net| net.member(to)) {
            self.send_local(peer, to, msg);
            return;
        }
        let refused = match read_lock(&self.inner.peers).by_node.get(&to) {
            None => Some(("unknown peer", msg)),
            Some(peer) => match peer.queue.try_send(msg) {
                Ok(()) => None,
                Err(TrySendError::Full(msg)) => Some(("peer queue full", msg)),
                Err(TrySendError::Closed(msg)) => Some(("peer task stopped", msg)),
            },
        };
        if let Some((reason, msg)) = refused {
            shared.dropped(to, 1, reason, msg.name());
        }
    }

    /// Moves `msg` into a local member's inbox, as its connection reader would
    /// deliver it, except that a full inbox drops it rather than waits.
    fn send_local(&self, peer: LocalMember, to: NodeId, msg: Message) {
        let shared = &self.inner.shared;
        if read_lock(&self.inner.peers).closed {
            shared.dropped(to, 1, "transport shut down", msg.name());
            return;
        }
        if peer.shared.partitioned.load(Ordering::Relaxed) {
            shared.dropped(to, 1, "partitioned", msg.name());
            return;
        }
        let Some(inbox) = peer.inbox.upgrade() else {
            shared.dropped(to, 1, "peer stopped", msg.name());
            return;
        };
        match inbox.try_send((shared.me, msg)) {
            Ok(()) => {
                shared.sent.fetch_add(1, Ordering::Relaxed);
                peer.shared.received.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full((_, msg))) => shared.dropped(to, 1, "inbox full", msg.name()),
            Err(TrySendError::Closed((_, msg))) => shared.dropped(to, 1, "peer stopped", msg.name()),
        }
    }

    /// A test hook for partition tests: while `cut`, every message to or from another
    /// node is dropped (connections stay up, as under a partition that loses packets).
    pub fn set_partitioned(&self, cut: bool) {
        self.inner.shared.partitioned.store(cut, Ordering::Relaxed);
    }

    pub fn stats(&self) -> NetStats {
        let shared = &self.inner.shared;
        NetStats {
            messages_sent: shared.sent.load(Ordering::Relaxed),
            messages_received: shared.received.load(Ordering::Relaxed),
            messages_dropped: shared.dropped.load(Ordering::Relaxed),
            connections_closed_bad_frame: shared.bad_frames.load(Ordering::Relaxed),
            connects_failed: shared.connects_failed.load(Ordering::Relaxed),
        }
    }

    /// Forgets every peer, closes every connection and the endpoint, and waits until
    /// the peers have been told. Messages sent afterwards are dropped.
    pub async fn shutdown(&self) {
        {
            let mut peers = write_lock(&self.inner.peers);
            peers.closed = true;
            // Dropping the handles ends the peer tasks.
            peers.by_node.clear();
        }
        if let Some(net) = self.inner.local.get() {
            let me = self.inner.shared.me;
            let mut members = write_lock(&net.members);
            // Only this transport's own entry: a restarted node may have joined since.
            if members.get(&me).is_some_and(|m| Arc::ptr_eq(&m.shared, &self.inner.shared)) {
                members.remove(&me);
            }
        }
        self.inner.endpoint.close(CLOSE_SHUTDOWN, b"shutdown");
        self.inner.endpoint.wait_idle().await;
        info!(me = %self.inner.shared.me, "transport shut down");
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The accept task holds an endpoint clone; closing ends it, and with it the
        // connection tasks, so a dropped transport leaves nothing running.
        self.endpoint.close(CLOSE_SHUTDOWN, b"transport dropped");
    }
}

/// An open connection to a peer and the one stream that carries its messages.
struct Link {
    conn: Connection,
    stream: SendStream,
}

/// Writes one peer's queue to it: see the net.peer comment in [`Transport::set_peer`].
struct PeerTask {
    shared: Arc<Shared>,
    endpoint: Endpoint,
    peer: NodeId,
    queue: mpsc::Receiver<Message>,
    addr: watch::Receiver<SocketAddr>,
    link: Option<Link>,
    /// Frames of the batch being built; its spare capacity is reused across batches.
    buf: BytesMut,
    backoff: Duration,
    retry_at: Instant,
    /// Consecutive failed connection attempts; only the first one warns.
    failures: u32,
}

impl PeerTask {
    async fn run(mut self) {
        loop {
            let first = tokio::select! {
                // An address change is handled before the messages queued behind it, so
                // they go to the new address.
                biased;
                changed = self.addr.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.moved();
                    continue;
                }
                msg = self.queue.recv() => match msg {
                    Some(msg) => msg,
                    None => return,
                },
            };
            // A peer that restarted or closed us for cause shows up here, before a batch
            // is lost to a dead connection.
            if self.link.as_ref().is_some_and(|link| link.conn.close_reason().is_some()) {
                self.drop_link();
            }
            if self.link.is_none() && !self.connect().await {
                self.shared.dropped(self.peer, 1, "peer unreachable", first.name());
                continue;
            }
            self.write_batch(first).await;
        }
    }

    fn moved(&mut self) {
        if let Some(link) = self.link.take() {
            info!(addr = %*self.addr.borrow(), "peer moved; closing the old connection");
            link.conn.close(CLOSE_PEER_MOVED, b"peer address changed");
        }
        self.buf.clear();
        self.backoff = BACKOFF_MIN;
        self.retry_at = Instant::now();
    }

    fn drop_link(&mut self) {
        self.link = None;
        // A hello queued for the old stream must not open the next one twice.
        self.buf.clear();
    }

    /// Dials the peer unless a recent failure says to wait. On success the batch
    /// buffer starts with the hello of the new stream.
    async fn connect(&mut self) -> bool {
        if Instant::now() < self.retry_at {
            return false;
        }
        let addr = *self.addr.borrow_and_update();
        let attempt = async {
            let conn = self
                .endpoint
                .connect(addr, &certs::node_name(self.peer))
                .map_err(|e| e.to_string())?
                .await
                .map_err(|e| e.to_string())?;
            let stream = conn.open_uni().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(Link { conn, stream })
        };
        let error = match tokio::time::timeout(self.shared.config.connect_timeout(), attempt).await {
            Ok(Ok(link)) => {
                info!(%addr, "connected");
                self.link = Some(link);
                self.buf.clear();
                self.buf.extend_from_slice(&frame::hello(self.shared.me));
                self.backoff = BACKOFF_MIN;
                self.failures = 0;
                return true;
            }
            Ok(Err(e)) => e,
            Err(_) => format!("timed out after {} ms", self.shared.config.connect_timeout_ms),
        };
        self.shared.connects_failed.fetch_add(1, Ordering::Relaxed);
        self.failures += 1;
        if self.failures == 1 {
            warn!(%addr, error, "cannot connect; retrying with backoff");
        } else {
            debug!(%addr, error, failures = self.failures, "cannot connect");
        }
        self.retry_at = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        false
    }

    /// Writes `first` and whatever else is queued, up to [`COALESCE_BYTES_MAX`], with
    /// one write: one trip through QUIC's connection lock and packetiser for a burst.
    async fn write_batch(&mut self, first: Message) {
        let frame_bytes_max = self.shared.config.frame_bytes_max;
        self.buf.reserve(BATCH_RESERVE_BYTES);
        let mut count = 0;
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match frame::encode_into(&msg, &mut self.buf, frame_bytes_max) {
                Ok(()) => count += 1,
                Err(e) => {
                    debug!(error = %e, msg = msg.name(), "cannot frame a message");
                    let reason = match e {
                        frame::FrameError::TooLarge { .. } => "message too large",
                        _ => "message unencodable",
                    };
                    self.shared.dropped(self.peer, 1, reason, msg.name());
                }
            }
            if self.buf.len() < COALESCE_BYTES_MAX {
                next = self.queue.try_recv().ok();
            }
        }
        if self.buf.is_empty() {
            return;
        }
        // The frozen chunk shares the buffer's allocation and QUIC keeps it until
        // acknowledged: no copy on the way to the socket.
        let chunk = self.buf.split().freeze();
        let link = self.link.as_mut().expect("write_batch runs on a connected peer");
        match link.stream.write_chunk(chunk).await {
            Ok(()) => {
                self.shared.sent.fetch_add(count, Ordering::Relaxed);
            }
            Err(e) => {
                info!(error = %e, "connection lost");
                if count > 0 {
                    self.shared.dropped(self.peer, count, "connection lost", "batch");
                }
                self.drop_link();
            }
        }
    }
}

/// Accepts connections until the endpoint closes: see net.accept in [`Transport::bind`].
async fn accept_loop(endpoint: Endpoint, shared: Arc<Shared>, inbox: mpsc::Sender<(NodeId, Message)>) {
    let permits = Arc::new(Semaphore::new(shared.config.incoming_connections_max));
    while let Some(incoming) = endpoint.accept().await {
        let remote = incoming.remote_address();
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            warn!(%remote, limit = shared.config.incoming_connections_max, "refusing a connection: at the limit");
            incoming.refuse();
            continue;
        };
        // Task net.conn: ends when the connection closes, whoever closes it; a
        // malformed hello or frame closes it from here, other errors just end it. On
        // cancel (runtime shutdown) the connection is dropped, which closes it.
        let span = info_span!("net.conn", me = %shared.me, %remote, peer = tracing::field::Empty);
        tokio::spawn(serve_connection(incoming, shared.clone(), inbox.clone(), permit).instrument(span));
    }
    debug!("endpoint closed; no more connections");
}

/// Reads the dialer's stream: the hello, then frames into the inbox.
async fn serve_connection(
    incoming: Incoming,
    shared: Arc<Shared>,
    inbox: mpsc::Sender<(NodeId, Message)>,
    _permit: OwnedSemaphorePermit,
) {
    let timeout = shared.config.connect_timeout();
    let handshake = async { incoming.accept()?.await };
    let conn = match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            // Among others: a client without a certificate from the cluster's CA.
            warn!(error = %e, "handshake failed");
            return;
        }
        Err(_) => {
            warn!(timeout_ms = shared.config.connect_timeout_ms, "handshake timed out");
            return;
        }
    };
    let mut first_stream = true;
    loop {
        // A dialer opens its stream with its first message, so a connection without
        // one is not a cluster member at work; later streams may come whenever.
        let accepted = if first_stream {
            tokio::time::timeout(timeout, conn.accept_uni()).await.unwrap_or_else(|_| Err(quinn::ConnectionError::TimedOut))
        } else {
            conn.accept_uni().await
        };
        first_stream = false;
        let mut recv = match accepted {
            Ok(recv) => recv,
            Err(e) => {
                debug!(reason = %e, "connection closed");
                return;
            }
        };
        let from = match tokio::time::timeout(timeout, frame::read_hello(&mut recv)).await {
            Ok(Ok(from)) if from != shared.me && certified(&conn, from) => from,
            hello => {
                let reason = match hello {
                    Ok(Ok(from)) if from == shared.me => format!("bad hello: sender claims to be this node ({from})"),
                    Ok(Ok(from)) => format!("bad hello: the sender's certificate does not name {from}"),
                    Ok(Err(e)) => format!("bad hello: {e}"),
                    Err(_) => format!("bad hello: none within {} ms", shared.config.connect_timeout_ms),
                };
                warn!(reason, "closing connection");
                shared.bad_frames.fetch_add(1, Ordering::Relaxed);
                conn.close(CLOSE_BAD_HELLO, reason.as_bytes());
                return;
            }
        };
        tracing::Span::current().record("peer", tracing::field::display(from));
        loop {
            match frame::read_frame(&mut recv, shared.config.frame_bytes_max).await {
                Ok(Some(msg)) if shared.partitioned.load(Ordering::Relaxed) => shared.dropped(from, 1, "partitioned", msg.name()),
                Ok(Some(msg)) => match deliver(&inbox, &conn, (from, msg), &shared.received).await {
                    Delivery::Delivered => {}
                    Delivery::InboxClosed => {
                        debug!("inbox closed; closing connection");
                        conn.close(CLOSE_SHUTDOWN, b"node stopped");
                        return;
                    }
                    Delivery::ConnectionClosed => {
                        debug!("connection closed while the inbox was full");
                        return;
                    }
                },
                // The dialer finished its stream; it may open another.
                Ok(None) => break,
                Err(e) if e.is_malformed() => {
                    let reason = format!("bad frame: {e}");
                    warn!(reason, "closing connection");
                    shared.bad_frames.fetch_add(1, Ordering::Relaxed);
                    conn.close(CLOSE_BAD_FRAME, reason.as_bytes());
                    return;
                }
                Err(e) => {
                    debug!(error = %e, "stream ended");
                    return;
                }
            }
        }
    }
}

/// Whether the certificate `conn`'s peer presented names `node`.
fn certified(conn: &Connection, node: NodeId) -> bool {
    let chain = conn.peer_identity().and_then(|id| id.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>().ok());
    chain.is_some_and(|chain| chain.first().is_some_and(|leaf| certs::certifies(leaf, node)))
}

enum Delivery {
    Delivered,
    InboxClosed,
    ConnectionClosed,
}

/// Puts a received message into the inbox, waiting while it is full. The wait ends
/// early if the connection closes (shutdown, or the peer went away), so a node that
/// stops reading its inbox does not keep connection tasks alive.
/// `received` counts the message before the node can see it, so whoever has read a
/// message from the inbox also sees it counted.
async fn deliver(
    inbox: &mpsc::Sender<(NodeId, Message)>,
    conn: &Connection,
    item: (NodeId, Message),
    received: &AtomicU64,
) -> Delivery {
    // The common case needs no waiter registered on the connection.
    let permit = match inbox.try_reserve() {
        Ok(permit) => permit,
        Err(TrySendError::Closed(())) => return Delivery::InboxClosed,
        Err(TrySendError::Full(())) => tokio::select! {
            reserved = inbox.reserve() => match reserved {
                Ok(permit) => permit,
                Err(_) => return Delivery::InboxClosed,
            },
            _ = conn.closed() => return Delivery::ConnectionClosed,
        },
    };
    received.fetch_add(1, Ordering::Relaxed);
    permit.send(item);
    Delivery::Delivered
}
