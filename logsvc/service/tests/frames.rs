//! Malformed frames on a live cluster's QUIC endpoints: a frame that is not a message
//! closes only its own connection, and the node keeps serving (see `cluster.rs` for the
//! cluster the tests build).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Context as _};
use tally_logsvc::{BookId, Context, Tag};

mod common;
use common::{cluster, data, TestDir};

/// A raw QUIC client holding the dev cluster's certificate, read from the cluster's
/// directory: it passes the handshake and can then send any bytes it likes.
fn raw_client(certs_dir: &std::path::Path) -> anyhow::Result<quinn::Endpoint> {
    use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
    let read = |name: &str| std::fs::read(certs_dir.join(name)).with_context(|| format!("reading {name}"));
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(read("ca.der")?))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![CertificateDer::from(read("node.der")?)],
            PrivatePkcs8KeyDer::from(read("node.key.der")?).into(),
        )?;
    tls.alpn_protocols = vec![b"tally/1".to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls)?;
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse()?)?;
    endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    Ok(endpoint)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_malformed_frame_closes_only_its_connection_to_a_live_storage_node() -> anyhow::Result<()> {
    let dir = TestDir::new();
    let cluster = cluster(&dir, |_| {}).await?;
    let c = cluster.client(0);
    let mut ctx = Context::new();
    let before = c.append(&mut ctx, BookId(9), &[], data("before")).await?;

    let raw = raw_client(&dir.path().join("certs"))?;
    let name = tally_logsvc::net::node_name(cluster.storage_id(0));
    let conn = raw.connect(cluster.storage_addr(0), &name)?.await.context("handshake")?;
    let mut stream = conn.open_uni().await?;
    // A valid hello from an unknown node, then a frame whose body is not a message.
    let mut bytes = b"TLY1".to_vec();
    bytes.push(tally_logsvc::WIRE_VERSION);
    bytes.extend_from_slice(&999u32.to_be_bytes());
    bytes.extend_from_slice(&8u32.to_be_bytes());
    bytes.push(tally_logsvc::WIRE_VERSION);
    bytes.extend_from_slice(&[0xff; 8]);
    // The node may close the connection before every byte is written.
    let _ = stream.write_all(&bytes).await;
    let closed = tokio::time::timeout(Duration::from_secs(5), conn.closed()).await.context("the node closes the connection")?;
    ensure!(matches!(closed, quinn::ConnectionError::ApplicationClosed(_)), "closed with {closed}");
    let stats = cluster.storage_transport(0).context("storage node 0 runs")?.stats();
    assert_eq!(stats.connections_closed_bad_frame, 1);

    // The cluster, that node included, keeps serving.
    let after = c.append(&mut ctx, BookId(9), &[], data("after")).await?;
    ensure!(after > before);
    let r = cluster.client(1).read_next(&mut ctx.child(), BookId(9), Tag::ALL, after).await?.context("the new record")?;
    assert_eq!((r.seqnum, r.data), (after, data("after")));
    let config = cluster.configuration().context("a configuration")?;
    ensure!(config.current().storage.contains(&cluster.storage_id(0)), "the node was not declared down");
    cluster.shutdown().await;
    Ok(())
}
