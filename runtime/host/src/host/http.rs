//! HTTP functions: a component that exports `wasi:http/incoming-handler` (the
//! `wasi:http/proxy` world, as `wasmtime serve` runs it) serves one request per
//! invocation. The request arrives encoded in the invocation's input
//! ([`HttpRequest`], `message.rs`); its response, status, headers, body and trailers,
//! is collected whole, up to the function's `response_bytes_max`, and becomes the
//! invocation's output ([`HttpResponse`]): the output the exactly-once core logs and a
//! re-execution or a retried request gets back. Nothing reaches the client before the
//! guest has finished the body, so a response over the limit is refused whole, with a
//! clear error, before anything is sent.
//!
//! An input that is not an encoded request (a plain `POST /v1/functions/{name}/invoke`)
//! is served as a `POST /` with that body.
//!
//! The guest's calls out (`wasi:http/outgoing-handler`) are `outgoing.rs`'s.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmtime::component::ResourceTable;
use wasmtime::Store;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpView};

use super::HostState;
use crate::message::{Fields, HttpRequest, HttpResponse};

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.outgoing }
    }
}

/// The response's body grew past the function's `response_bytes_max`.
#[derive(Debug)]
pub(super) struct ResponseTooLarge {
    pub limit: u64,
}

impl std::fmt::Display for ResponseTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the response body grew past {} bytes", self.limit)
    }
}

impl std::error::Error for ResponseTooLarge {}

/// Instantiates `pre` in `store` and serves the request `input` encodes; returns the
/// encoded response, or the guest's failure to give one. `instantiated` is set to how
/// long instantiation took.
pub(super) async fn serve(
    pre: &ProxyPre<HostState>,
    store: &mut Store<HostState>,
    input: &[u8],
    limit: u64,
    instantiated: &mut Option<Duration>,
) -> wasmtime::Result<Result<Vec<u8>, String>> {
    let request = HttpRequest::decode(input).unwrap_or_else(|| HttpRequest::post(input.to_vec()));
    let (scheme, request) = match to_hyper(request) {
        Ok(r) => r,
        Err(e) => return Ok(Err(format!("not a valid HTTP request: {e}"))),
    };
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let mut http = store.data_mut().http();
    let request = http.new_incoming_request(scheme, request)?;
    let out = http.new_response_outparam(sender)?;
    let started = Instant::now();
    let making = crate::observe::enter(crate::observe::Part::Instantiate);
    let proxy = pre.instantiate_async(&mut *store).await?;
    drop(making);
    *instantiated = Some(started.elapsed());
    // The body is read while the guest writes it: a body larger than the channel's
    // buffer is written by a guest that waits for the reader.
    let collected = tokio::spawn(collect(receiver, limit));
    let guest = crate::observe::enter(crate::observe::Part::Guest);
    let called = proxy.wasi_http_incoming_handler().call_handle(&mut *store, request, out).await;
    drop(guest);
    // Whatever the guest left open it can no longer finish: dropping the host's side of
    // its resources ends a body it did not finish.
    store.data_mut().table = ResourceTable::new();
    let collected = collected.await.map_err(|e| wasmtime::format_err!("collecting the response: {e}"))?;
    called?;
    collected
}

/// The request as wasi:http's host takes it.
pub(crate) fn to_hyper(r: HttpRequest) -> Result<(Scheme, http::Request<Full<Bytes>>), http::Error> {
    let scheme = if r.scheme.eq_ignore_ascii_case("https") { Scheme::Https } else { Scheme::Http };
    let uri = http::Uri::builder()
        .scheme(r.scheme.as_str())
        .authority(r.authority.as_str())
        .path_and_query(r.path_with_query.as_str())
        .build()?;
    let mut builder = http::Request::builder().method(r.method.as_bytes()).uri(uri);
    for (name, value) in &r.headers {
        builder = builder.header(name.as_str(), value.as_slice());
    }
    Ok((scheme, builder.body(Full::new(Bytes::from(r.body)))?))
}

/// Waits for the guest's response and reads its body, up to `limit` bytes.
async fn collect(
    receiver: tokio::sync::oneshot::Receiver<Result<http::Response<HyperOutgoingBody>, ErrorCode>>,
    limit: u64,
) -> wasmtime::Result<Result<Vec<u8>, String>> {
    let response = match receiver.await {
        Ok(Ok(response)) => response,
        Ok(Err(code)) => return Ok(Err(format!("the function answered with the error {code:?}"))),
        Err(_) => return Ok(Err("the function returned without setting a response".into())),
    };
    let (parts, mut body) = response.into_parts();
    let mut bytes = Vec::new();
    let mut trailers = None;
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) => return Ok(Err(format!("the response body was not finished: {e}"))),
        };
        match frame.into_data() {
            Ok(data) => {
                if (bytes.len() + data.len()) as u64 > limit {
                    return Err(ResponseTooLarge { limit }.into());
                }
                bytes.extend_from_slice(&data);
            }
            Err(frame) => {
                if let Ok(t) = frame.into_trailers() {
                    trailers = Some(fields(&t));
                }
            }
        }
    }
    let response = HttpResponse { status: parts.status.as_u16(), headers: fields(&parts.headers), body: bytes, trailers };
    Ok(Ok(response.encode()))
}

fn fields(map: &http::HeaderMap) -> Fields {
    map.iter().map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec())).collect()
}
