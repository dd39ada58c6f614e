//! Calls out: `wasi:http/outgoing-handler`, recorded. The request's resources are
//! wasmtime-wasi-http's; its `handle` is ours, an async host function, so that the
//! exactly-once core sees the call in the guest's order before anything is sent:
//!
//! 1. The destination is checked against the function's allow-list (`outbound.rs`);
//!    a refusal is `HTTP-request-denied` to the guest and a line in its log.
//! 2. `Attempt::outcall` logs what the request may depend on and counts the call; an
//!    earlier execution's logged response, if any, is what the guest gets, and nothing
//!    is sent.
//! 3. wasmtime-wasi-http builds the request and calls [`Outgoing::send_request`], which
//!    returns the future the guest polls: it takes the request's body as the guest
//!    writes it, resolves the host, checks every address, connects to one it checked
//!    (TLS with the system's roots for `https`), sends with an `Idempotency-Key` derived
//!    from the invocation and the call (unless the guest set one), reads the response
//!    up to the node's limit, and logs it before the guest sees it.
//!
//! A failure to log (the log unavailable) fails the call to the guest and marks the
//! attempt failed ([`Outgoing::failed`]): its outcome is not taken, and the invocation
//! runs again, which sends the call again with the same key.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use tally_durable::{Outcall, OutcallOutcome};
use tokio::sync::Semaphore;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::p2::bindings::http::outgoing_handler::Host as _;
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::p2::types::{HostFutureIncomingResponse, HostOutgoingRequest};
use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttp, WasiHttpHooks, WasiHttpView};

use super::HostState;
use crate::limits::NodeLimits;
use crate::message::{Fields, HttpResponse};
use crate::metrics::Metrics;
use crate::outbound::{split_host_port, Destination, Outbound};

/// The version of wasi:http the handler is defined at: guests of any earlier 0.2
/// version link to it too.
const OUTGOING_HANDLER: &str = "wasi:http/outgoing-handler@0.2.12";

/// What every instance of a node shares for its calls out.
pub(super) struct OutgoingNode {
    in_flight: Semaphore,
    timeout: Duration,
    response_bytes_max: usize,
    request_bytes_max: usize,
    /// Names answered here instead of by DNS (`[node] outgoing_hosts`).
    hosts: std::collections::BTreeMap<String, Vec<IpAddr>>,
    tls: OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
}

impl OutgoingNode {
    pub(super) fn new(limits: &NodeLimits) -> OutgoingNode {
        OutgoingNode {
            in_flight: Semaphore::new(limits.outgoing_in_flight_max as usize),
            timeout: Duration::from_millis(limits.outgoing_timeout_ms_max),
            response_bytes_max: limits.outgoing_response_bytes_max as usize,
            request_bytes_max: limits.outgoing_request_bytes_max as usize,
            hosts: limits.outgoing_hosts.iter().map(|(name, ips)| (name.to_ascii_lowercase(), ips.clone())).collect(),
            tls: OnceLock::new(),
        }
    }

    /// TLS with the roots of the system's store (`/etc/ssl/certs`), loaded once.
    fn tls(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        self.tls
            .get_or_init(|| {
                let mut roots = rustls::RootCertStore::empty();
                let pem = ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"]
                    .iter()
                    .find_map(|p| std::fs::read(p).ok())
                    .ok_or("no CA certificates in /etc/ssl/certs: install ca-certificates")?;
                use rustls::pki_types::pem::PemObject;
                for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem).flatten() {
                    let _ = roots.add(cert);
                }
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| e.to_string())?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                Ok(Arc::new(config))
            })
            .clone()
    }
}

/// One instance's calls out: the hooks wasmtime-wasi-http calls.
pub(super) struct Outgoing {
    node: Arc<OutgoingNode>,
    outbound: Arc<Outbound>,
    /// What `handle` decided for the call it hands to wasmtime-wasi-http, which calls
    /// `send_request` at once.
    decision: Option<(Destination, Outcall)>,
    /// Why a call's outcome could not be logged: the attempt ends with it.
    pub(super) failed: Arc<Mutex<Option<tally_durable::Error>>>,
    /// Refusals and failed calls, lines of the function's log.
    pub(super) refusals: Arc<Mutex<Vec<String>>>,
    /// How long the call being handed over waited for its decision, for the metrics.
    waited: Duration,
    metrics: Arc<Metrics>,
    function: String,
}

impl Outgoing {
    pub(super) fn new(node: Arc<OutgoingNode>, outbound: Arc<Outbound>, metrics: Arc<Metrics>, function: String) -> Outgoing {
        Outgoing {
            node,
            outbound,
            decision: None,
            failed: Arc::default(),
            refusals: Arc::default(),
            waited: Duration::ZERO,
            metrics,
            function,
        }
    }
}

/// wasi:http's types from wasmtime-wasi-http, and our `handle`.
pub(super) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let options = wasmtime_wasi_http::p2::bindings::LinkOptions::default();
    wasmtime_wasi_http::p2::bindings::http::types::add_to_linker::<_, WasiHttp>(
        linker,
        &options.into(),
        <HostState as WasiHttpView>::http,
    )?;
    linker.instance(OUTGOING_HANDLER)?.func_wrap_async(
        "handle",
        |mut store, (request, options): (Resource<HostOutgoingRequest>, Option<Resource<RequestOptions>>)| {
            Box::new(async move { Ok((handle(store.data_mut(), request, options).await?,)) })
        },
    )?;
    Ok(())
}

async fn handle(
    state: &mut HostState,
    request: Resource<HostOutgoingRequest>,
    options: Option<Resource<RequestOptions>>,
) -> wasmtime::Result<Result<Resource<HostFutureIncomingResponse>, ErrorCode>> {
    let (what, scheme, host, port) = describe(state.table.get(&request)?);
    let destination = match state.outgoing.outbound.check(&scheme, &host, port) {
        Ok(d) => d.clone(),
        Err(why) => {
            state.outgoing.refusals.lock().expect("refusals lock").push(format!("refused {what}: {why}"));
            return Ok(Err(ErrorCode::HttpRequestDenied));
        }
    };
    let started = std::time::Instant::now();
    let decision = state.inv().attempt.outcall(&what).await?;
    state.outgoing.waited = started.elapsed();
    state.outgoing.decision = Some((destination, decision));
    let handled = state.http().handle(request, options);
    state.outgoing.decision = None;
    match handled {
        Ok(response) => Ok(Ok(response)),
        Err(e) => e.downcast().map(Err),
    }
}

/// The host and port a guest's request names in its authority (port 0 for none that
/// parses), which the allow-list is checked against.
pub(crate) fn origin(scheme: &str, authority: &str) -> (String, u16) {
    let default_port = if scheme == "http" { 80 } else { 443 };
    match split_host_port(authority) {
        Some((host, Some(port))) => (host.to_string(), port.parse().unwrap_or(0)),
        Some((host, None)) => (host.to_string(), default_port),
        None => (authority.to_string(), 0),
    }
}

/// `METHOD scheme://host:port/path`, and the origin.
fn describe(r: &HostOutgoingRequest) -> (String, String, String, u16) {
    use wasmtime_wasi_http::p2::bindings::http::types::{Method, Scheme};
    let scheme = match &r.scheme {
        Some(Scheme::Http) => "http".to_string(),
        Some(Scheme::Https) | None => "https".to_string(),
        Some(Scheme::Other(s)) => s.to_ascii_lowercase(),
    };
    let authority = r.authority.clone().unwrap_or_default();
    let (host, port) = origin(&scheme, &authority);
    let method = match &r.method {
        Method::Get => "GET",
        Method::Head => "HEAD",
        Method::Post => "POST",
        Method::Put => "PUT",
        Method::Delete => "DELETE",
        Method::Connect => "CONNECT",
        Method::Options => "OPTIONS",
        Method::Trace => "TRACE",
        Method::Patch => "PATCH",
        Method::Other(m) => m.as_str(),
    };
    let path = r.path_with_query.as_deref().unwrap_or("/");
    (format!("{method} {scheme}://{authority}{path}"), scheme, host, port)
}

type SendResult =
    wasmtime_wasi_http::Result<(http::Response<WasiBody>, Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>)>;

impl WasiHttpHooks for Outgoing {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        let decision = self.decision.take();
        let node = self.node.clone();
        let failed = self.failed.clone();
        let refusals = self.refusals.clone();
        let (metrics, function, waited) = (self.metrics.clone(), self.function.clone(), self.waited);
        // The exchange runs on a task of its own: it is measured on the probe of the
        // execution that asked for it.
        let probe = crate::observe::current();
        let work = async move {
            let to = decision.as_ref().map(|(to, _)| to.to_string()).unwrap_or_default();
            let outcome = match decision {
                // Only `handle` hands wasmtime-wasi-http a request.
                None => return Err(wasmtime_wasi_http::Error::HttpRequestDenied),
                Some((_, Outcall::Logged(outcome))) => {
                    // The guest may write its body after `handle` (wasi:http allows it):
                    // what it writes is taken and dropped, as an answered request's would
                    // be, so its writes do not fail because the answer came first.
                    let (limit, timeout) = (node.request_bytes_max, node.timeout);
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(timeout, Limited::new(request.into_body(), limit).collect()).await;
                    });
                    outcome
                }
                Some((to, Outcall::Send(slot))) => {
                    let started = std::time::Instant::now();
                    let frame = crate::observe::enter_with(crate::observe::Part::Outgoing, || to.to_string());
                    let mut request = request;
                    if let Some(parent) = frame.traceparent() {
                        if let Ok(v) = http::HeaderValue::from_str(&parent) {
                            request.headers_mut().entry("traceparent").or_insert(v);
                        }
                    }
                    let outcome = send(&node, &to, request, options, slot.idempotency_key()).await;
                    drop(frame);
                    let sent = started.elapsed();
                    let logged = slot.log(outcome).await;
                    metrics.sent_out(&function, waited, sent, started.elapsed() - sent);
                    match logged {
                        Ok(outcome) => outcome,
                        Err(abort) => {
                            let why = format!("logging an outgoing call's response failed: {abort}");
                            *failed.lock().expect("failed lock") = Some(abort.into_error());
                            return Err(wasmtime_wasi_http::Error::InternalError(Some(why)));
                        }
                    }
                }
            };
            if let OutcallOutcome::Failed(why) = &outcome {
                refusals.lock().expect("refusals lock").push(format!("a request to {to} failed: {why}"));
            }
            let response = to_guest(outcome)?;
            let worker = Box::new(async { Ok(()) }) as Box<dyn Future<Output = _> + Send>;
            Ok((response, worker))
        };
        Box::new(async move {
            match probe {
                Some(p) => crate::observe::within(p, work).await,
                None => work.await,
            }
        })
    }
}

/// What an outcome is to the guest: the response, or the error it got.
fn to_guest(outcome: OutcallOutcome) -> wasmtime_wasi_http::Result<http::Response<WasiBody>> {
    use wasmtime_wasi_http::Error as E;
    let bytes = match outcome {
        OutcallOutcome::Response(bytes) => bytes,
        OutcallOutcome::Failed(why) => {
            let (code, message) = why.split_once(": ").unwrap_or((why.as_str(), ""));
            return Err(match code {
                "denied" => E::HttpRequestDenied,
                "dns" => E::DnsError { rcode: Some(message.to_string()), info_code: None },
                "refused" => E::ConnectionRefused,
                "connect-timeout" => E::ConnectionTimeout,
                "timeout" => E::HttpResponseTimeout,
                "response-too-large" => E::HttpResponseBodySize(message.parse().ok()),
                "request-too-large" => E::HttpRequestBodySize(message.parse().ok()),
                "tls" => E::TlsProtocolError,
                "protocol" => E::HttpProtocolError,
                _ => E::InternalError(Some(why.clone())),
            });
        }
    };
    let decoded = HttpResponse::decode(&bytes).ok_or(E::InternalError(Some("a logged response does not decode".into())))?;
    let mut response = http::Response::builder().status(decoded.status);
    for (name, value) in &decoded.headers {
        response = response.header(name.as_str(), value.as_slice());
    }
    let body = Full::new(Bytes::from(decoded.body)).map_err(|never| match never {}).boxed_unsync();
    response.body(body).map_err(|e| E::InternalError(Some(e.to_string())))
}

/// Sends `request` to `to` and reads the response: its outcome as the log keeps it.
async fn send(
    node: &OutgoingNode,
    to: &Destination,
    request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    key: String,
) -> OutcallOutcome {
    let failed = |code: &str, message: String| OutcallOutcome::Failed(format!("{code}: {message}"));
    let cap = |t: Option<Duration>| t.unwrap_or(node.timeout).min(node.timeout);
    let options = options.unwrap_or_default();
    let (connect_timeout, first_byte_timeout, between_bytes_timeout) =
        (cap(options.connect_timeout), cap(options.first_byte_timeout), cap(options.between_bytes_timeout));
    let Ok(_permit) = tokio::time::timeout(node.timeout, node.in_flight.acquire()).await else {
        return failed("busy", "this node has too many calls out in flight".into());
    };
    let (mut parts, body) = request.into_parts();
    // The body as the guest writes it, whole (it is small: at most the node's limit),
    // which a guest that never finishes it does not hold up for ever.
    let body = match tokio::time::timeout(node.timeout, Limited::new(body, node.request_bytes_max).collect()).await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(_)) => return failed("request-too-large", node.request_bytes_max.to_string()),
        Err(_) => return failed("timeout", format!("the request's body was not finished within {:?}", node.timeout)),
    };
    if !parts.headers.contains_key("idempotency-key") {
        if let Ok(v) = http::HeaderValue::from_str(&key) {
            parts.headers.insert("idempotency-key", v);
        }
    }
    // Resolve, check every address, connect to one that passed.
    let resolved = match node.hosts.get(&to.host) {
        Some(pinned) => pinned.clone(),
        None => match tokio::time::timeout(connect_timeout, tokio::net::lookup_host((to.host.as_str(), to.port))).await {
            Ok(Ok(addrs)) => addrs.map(|a| a.ip()).collect::<Vec<IpAddr>>(),
            Ok(Err(e)) => return failed("dns", format!("{}: {e}", to.host)),
            Err(_) => return failed("dns", format!("{}: no answer within {connect_timeout:?}", to.host)),
        },
    };
    let addrs = match Outbound::reachable(to, &resolved) {
        Ok(a) => a,
        Err(why) => return failed("denied", why),
    };
    let tcp = match tokio::time::timeout(connect_timeout, connect(&addrs, to.port)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return failed("refused", format!("{to}: {e}")),
        Err(_) => return failed("connect-timeout", format!("{to}: no connection within {connect_timeout:?}")),
    };
    let _ = tcp.set_nodelay(true);
    let request = http::Request::from_parts(parts, Full::new(body));
    let exchange = async {
        let response = match to.scheme.as_str() {
            "https" => {
                let config = node.tls().map_err(|e| ("tls", e))?;
                let name = rustls::pki_types::ServerName::try_from(to.host.clone()).map_err(|e| ("tls", e.to_string()))?;
                let tls =
                    tokio_rustls::TlsConnector::from(config).connect(name, tcp).await.map_err(|e| ("tls", e.to_string()))?;
                exchange(tls, request).await?
            }
            _ => exchange(tcp, request).await?,
        };
        Ok::<_, (&str, String)>(response)
    };
    let response = match tokio::time::timeout(first_byte_timeout, exchange).await {
        Ok(Ok(r)) => r,
        Ok(Err((code, message))) => return failed(code, message),
        Err(_) => return failed("timeout", format!("{to} sent no response within {first_byte_timeout:?}")),
    };
    let (parts, mut body) = response.into_parts();
    let mut bytes = Vec::new();
    loop {
        match tokio::time::timeout(between_bytes_timeout, body.frame()).await {
            Ok(None) => break,
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if bytes.len() + data.len() > node.response_bytes_max {
                        return failed("response-too-large", node.response_bytes_max.to_string());
                    }
                    bytes.extend_from_slice(&data);
                }
            }
            Ok(Some(Err(e))) => return failed("protocol", format!("{to}: {e}")),
            Err(_) => return failed("timeout", format!("{to} paused its response for {between_bytes_timeout:?}")),
        }
    }
    let headers: Fields = parts.headers.iter().map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec())).collect();
    let response = HttpResponse { status: parts.status.as_u16(), headers, body: bytes, trailers: None };
    OutcallOutcome::Response(response.encode().into())
}

/// The first of `addrs` that accepts a connection.
async fn connect(addrs: &[IpAddr], port: u16) -> std::io::Result<tokio::net::TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for ip in addrs {
        match tokio::net::TcpStream::connect(SocketAddr::new(*ip, port)).await {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// One HTTP/1.1 exchange over `io`.
async fn exchange<S>(
    io: S,
    request: http::Request<Full<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, (&'static str, String)>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(io)).await.map_err(|e| ("protocol", e.to_string()))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    // The request's target is its path: the connection is the authority's already.
    let (mut parts, body) = request.into_parts();
    if let Some(path) = parts.uri.path_and_query().cloned() {
        parts.uri = path.into();
    }
    sender.send_request(http::Request::from_parts(parts, body)).await.map_err(|e| ("protocol", e.to_string()))
}
