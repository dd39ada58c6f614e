//! `GET /v1/invocations`: a book's root invocations, filtered, with their times, trace
//! and breakdown; `GET /v1/invocations/{id}/steps`: an invocation's logged steps, their
//! values decoded (`tally_durable::decoded`: JSON, the SDKs' integers, text, else hex).

use tally_durable::{decoded, ListFilter, StepView};

use super::*;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    #[serde(default)]
    book: u64,
    function: Option<String>,
    status: Option<String>,
    /// The invocation's key (`?key=`) or its idempotency key.
    key: Option<String>,
    /// Started at or after / before (milliseconds since the Unix epoch).
    since_ms: Option<u64>,
    until_ms: Option<u64>,
    /// Took at least / at most (milliseconds; finished invocations only).
    min_ms: Option<u64>,
    max_ms: Option<u64>,
    limit: Option<usize>,
    /// `oldest` (the default) or `newest` first.
    order: Option<String>,
    /// The `next` of the page before: oldest first, where to go on from; newest first,
    /// where to go back from.
    after: Option<u64>,
    before: Option<u64>,
}

/// Invocations or steps a page holds at most.
const LIMIT_MAX: usize = 1_000;

fn limit_of(limit: Option<usize>) -> ApiResult<usize> {
    let limit = limit.unwrap_or(100);
    if limit == 0 || limit > LIMIT_MAX {
        return Err(RuntimeError::InvalidArgument(format!("limit {limit}: 1 to {LIMIT_MAX}")).into());
    }
    Ok(limit)
}

/// Bytes as the API shows values and keys: `{"encoding", "text"}`.
pub(super) fn shown(bytes: &[u8]) -> serde_json::Value {
    let (encoding, text) = decoded(bytes);
    json!({ "encoding": encoding, "text": text })
}

/// The version numbers of the versions the registry knows, by their manifests' seqnums
/// (what an invocation's Init names).
pub(super) fn version_numbers(rt: &Runtime) -> std::collections::HashMap<u64, u32> {
    rt.registry.list().iter().flat_map(|f| f.versions.iter().map(|v| (v.seqnum, v.version))).collect()
}

/// A breakdown as `{part: microseconds}`.
fn breakdown(parts: &[(String, u64)]) -> serde_json::Value {
    serde_json::Value::Object(parts.iter().map(|(p, us)| (p.clone(), json!(us))).collect())
}

/// A book's root invocations in the order they started (`?order=newest`: the newest
/// first), what garbage collection kept of them: `{"invocations": [{"invocation_id",
/// "function", "status", ...}], "next"}`, `next` being the `after` (newest first, the
/// `before`) of the next page (null at the end).
#[tracing::instrument(name = "http.invocations", skip_all)]
pub(super) async fn list(
    State(rt): State<Arc<Runtime>>,
    ApiQuery(q): ApiQuery<ListQuery>,
    headers: HeaderMap,
    _: NoBody,
) -> ApiResult<Response> {
    let book = user_book(q.book)?;
    let mut ctx = position_of(&headers)?;
    const STATUSES: [&str; 4] = ["running", "sleeping", "succeeded", "failed"];
    if let Some(s) = q.status.as_deref().filter(|s| !STATUSES.contains(s)) {
        return Err(RuntimeError::InvalidArgument(format!("status {s:?}: one of {}", STATUSES.join(", "))).into());
    }
    let limit = limit_of(q.limit)?;
    let (newest_first, cursor) = match (q.order.as_deref(), q.after, q.before) {
        (None | Some("oldest"), after, None) => (false, after.unwrap_or(0)),
        (Some("newest"), None, before) => (true, before.unwrap_or(u64::MAX)),
        (None | Some("oldest" | "newest"), ..) => {
            let why = "`after` goes on oldest first, `before` newest first (`order=newest`)";
            return Err(RuntimeError::InvalidArgument(why.into()).into());
        }
        (Some(other), ..) => return Err(RuntimeError::InvalidArgument(format!("order {other:?}: oldest or newest")).into()),
    };
    let filter = ListFilter {
        function: q.function,
        status: q.status,
        key: q.key,
        since_ms: q.since_ms,
        until_ms: q.until_ms,
        min_duration_ms: q.min_ms,
        max_duration_ms: q.max_ms,
        as_of: None,
        newest_first,
    };
    let (listed, next) = rt.invocations().list(&mut ctx, book, &filter, cursor, limit).await?;
    let numbers = version_numbers(&rt);
    let invocations: Vec<serde_json::Value> = listed
        .iter()
        .map(|l| {
            let mut v = json!({
                "invocation_id": l.id.to_string(),
                "function": l.function,
                "version": numbers.get(&l.version),
                "version_seqnum": l.version,
                "status": l.status.name(),
                "seqnum": l.seqnum,
                "key": l.key,
                "started_at_ms": l.started_ms,
                "ended_at_ms": l.ended_ms,
                "duration_ms": l.started_ms.zip(l.ended_ms).map(|(s, e)| e.saturating_sub(s)),
                "trace_id": l.trace.map(|t| t.trace_hex()),
                "breakdown_us": breakdown(&l.parts),
            });
            match l.status {
                ListedStatus::Sleeping { wake_ms } => v["wake_at_ms"] = wake_at(wake_ms),
                ListedStatus::Failed(code) => v["error_code"] = json!(code),
                _ => {}
            }
            v
        })
        .collect();
    Ok(with_position(Json(json!({ "book": book.0, "invocations": invocations, "next": next })).into_response(), &ctx))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StepsQuery {
    #[serde(default)]
    book: u64,
    /// The first step of the page (the `next` of the page before).
    #[serde(default)]
    after: u64,
    limit: Option<usize>,
}

fn step_json(s: &StepView) -> serde_json::Value {
    json!({
        "seqnum": s.seqnum,
        "step": s.step,
        "kind": s.kind,
        "table": s.table,
        "key": s.key.as_deref().map(shown),
        "protocol": s.protocol,
        "value": s.value.as_deref().map(shown),
        "error": s.error,
        "child": s.child,
        "function": s.function,
        "attempt": s.attempt,
        "detail": s.detail,
    })
}

/// `{"invocation_id", "book", "started_at_ms", "ended_at_ms", "trace_id",
/// "breakdown_us", "steps": [...], "next"}`.
#[tracing::instrument(name = "http.steps", skip_all)]
pub(super) async fn steps(
    State(rt): State<Arc<Runtime>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<StepsQuery>,
    headers: HeaderMap,
    _: NoBody,
) -> ApiResult<Response> {
    let book = user_book(q.book)?;
    let mut ctx = position_of(&headers)?;
    let limit = limit_of(q.limit)?;
    let page = rt.invocations().steps(&mut ctx, book, &id, q.after, limit).await?;
    let (began, ended) = (page.began.unwrap_or_default(), page.ended.unwrap_or_default());
    let body = json!({
        "invocation_id": id,
        "book": book.0,
        "started_at_ms": began.started_ms,
        "ended_at_ms": ended.ended_ms,
        "trace_id": began.trace.or(ended.trace).map(|t| t.trace_hex()),
        "breakdown_us": breakdown(&ended.parts),
        "steps": page.steps.iter().map(step_json).collect::<Vec<_>>(),
        "next": page.next,
    });
    Ok(with_position(Json(body).into_response(), &ctx))
}
