//! The gateway role of a cluster: an HTTP front that routes every request of the API to
//! a function node, found through etcd.
//!
//! - **Where**: a request that names a book (`?book=N` on an invocation, or
//!   `/v1/books/N/...`) goes first to the function nodes that index the book's physical
//!   log (`Configuration::indexers_of`), whose reads need no forwarding; the others
//!   follow, and requests are spread round-robin within each group. In partial mode the
//!   book's owner among them (rendezvous hashing, as `TermPeers` picks the node doing a
//!   book's background work) comes first, so its invocations meet its local index.
//! - **Retries**: when a node cannot be reached, the request goes to the next node;
//!   so does a read (`GET`) or an invocation that a node answered with 503 or dropped
//!   midway. Anything else that reached a node (a deploy, a delete, a schedule's
//!   trigger, a cancellation) is not sent again: the node may have done it before it
//!   failed, and doing it twice is not doing it once. Every invocation the gateway
//!   forwards carries a key: the client's
//!   `Idempotency-Key`, or a `Tally-Retry-Key` the gateway draws. With the latter the
//!   invocation's ID comes from the key but it is initialised lazily, at its first
//!   `state` or `invoke` call, so effects a dying node had begun are finished once (by
//!   the retry, which finds its Init, or by the recovery scan), while a function
//!   without effects logs nothing and costs what a direct call does.
//!
//! - **Logs**: `GET /v1/logs` asks every function node and merges (`proxy/logs.rs`).
//!
//! The gateway holds no state of its own: the members and the configuration come from
//! etcd, so any number of gateways serve the same cluster.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tally_control::{ControlPlane, Member, MemberRole};
use tally_logsvc::{book_to_log, BookId, Configuration, NodeId};
use tokio::sync::watch;
use tracing::{debug, warn};

use crate::gateway::error_response;
use crate::tls::HttpsConnector;

mod logs;

/// The largest request body the gateway takes (a deploy's component; a node refuses
/// what is over its own limit).
const BODY_BYTES_MAX: usize = 128 << 20;
/// Request bodies held at once (each is kept whole, for a retry on another node), in
/// KiB: a request takes its share of this budget as its bytes come (a length it only
/// declares takes nothing), and waits while the budget is spent.
const BODY_BUDGET_KIB: usize = 1 << 20;
/// How long a client may leave the gateway waiting for the next piece of its body
/// (408 after it): an idle client holds its budget no longer.
const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one node gets to answer before the gateway tries the next; an invocation's
/// own timeout is far below.
const NODE_TIMEOUT: Duration = Duration::from_secs(300);
/// How often the gateway rereads the configuration (which nodes index which log).
const CONFIG_POLL: Duration = Duration::from_secs(1);
const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Headers that describe one connection, not the request: the gateway's own
/// connection to the node sets them (the body is forwarded whole, its length known).
const HOP_BY_HOP: [&str; 9] =
    ["host", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "content-length"];

pub struct Gateway {
    members: watch::Receiver<BTreeMap<NodeId, Member>>,
    config: watch::Receiver<Option<Arc<Configuration>>>,
    /// To the function nodes: over TLS, trusting the cluster's CA, if the gateway has
    /// one (`tls_ca_file`).
    client: Client<HttpsConnector, Body>,
    scheme: &'static str,
    bodies: Arc<tokio::sync::Semaphore>,
    next: AtomicU64,
    /// Distinguishes this gateway's keys from another's.
    key_prefix: String,
}

impl Gateway {
    pub async fn start(plane: ControlPlane, trust: Option<Arc<rustls::ClientConfig>>) -> anyhow::Result<Arc<Gateway>> {
        let members = plane.watch_members().await?;
        let (config_tx, config) = watch::channel(None);
        // Task config-poll: ends when the gateway is dropped (the receiver closes).
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(CONFIG_POLL);
            loop {
                tick.tick().await;
                match plane.load_config().await {
                    Ok(c) => {
                        if config_tx.send(c.map(|(c, _)| Arc::new(c))).is_err() {
                            return;
                        }
                    }
                    Err(e) => debug!(error = %e, "reading the configuration"),
                }
            }
        });
        let connector = HttpsConnector::new(trust, Duration::from_secs(1));
        let scheme = connector.scheme();
        let client = Client::builder(TokioExecutor::new()).pool_idle_timeout(Duration::from_secs(30)).build(connector);
        let key_prefix = format!("gw-{:x}-{:x}", std::process::id(), tally_logsvc::driver::new_incarnation());
        let bodies = Arc::new(tokio::sync::Semaphore::new(BODY_BUDGET_KIB));
        Ok(Arc::new(Gateway { members, config, client, scheme, bodies, next: AtomicU64::new(0), key_prefix }))
    }

    /// The function nodes to try for a request on `book`, best first.
    fn candidates(&self, book: Option<BookId>) -> Vec<(NodeId, String)> {
        let nodes: Vec<(NodeId, String)> = self
            .members
            .borrow()
            .values()
            .filter(|m| m.role == MemberRole::Engine)
            .filter_map(|m| Some((m.id, m.http.clone()?)))
            .collect();
        if nodes.is_empty() {
            return nodes;
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed) as usize;
        let rotate = |mut v: Vec<(NodeId, String)>| {
            if !v.is_empty() {
                let k = turn % v.len();
                v.rotate_left(k);
            }
            v
        };
        let (preferred, owner) = match (book, self.config.borrow().as_ref()) {
            (Some(book), Some(c)) => {
                let preferred = c.indexers_of(book_to_log(book, c.n_logs));
                // Partial mode: the book's owner among the function nodes of the current
                // version first, where its background work and local index are.
                let ids: Vec<u64> = preferred.iter().map(|n| u64::from(n.0)).collect();
                let owner = c.partial().then(|| tally_durable::owner(book, &ids)).flatten();
                (preferred, owner.map(|o| NodeId(o as u32)))
            }
            _ => (Vec::new(), None),
        };
        let (first, rest): (Vec<_>, Vec<_>) = nodes.into_iter().partition(|(id, _)| preferred.contains(id));
        let mut out = rotate(first);
        if let Some(i) = out.iter().position(|(id, _)| Some(*id) == owner) {
            out[..=i].rotate_right(1);
        }
        out.extend(rotate(rest));
        out
    }

    fn key(&self) -> String {
        format!("{}-{}", self.key_prefix, self.next.fetch_add(1, Ordering::Relaxed))
    }
}

pub fn router(gw: Arc<Gateway>) -> Router {
    Router::new().route("/v1/logs", axum::routing::get(logs::logs)).fallback(forward).with_state(gw)
}

/// The book a request names, if any: an HTTP function's request names it in a header
/// (its query is the function's).
fn book_of(uri: &Uri, headers: &axum::http::HeaderMap) -> Option<BookId> {
    let path = uri.path();
    if path.starts_with("/fn/") {
        return headers.get(crate::gateway::BOOK)?.to_str().ok()?.parse().ok().map(BookId);
    }
    if let Some(rest) = path.strip_prefix("/v1/books/") {
        return rest.split('/').next()?.parse().ok().map(BookId);
    }
    uri.query()?.split('&').find_map(|kv| kv.strip_prefix("book=")?.parse().ok().map(BookId))
}

/// Reads a request's whole body under the gateway's budget (see [`BODY_BUDGET_KIB`]);
/// the permits it returns hold the body's share until dropped.
async fn read_body(
    gw: &Gateway,
    declared: Option<usize>,
    mut body: Body,
) -> Result<(Bytes, Option<tokio::sync::OwnedSemaphorePermit>), Box<Response>> {
    let stopping = || Box::new(error_response(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the gateway is stopping".into()));
    let too_large = || {
        let msg = format!("the request body is over the gateway's {BODY_BYTES_MAX} bytes or was cut");
        Box::new(error_response(StatusCode::PAYLOAD_TOO_LARGE, "too_large", msg))
    };
    if declared.is_some_and(|d| d > BODY_BYTES_MAX) {
        return Err(too_large());
    }
    let mut held: Option<tokio::sync::OwnedSemaphorePermit> = None;
    let limit = declared.unwrap_or(BODY_BYTES_MAX);
    let mut bytes = bytes::BytesMut::new();
    loop {
        let frame = match tokio::time::timeout(BODY_IDLE_TIMEOUT, body.frame()).await {
            Ok(None) => break,
            Ok(Some(Ok(frame))) => frame,
            Ok(Some(Err(_))) => return Err(too_large()),
            Err(_) => {
                let msg = format!("no part of the request body came for {BODY_IDLE_TIMEOUT:?}");
                return Err(Box::new(error_response(StatusCode::REQUEST_TIMEOUT, "timeout", msg)));
            }
        };
        let Ok(data) = frame.into_data() else { continue };
        if bytes.len() + data.len() > limit {
            return Err(too_large());
        }
        let more = (bytes.len() + data.len()).div_ceil(1024) - bytes.len().div_ceil(1024);
        if more > 0 {
            let permit = gw.bodies.clone().acquire_many_owned(more as u32).await.map_err(|_| stopping())?;
            match held.as_mut() {
                Some(h) => h.merge(permit),
                None => held = Some(permit),
            }
        }
        bytes.extend_from_slice(&data);
    }
    Ok((bytes.freeze(), held))
}

/// Whether a request starts an invocation (which the gateway gives a key): an invoke,
/// or any request to an HTTP function.
fn is_invocation(method: &axum::http::Method, path: &str) -> bool {
    path.starts_with("/fn/") || (method == axum::http::Method::POST && path.ends_with("/invoke"))
}

/// Whether a request that reached a node which answered 503 or failed midway may go to
/// another node: what a node may have done before it failed is done again only where
/// that is safe, a read (`GET`) or a keyed invocation; never a deploy, a delete, a
/// schedule's trigger, a cancellation or a promise's completion.
fn resendable(method: &axum::http::Method, path: &str) -> bool {
    is_invocation(method, path) || method == axum::http::Method::GET
}

async fn forward(State(gw): State<Arc<Gateway>>, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    // Every route of the API needs a token on a cluster: one without is refused here,
    // before its body takes any of the budget (the nodes check the token itself). The
    // dashboard's cookie goes on as the token it holds (checked against this origin).
    let api = parts.uri.path().starts_with("/v1/") || parts.uri.path() == "/metrics";
    if api {
        if let Err(refused) = crate::auth::guard::forwarded_token(&mut parts.headers) {
            return *refused;
        }
    }
    // The dashboard's login and logout: the browser's origin is checked here, against
    // this gateway's, since the node sees the gateway's request, not the browser's.
    if parts.method == axum::http::Method::POST && parts.uri.path().starts_with("/ui/") {
        if let Some(why) = crate::auth::guard::cross_site(&parts.headers) {
            return error_response(StatusCode::FORBIDDEN, "forbidden", format!("refused a request from another site: {why}"));
        }
        parts.headers.remove(axum::http::header::ORIGIN);
        parts.headers.remove("sec-fetch-site");
    }
    let declared = parts.headers.get(axum::http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let (body, _budget) = match read_body(&gw, declared, body).await {
        Ok(read) => read,
        Err(response) => return *response,
    };
    let invocation = is_invocation(&parts.method, parts.uri.path());
    let resend = resendable(&parts.method, parts.uri.path());
    if invocation && !parts.headers.contains_key(IDEMPOTENCY_KEY) {
        let key = HeaderValue::from_str(&gw.key()).expect("a key is ascii");
        parts.headers.insert(crate::gateway::RETRY_KEY, key);
    }
    let path_and_query = parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| "/".into());
    let candidates = gw.candidates(book_of(&parts.uri, &parts.headers));
    if candidates.is_empty() {
        return error_response(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "no function node is registered".into());
    }
    let mut last = String::new();
    for (id, http) in &candidates {
        let uri: Uri = match format!("{}://{http}{path_and_query}", gw.scheme).parse() {
            Ok(u) => u,
            Err(e) => {
                warn!(%id, http, error = %e, "a member's http address is not usable");
                continue;
            }
        };
        let mut out = Request::builder().method(parts.method.clone()).uri(uri);
        for (name, value) in &parts.headers {
            if !HOP_BY_HOP.contains(&name.as_str()) {
                out = out.header(name, value);
            }
        }
        let out = out.body(Body::from(body.clone())).expect("a valid request");
        match tokio::time::timeout(NODE_TIMEOUT, gw.client.request(out)).await {
            // A 503 of the node's own (not a function's answer) may go to the next node.
            Ok(Ok(response))
                if response.status() != StatusCode::SERVICE_UNAVAILABLE
                    || !resend
                    || !response.headers().contains_key(crate::gateway::ERROR) =>
            {
                let (parts, body) = response.into_parts();
                return Response::from_parts(parts, Body::new(body));
            }
            Ok(Ok(response)) => {
                let (_, body) = response.into_parts();
                let text = body.collect().await.map(|b| b.to_bytes()).unwrap_or_else(|_| Bytes::new());
                last = format!("node {id} is unavailable: {}", String::from_utf8_lossy(&text).trim());
            }
            Ok(Err(e)) if e.is_connect() || resend => last = format!("node {id} at {http}: {e}"),
            Ok(Err(e)) => {
                let msg = format!("node {id} at {http} failed while it had the request (not sent again): {e}");
                return error_response(StatusCode::BAD_GATEWAY, "unavailable", msg);
            }
            Err(_) if resend => last = format!("node {id} at {http} did not answer within {NODE_TIMEOUT:?}"),
            Err(_) => {
                let msg = format!("node {id} at {http} did not answer within {NODE_TIMEOUT:?} (not sent again)");
                return error_response(StatusCode::GATEWAY_TIMEOUT, "timeout", msg);
            }
        }
        debug!(%id, reason = %last, "trying the next function node");
    }
    error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        format!("no function node could serve the request; last: {last}"),
    )
    .into_response()
}

/// Binds the gateway's HTTP listener.
pub async fn listen(addr: &str) -> anyhow::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("listening on {addr}: {e}"))?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn books_are_found_in_paths_and_queries() {
        let book = |s: &str| book_of(&s.parse().unwrap(), &axum::http::HeaderMap::new());
        assert_eq!(book("/v1/functions/f/invoke?book=7"), Some(BookId(7)));
        assert_eq!(book("/fn/f/x?book=7"), None, "an HTTP function's query is its own");
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(crate::gateway::BOOK, "5".parse().unwrap());
        assert_eq!(book_of(&"/fn/f/x?book=7".parse().unwrap(), &headers), Some(BookId(5)));
        assert_eq!(book("/v1/functions/f/invoke?async=true&book=9"), Some(BookId(9)));
        assert_eq!(book("/v1/books/12/records"), Some(BookId(12)));
        assert_eq!(book("/v1/functions/f/invoke?book=x"), None);
        assert_eq!(book("/v1/functions"), None);
    }

    /// Review finding 13: the gateway sent any request that got 503 to the next node, a
    /// schedule's trigger included, which the first node may have recorded before it
    /// failed: one trigger, two invocations.
    #[test]
    fn only_reads_and_keyed_invocations_are_sent_again() {
        use axum::http::Method;
        assert!(resendable(&Method::GET, "/v1/invocations/abc"));
        assert!(resendable(&Method::POST, "/v1/functions/hello/invoke"));
        assert!(resendable(&Method::DELETE, "/fn/web/orders/17"), "a request to an HTTP function is keyed");
        for (method, path) in [
            (Method::POST, "/v1/schedules/nightly/trigger"),
            (Method::PUT, "/v1/functions/hello"),
            (Method::DELETE, "/v1/functions/hello"),
            (Method::DELETE, "/v1/invocations/abc"),
            (Method::POST, "/v1/promises/abc"),
            (Method::PUT, "/v1/books/3/tables/t"),
        ] {
            assert!(!resendable(&method, path), "{method} {path} is not sent again");
        }
    }
}
