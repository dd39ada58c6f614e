//! HTTPS for the HTTP API: a listener whose connections are TLS (rustls, ring), the
//! gateway's client to the function nodes, and the certificates they take (PEM files).
//!
//! [`TlsListener`] hands axum a connection once its handshake is done: handshakes run
//! apart, each bounded by [`HANDSHAKE_TIMEOUT`], so a client that stalls its handshake
//! holds no one else up.

use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The longest a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes done and not yet taken by the server.
const ACCEPTED_MAX: usize = 1024;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certificates(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .with_context(|| format!("reading {}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{}: not PEM certificates", path.display()))?;
    anyhow::ensure!(!certs.is_empty(), "{} holds no certificate", path.display());
    Ok(certs)
}

/// A server's TLS settings: its certificate chain and key (PEM files).
pub fn server_config(cert_file: &Path, key_file: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let key = PrivateKeyDer::from_pem_file(key_file).with_context(|| format!("reading the key {}", key_file.display()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certificates(cert_file)?, key)
        .context("the certificate and its key")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A client's TLS settings that trust only the CA certificates in `ca_file` (PEM).
pub fn client_config(ca_file: &Path) -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(ca_file)? {
        roots.add(cert).with_context(|| format!("{}: not a CA certificate", ca_file.display()))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// ureq's TLS settings (the command line's client) that trust the CA certificate in
/// `ca_pem`, or the web's roots without one.
pub fn ureq_tls(ca_pem: Option<&[u8]>) -> anyhow::Result<ureq::tls::TlsConfig> {
    let mut config = ureq::tls::TlsConfig::builder();
    if let Some(pem) = ca_pem {
        let ca = ureq::tls::Certificate::from_pem(pem).context("the CA certificate is not PEM")?;
        config = config.root_certs(ureq::tls::RootCerts::new_with_certs(&[ca]));
    }
    Ok(config.build())
}

/// A TCP listener whose connections are served once their TLS handshake is done.
pub struct TlsListener {
    local: SocketAddr,
    accepted: mpsc::Receiver<(tokio_rustls::server::TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    /// Task tls-accept: takes connections from `listener` and runs each handshake in a
    /// task of its own (tls-handshake); ends when the listener is dropped.
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (tx, accepted) = mpsc::channel(ACCEPTED_MAX);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!(error = %e, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                if tx.is_closed() {
                    return;
                }
                let _ = tcp.set_nodelay(true);
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "a TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "a TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { local, accepted })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.accepted.recv().await {
            Some(accepted) => accepted,
            // The accept task ends only with the listener: nothing more comes.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// A connection of [`HttpsConnector`]: TLS, or plain TCP for an `http://` URI.
pub enum Https {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<tokio_rustls::client::TlsStream<TcpStream>>>),
}

impl Connection for Https {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for Https {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: hyper::rt::ReadBufCursor<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Https::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Https::Tls(io) => Pin::new(io.as_mut()).poll_read(cx, buf),
        }
    }
}

impl hyper::rt::Write for Https {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Https::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Https::Tls(io) => Pin::new(io.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Https::Plain(io) => Pin::new(io).poll_flush(cx),
            Https::Tls(io) => Pin::new(io.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Https::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Https::Tls(io) => Pin::new(io.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Connects to `https://host:port` URIs over TLS with `config` (the gateway's client
/// to the function nodes, which trusts the cluster's CA), and to `http://` ones in
/// the clear when it has no TLS settings.
#[derive(Clone)]
pub struct HttpsConnector {
    config: Option<Arc<rustls::ClientConfig>>,
    timeout: Duration,
}

impl HttpsConnector {
    pub fn new(config: Option<Arc<rustls::ClientConfig>>, timeout: Duration) -> HttpsConnector {
        HttpsConnector { config, timeout }
    }

    /// The scheme of the URIs it connects to.
    pub fn scheme(&self) -> &'static str {
        if self.config.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

impl tower_service::Service<axum::http::Uri> for HttpsConnector {
    type Response = Https;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn std::future::Future<Output = std::io::Result<Https>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: axum::http::Uri) -> Self::Future {
        let (config, timeout) = (self.config.clone(), self.timeout);
        Box::pin(async move {
            let invalid = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{uri}: {why}"));
            let host = uri.host().ok_or_else(|| invalid("no host"))?.trim_matches(|c| c == '[' || c == ']').to_string();
            let connect = async {
                match (uri.scheme_str(), config) {
                    (Some("https"), Some(config)) => {
                        let name = ServerName::try_from(host.clone()).map_err(|_| invalid("not a server name"))?;
                        let tcp = TcpStream::connect((host.as_str(), uri.port_u16().unwrap_or(443))).await?;
                        tcp.set_nodelay(true)?;
                        Ok(Https::Tls(Box::new(TokioIo::new(TlsConnector::from(config).connect(name, tcp).await?))))
                    }
                    (Some("http"), None) => {
                        let tcp = TcpStream::connect((host.as_str(), uri.port_u16().unwrap_or(80))).await?;
                        tcp.set_nodelay(true)?;
                        Ok(Https::Plain(TokioIo::new(tcp)))
                    }
                    _ => Err(invalid("the scheme is not this connector's")),
                }
            };
            tokio::time::timeout(timeout, connect)
                .await
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connecting"))?
        })
    }
}
