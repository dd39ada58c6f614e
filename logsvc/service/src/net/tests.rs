//! Transports on loopback. Waits are polls with a deadline, never sleeps standing in
//! for an event.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use quinn::crypto::rustls::QuicClientConfig;
use tally_log_core::{BookId, Record, RecordMeta, ShardId, Term};
use tokio::sync::mpsc::Receiver;

use super::*;

/// Generous: a loaded 2-core CI machine runs these tests in parallel.
const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

fn certs() -> &'static Certs {
    static CERTS: OnceLock<Certs> = OnceLock::new();
    CERTS.get_or_init(|| Certs::generate().expect("dev certificates"))
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Logs go to the test's output, filtered by `RUST_LOG`; cargo shows them on failure.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::from_default_env();
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

async fn node(id: u32, config: NetConfig) -> (Transport, Receiver<(NodeId, Message)>) {
    init_tracing();
    Transport::bind(NodeId(id), loopback(), certs(), config).await.expect("bind")
}

type Inbox = Receiver<(NodeId, Message)>;

/// Node 1 and node 2, with node 1 knowing where node 2 is.
async fn pair(a_config: NetConfig, b_config: NetConfig) -> (Transport, Inbox, Transport, Inbox) {
    let (a, a_rx) = node(1, a_config).await;
    let (b, b_rx) = node(2, b_config).await;
    a.set_peer(NodeId(2), b.local_addr());
    (a, a_rx, b, b_rx)
}

fn ping(seq: u64) -> Message {
    Message::Heartbeat { incarnation: seq, term: Term(1), version: 0 }
}

fn seq_of(msg: &Message) -> u64 {
    match msg {
        Message::Heartbeat { incarnation, .. } => *incarnation,
        other => panic!("expected a heartbeat, got {}", other.name()),
    }
}

fn replicate(data_bytes: usize) -> Message {
    let data: Bytes = (0..data_bytes).map(|i| (i % 251) as u8).collect::<Vec<_>>().into();
    let record = Record { meta: RecordMeta::plain(BookId(1), vec![]), data };
    Message::Replicate { shard: ShardId(3), records: vec![(0, record)], traces: Vec::new() }
}

async fn recv(rx: &mut Receiver<(NodeId, Message)>) -> (NodeId, Message) {
    tokio::time::timeout(WAIT, rx.recv()).await.expect("a message in time").expect("inbox open")
}

/// Polls `done` until it holds or the wait runs out.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(POLL).await;
    }
}

/// Sends pings from `seq` on, one per poll interval, until one arrives within
/// `deadline`; returns the sequence number of the one that did. For paths where early
/// messages may be lost.
async fn ping_until_delivered(
    from: &Transport,
    to: NodeId,
    rx: &mut Receiver<(NodeId, Message)>,
    mut seq: u64,
    deadline: Duration,
) -> u64 {
    let deadline = tokio::time::Instant::now() + deadline;
    loop {
        assert!(tokio::time::Instant::now() < deadline, "no ping reached {to} in time");
        from.send(to, ping(seq));
        if let Ok(Some((_, msg))) = tokio::time::timeout(POLL * 5, rx.recv()).await {
            return seq_of(&msg);
        }
        seq += 1;
    }
}

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut).await.unwrap_or_else(|_| panic!("timed out: {what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_exchange_many_messages_in_order() {
    const N: u64 = 10_000;
    // Queues that hold the whole burst: this test is about order, not loss.
    let config = NetConfig { peer_queue_max: N as usize, ..NetConfig::default() };
    let (a, mut a_rx) = node(1, config.clone()).await;
    let (b, mut b_rx) = node(2, config).await;
    a.set_peer(NodeId(2), b.local_addr());
    b.set_peer(NodeId(1), a.local_addr());
    for i in 0..N {
        a.send(NodeId(2), ping(i));
        b.send(NodeId(1), ping(i));
    }
    for i in 0..N {
        let (from, msg) = recv(&mut b_rx).await;
        assert_eq!((from, seq_of(&msg)), (NodeId(1), i));
        let (from, msg) = recv(&mut a_rx).await;
        assert_eq!((from, seq_of(&msg)), (NodeId(2), i));
    }
    for t in [&a, &b] {
        eventually("all sends are counted", || t.stats().messages_sent == N).await;
        let stats = t.stats();
        assert_eq!((stats.messages_received, stats.messages_dropped), (N, 0), "{stats:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_all_to_all_in_order() {
    const N: u64 = 2_000;
    let config = NetConfig { peer_queue_max: N as usize, ..NetConfig::default() };
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(node(id, config.clone()).await);
    }
    for (t, _) in &nodes {
        for (peer, _) in &nodes {
            t.set_peer(peer.inner.shared.me, peer.local_addr());
        }
    }
    for i in 0..N {
        for (t, _) in &nodes {
            for id in 1..=3 {
                if NodeId(id) != t.inner.shared.me {
                    t.send(NodeId(id), ping(i));
                }
            }
        }
    }
    for (_, rx) in &mut nodes {
        // Per sender, the next sequence number expected.
        let mut next = std::collections::HashMap::new();
        for _ in 0..2 * N {
            let (from, msg) = recv(rx).await;
            let expected = next.entry(from).or_insert(0);
            assert_eq!(seq_of(&msg), *expected, "from {from}");
            *expected += 1;
        }
        assert_eq!(next.len(), 2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_to_self_go_to_the_inbox_and_unknown_peers_drop() {
    let (a, mut rx) = node(1, NetConfig { inbox_max: 2, ..NetConfig::default() }).await;
    for i in 0..3 {
        a.send(NodeId(1), ping(i));
    }
    a.send(NodeId(9), ping(3));
    let stats = a.stats();
    assert_eq!((stats.messages_received, stats.messages_dropped), (2, 2), "{stats:?}");
    for i in 0..2 {
        let (from, msg) = recv(&mut rx).await;
        assert_eq!((from, seq_of(&msg)), (NodeId(1), i));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_inbox_makes_readers_wait_instead_of_dropping() {
    const N: u64 = 2_000;
    let (a, _a_rx, _b, mut b_rx) = pair(NetConfig::default(), NetConfig { inbox_max: 4, ..NetConfig::default() }).await;
    for i in 0..N {
        a.send(NodeId(2), ping(i));
    }
    // Nobody reads b's inbox until a's writes are all in QUIC's hands.
    eventually("a has written everything", || a.stats().messages_sent == N).await;
    for i in 0..N {
        assert_eq!(seq_of(&recv(&mut b_rx).await.1), i);
    }
    assert_eq!(a.stats().messages_dropped, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_flow_once_a_late_peer_comes_up() {
    let config = NetConfig { connect_timeout_ms: 300, ..NetConfig::default() };
    let (a, _a_rx) = node(1, config.clone()).await;
    // A port that was free a moment ago; the peer will listen there later.
    let addr = std::net::UdpSocket::bind(loopback()).unwrap().local_addr().unwrap();
    a.set_peer(NodeId(2), addr);
    a.send(NodeId(2), ping(0));
    eventually("the first ping is dropped", || a.stats().messages_dropped == 1).await;
    assert!(a.stats().connects_failed >= 1);

    let (_b, mut b_rx) = Transport::bind(NodeId(2), addr, certs(), config).await.expect("bind the late peer");
    let first = ping_until_delivered(&a, NodeId(2), &mut b_rx, 1, WAIT).await;
    assert!(first >= 1);
    // Once connected nothing is lost and order holds.
    for i in first + 1..first + 100 {
        a.send(NodeId(2), ping(i));
    }
    for i in first + 1..first + 100 {
        assert_eq!(seq_of(&recv(&mut b_rx).await.1), i);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_moves_is_reached_at_its_new_address() {
    let (a, _a_rx, b, mut b_rx) = pair(NetConfig::default(), NetConfig::default()).await;
    a.send(NodeId(2), ping(0));
    assert_eq!(seq_of(&recv(&mut b_rx).await.1), 0);

    b.shutdown().await;
    let (b2, mut b2_rx) = node(2, NetConfig::default()).await;
    a.set_peer(NodeId(2), b2.local_addr());
    // The address change is seen before the next message, which goes to the new one.
    a.send(NodeId(2), ping(1));
    let (from, msg) = recv(&mut b2_rx).await;
    assert_eq!((from, seq_of(&msg)), (NodeId(1), 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_crashes_and_restarts_at_the_same_address_is_reached_before_the_idle_timeout() {
    let (a, _a_rx) = node(1, NetConfig::default()).await;
    // b runs on a runtime of its own, so it can die without a word: shutting that
    // runtime down drops b's tasks, QUIC driver included, before they can send a close.
    let b_runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (b, mut b_rx) = b_runtime.spawn(node(2, NetConfig::default())).await.unwrap();
    let addr = b.local_addr();
    a.set_peer(NodeId(2), addr);
    a.send(NodeId(2), ping(0));
    assert_eq!(seq_of(&recv(&mut b_rx).await.1), 0);
    b_runtime.shutdown_background();
    drop((b, b_rx));

    // The dying runtime's workers close b's socket soon, not at once.
    let deadline = tokio::time::Instant::now() + WAIT;
    let (_b2, mut b2_rx) = loop {
        match Transport::bind(NodeId(2), addr, certs(), NetConfig::default()).await {
            Ok(bound) => break bound,
            Err(e) => assert!(tokio::time::Instant::now() < deadline, "cannot rebind {addr}: {e}"),
        }
        tokio::time::sleep(POLL).await;
    };
    // Without a reset a's connection would swallow messages until the idle timeout.
    let idle_timeout = Duration::from_millis(IDLE_TIMEOUT_MS.into());
    ping_until_delivered(&a, NodeId(2), &mut b2_rx, 1, idle_timeout / 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_streams_close_only_their_connection() {
    const LIMIT: usize = 1 << 20;
    let (a, _a_rx, b, mut b_rx) = pair(NetConfig::default(), NetConfig { frame_bytes_max: LIMIT, ..NetConfig::default() }).await;

    let hello = frame::hello(NodeId(7)).to_vec();
    let valid = frame::encode(&ping(99));
    let with_hello = |rest: &[u8]| [hello.as_slice(), rest].concat();
    let mut oversized = ((LIMIT + 1) as u32).to_be_bytes().to_vec();
    oversized.push(crate::WIRE_VERSION);
    let mut wrong_version = valid.to_vec();
    wrong_version[4] = crate::WIRE_VERSION + 1;
    let mut garbage = 8u32.to_be_bytes().to_vec();
    garbage.push(crate::WIRE_VERSION);
    garbage.extend_from_slice(&[0xff; 8]);
    let mut bad_magic = hello.clone();
    bad_magic[0] = b'X';
    // (name, bytes on the stream, whether the stream then finishes, close code)
    let cases: Vec<(&str, Vec<u8>, bool, VarInt)> = vec![
        ("oversized length", with_hello(&oversized), false, CLOSE_BAD_FRAME),
        ("wrong version", with_hello(&wrong_version), false, CLOSE_BAD_FRAME),
        ("garbage body", with_hello(&garbage), false, CLOSE_BAD_FRAME),
        ("truncated frame", with_hello(&valid[..valid.len() - 2]), true, CLOSE_BAD_FRAME),
        ("valid frame then garbage", with_hello(&[&valid[..], &garbage].concat()), false, CLOSE_BAD_FRAME),
        ("bad magic", [bad_magic.as_slice(), &valid].concat(), false, CLOSE_BAD_HELLO),
        ("hello claiming the acceptor's id", [&frame::hello(NodeId(2))[..], &valid].concat(), false, CLOSE_BAD_HELLO),
        ("truncated hello", hello[..5].to_vec(), true, CLOSE_BAD_HELLO),
    ];

    let mut raw = Endpoint::client(loopback()).unwrap();
    raw.set_default_client_config(certs().client_config(transport_config(0)).unwrap());
    let mut seq = 0;
    for (i, (name, bytes, finish, code)) in cases.iter().enumerate() {
        let conn = within(name, raw.connect(b.local_addr(), &certs::node_name(NodeId(2))).unwrap()).await.expect("handshake");
        let mut stream = conn.open_uni().await.unwrap();
        // The acceptor may close the connection before all bytes are written.
        let _ = stream.write_all(bytes).await;
        if *finish {
            let _ = stream.finish();
        }
        match within(name, conn.closed()).await {
            quinn::ConnectionError::ApplicationClosed(close) => assert_eq!(close.error_code, *code, "case {name:?}"),
            other => panic!("case {name:?}: closed with {other}"),
        }
        assert_eq!(b.stats().connections_closed_bad_frame, i as u64 + 1, "case {name:?}");
        // The well-behaved peer still gets through, and nothing of the raw client did,
        // except the valid frame of "valid frame then garbage".
        a.send(NodeId(2), ping(seq));
        loop {
            let (from, msg) = recv(&mut b_rx).await;
            if from == NodeId(7) {
                assert_eq!((*name, seq_of(&msg)), ("valid frame then garbage", 99));
                continue;
            }
            assert_eq!((from, seq_of(&msg)), (NodeId(1), seq), "case {name:?}");
            break;
        }
        seq += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_holders_of_a_ca_signed_certificate_connect() {
    let (a, _a_rx, b, mut b_rx) = pair(NetConfig::default(), NetConfig::default()).await;
    let outsider = Certs::generate().unwrap();

    // Clients that trust the cluster's CA but present no certificate, or one from
    // another CA.
    let (cert, key) = outsider.identity();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(certs().ca()).unwrap();
    let builder = || {
        rustls::ClientConfig::builder_with_provider(certs::provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots.clone())
    };
    let tls_configs = [
        ("no client certificate", builder().with_no_client_auth()),
        ("certificate of another ca", builder().with_client_auth_cert(vec![cert], key.into()).unwrap()),
    ];
    for (name, mut tls) in tls_configs {
        tls.alpn_protocols = vec![certs::ALPN.to_vec()];
        let quic = QuicClientConfig::try_from(tls).unwrap();
        let raw = Endpoint::client(loopback()).unwrap();
        let connecting = raw.connect_with(quinn::ClientConfig::new(Arc::new(quic)), b.local_addr(), &certs::node_name(NodeId(2)));
        // TLS 1.3 lets the client finish its side before the server has checked the
        // client's certificate, so the refusal may come as a close right after.
        if let Ok(conn) = within(name, connecting.unwrap()).await {
            if let Ok(mut stream) = conn.open_uni().await {
                let _ = stream.write_all(&[&frame::hello(NodeId(7))[..], &frame::encode(&ping(99))].concat()).await;
            }
            match within(name, conn.closed()).await {
                quinn::ConnectionError::ConnectionClosed(_) => {}
                other => panic!("case {name:?}: closed with {other}"),
            }
        }
    }

    // A node of another CA is not trusted as a server either.
    let (rogue, _rogue_rx) = Transport::bind(NodeId(3), loopback(), &outsider, NetConfig::default()).await.unwrap();
    a.set_peer(NodeId(3), rogue.local_addr());
    a.send(NodeId(3), ping(0));
    eventually("a refuses the rogue server", || a.stats().connects_failed == 1).await;

    a.send(NodeId(2), ping(1));
    assert_eq!(seq_of(&recv(&mut b_rx).await.1), 1, "only the member's message arrives");
    assert_eq!((b.stats().messages_received, rogue.stats().messages_received), (1, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_pass_and_frames_over_the_limit_are_refused_on_receipt() {
    const LIMIT: usize = 8 << 20;
    let (a, _a_rx, b, mut b_rx) = pair(NetConfig::default(), NetConfig { frame_bytes_max: LIMIT, ..NetConfig::default() }).await;

    let big = replicate(4 << 20);
    a.send(NodeId(2), big.clone());
    let (from, got) = recv(&mut b_rx).await;
    assert_eq!((from, format!("{got:?}")), (NodeId(1), format!("{big:?}")));

    // a's own limit is the default 64 MiB, so it sends what b refuses.
    a.send(NodeId(2), replicate(LIMIT + 1));
    eventually("b closes the connection", || b.stats().connections_closed_bad_frame == 1).await;
    let seq = ping_until_delivered(&a, NodeId(2), &mut b_rx, 0, WAIT).await;
    a.send(NodeId(2), ping(seq + 1));
    assert_eq!(seq_of(&recv(&mut b_rx).await.1), seq + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn senders_drop_messages_over_their_own_limit() {
    let (a, _a_rx, b, mut b_rx) =
        pair(NetConfig { frame_bytes_max: 1 << 20, ..NetConfig::default() }, NetConfig::default()).await;
    a.send(NodeId(2), replicate(2 << 20));
    a.send(NodeId(2), ping(1));
    assert_eq!(seq_of(&recv(&mut b_rx).await.1), 1);
    assert_eq!(a.stats().messages_dropped, 1);
    assert_eq!(b.stats().connections_closed_bad_frame, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_sending_and_dropping_the_transport_ends_the_inbox() {
    let (a, _a_rx, b, mut b_rx) = pair(NetConfig::default(), NetConfig::default()).await;
    a.send(NodeId(2), ping(0));
    assert_eq!(seq_of(&recv(&mut b_rx).await.1), 0);

    a.shutdown().await;
    a.send(NodeId(2), ping(1));
    a.set_peer(NodeId(3), b.local_addr());
    a.send(NodeId(3), ping(2));
    assert_eq!(a.stats().messages_dropped, 2);

    // With the last handle gone every task ends, and with them the inbox's senders.
    drop(b);
    assert!(within("b's inbox closes", b_rx.recv()).await.is_none());
}

#[test]
fn configs_out_of_range_are_refused() {
    let cases = [
        NetConfig { frame_bytes_max: 0, ..NetConfig::default() },
        NetConfig { frame_bytes_max: u32::MAX as usize + 1, ..NetConfig::default() },
        NetConfig { peer_queue_max: 0, ..NetConfig::default() },
        NetConfig { inbox_max: 0, ..NetConfig::default() },
        NetConfig { connect_timeout_ms: 0, ..NetConfig::default() },
        NetConfig { incoming_connections_max: 0, ..NetConfig::default() },
    ];
    for config in cases {
        assert!(matches!(config.check(), Err(Error::InvalidArgument(_))), "{config:?}");
    }
    NetConfig::default().check().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_certificates_bind_node_ids_both_ways() {
    init_tracing();
    let ca = ClusterCa::generate("test").unwrap();
    let dir = tempfile::tempdir().unwrap();
    ca.save(dir.path()).unwrap();
    // A reloaded CA issues certificates its earlier ones trust.
    let ca = ClusterCa::load(dir.path()).unwrap();
    let storage = ca.issue("storage-4", &[NodeId(4)]).unwrap();
    let engine = ca.issue("function-5", &[NodeId(5), NodeId(6)]).unwrap();
    let (s, mut s_rx) = Transport::bind(NodeId(4), loopback(), &storage, NetConfig::default()).await.unwrap();
    let (e, _e_rx) = Transport::bind(NodeId(5), loopback(), &engine, NetConfig::default()).await.unwrap();
    e.set_peer(NodeId(4), s.local_addr());
    e.send(NodeId(4), ping(1));
    assert_eq!(recv(&mut s_rx).await, (NodeId(5), ping(1)), "a holder speaks as an id its certificate names");

    // The same certificate speaking as an id it does not name: the hello is refused.
    let (liar, _liar_rx) = Transport::bind(NodeId(1), loopback(), &engine, NetConfig::default()).await.unwrap();
    liar.set_peer(NodeId(4), s.local_addr());
    liar.send(NodeId(4), ping(2));
    eventually("the storage node refuses a hello its dialer's certificate does not name", || {
        s.stats().connections_closed_bad_frame == 1
    })
    .await;

    // A dialer that reaches a process whose certificate does not name the node it
    // meant (an address now used by another node) does not connect.
    e.set_peer(NodeId(9), s.local_addr());
    e.send(NodeId(9), ping(3));
    eventually("the dialer refuses the wrong server", || e.stats().connects_failed >= 1).await;

    // Another cluster's CA: neither side trusts the other.
    let stranger = ClusterCa::generate("test").unwrap().issue("storage-4", &[NodeId(7)]).unwrap();
    let (x, _x_rx) = Transport::bind(NodeId(7), loopback(), &stranger, NetConfig::default()).await.unwrap();
    x.set_peer(NodeId(4), s.local_addr());
    x.send(NodeId(4), ping(4));
    eventually("a node of another cluster cannot connect", || x.stats().connects_failed >= 1).await;
    e.send(NodeId(4), ping(5));
    assert_eq!(recv(&mut s_rx).await, (NodeId(5), ping(5)));
    assert_eq!(s.stats().messages_received, 2, "nothing from the liar or the stranger arrived");
}

#[tokio::test]
async fn a_local_net_delivers_in_order_without_quic_and_honours_partitions_and_restarts() {
    let net = LocalNet::new();
    let (a, _a_rx) = node(1, NetConfig::default()).await;
    let (b, mut b_rx) = node(2, NetConfig::default()).await;
    // Neither knows the other's address: only the local net can carry these.
    a.join_local(&net);
    b.join_local(&net);
    for seq in 0..100 {
        a.send(NodeId(2), ping(seq));
    }
    for seq in 0..100 {
        let (from, msg) = recv(&mut b_rx).await;
        assert_eq!((from, seq_of(&msg)), (NodeId(1), seq), "in order, named after the sender");
    }
    assert_eq!(b.stats().messages_received, 100);

    // A partition drops both ways, as over QUIC.
    b.set_partitioned(true);
    a.send(NodeId(2), ping(100));
    b.set_partitioned(false);
    a.set_partitioned(true);
    a.send(NodeId(2), ping(101));
    a.set_partitioned(false);
    assert_eq!(a.stats().messages_dropped, 2);
    assert!(b_rx.try_recv().is_err(), "nothing crossed the partition");

    // A node that shut down gets nothing; its successor under the same id joins and
    // does.
    b.shutdown().await;
    drop(b);
    a.send(NodeId(2), ping(102));
    assert_eq!(a.stats().messages_dropped, 3);
    let (b2, mut b2_rx) = node(2, NetConfig::default()).await;
    b2.join_local(&net);
    a.send(NodeId(2), ping(103));
    assert_eq!(seq_of(&recv(&mut b2_rx).await.1), 103);

    // A full inbox drops rather than waits.
    let small = NetConfig { inbox_max: 2, ..NetConfig::default() };
    let (c, _c_rx) = node(3, small).await;
    c.join_local(&net);
    for seq in 0..5 {
        a.send(NodeId(3), ping(seq));
    }
    assert_eq!(a.stats().messages_dropped, 6);
}
