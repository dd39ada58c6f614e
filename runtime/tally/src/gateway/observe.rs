//! Each invocation request is measured: a probe from its arrival (in the trace its
//! `traceparent` names, a new one otherwise; a malformed header is ignored) to its
//! answer, which says where the time went (`Server-Timing`) and the trace
//! (`Tally-Trace-Id`, and `traceresponse`, W3C Trace Context level 2, to a caller that
//! sent a `traceparent`).

use std::future::Future;

use tally_host::observe::{self, traceparent, Part};

use super::*;

pub(super) const TRACE_ID: &str = "tally-trace-id";

/// The request's `traceparent`, taken before its headers move on.
pub(super) fn parent_of(headers: &HeaderMap) -> Option<HeaderValue> {
    headers.get("traceparent").cloned()
}

/// Runs `answer`, the handling of an invocation request named `span` (its method and
/// route) whose `traceparent` was `parent`, under a probe of its own, and adds the
/// probe's headers to its response.
pub(super) async fn observed(
    rt: &Runtime,
    parent: Option<HeaderValue>,
    span: String,
    answer: impl Future<Output = ApiResult<Response>>,
) -> ApiResult<Response> {
    if !observe::ENABLED {
        return answer.await;
    }
    let probe = rt.observer.request(parent.as_ref().and_then(|v| v.to_str().ok()));
    let mut response = observe::within(probe.clone(), answer).await.unwrap_or_else(IntoResponse::into_response);
    let trace = probe.trace();
    let status = response.status().as_u16();
    let out = response.headers_mut();
    // `traceresponse` for a caller that traces (it sent a `traceparent`): the others
    // have the trace ID, in fewer bytes.
    let traced = parent.is_some().then(|| ("traceresponse", traceparent(&trace)));
    let parts = probe.parts();
    for (name, value) in [("server-timing", probe.server_timing(&parts)), (TRACE_ID, trace.trace_hex())].into_iter().chain(traced)
    {
        if let Ok(v) = HeaderValue::from_str(&value) {
            out.insert(name, v);
        }
    }
    rt.observer.finish(&probe, &parts, &span, 2, || vec![("http.response.status_code", status.to_string())]);
    Ok(response)
}

/// Waits for `admitted` as the request's `queue` time.
pub(super) async fn queued<T>(admitted: impl Future<Output = T>) -> T {
    let _frame = observe::enter(Part::Queue);
    admitted.await
}
