//! `GET /v1/logs`: the logs of functions on this node (`tally_host::LogStore`), a page
//! as JSON, or with `follow=true` a stream of JSON lines that goes on with new entries
//! until the client leaves.

use std::collections::VecDeque;

use futures_util::stream;
use tally_host::{LogEntry, LogQuery};

use super::*;

/// Entries a page holds at most.
const LIMIT_MAX: usize = 10_000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LogsQuery {
    function: Option<String>,
    id: Option<String>,
    /// Entries written at or after this time (milliseconds since the Unix epoch).
    since_ms: Option<u64>,
    /// Entries stored after this one (a `seq`).
    after: Option<u64>,
    limit: Option<usize>,
    #[serde(default)]
    follow: bool,
}

#[tracing::instrument(name = "http.logs", skip_all)]
pub(super) async fn logs(State(rt): State<Arc<Runtime>>, ApiQuery(q): ApiQuery<LogsQuery>, _: NoBody) -> ApiResult<Response> {
    let limit = q.limit.unwrap_or(100).min(LIMIT_MAX);
    if limit == 0 {
        return Err(RuntimeError::InvalidArgument("limit must be at least 1".into()).into());
    }
    let query = LogQuery { function: q.function, id: q.id, since_ms: q.since_ms, after: q.after, limit };
    if !q.follow {
        let (entries, next) = rt.logs.query(&query);
        return Ok(Json(json!({ "entries": entries, "next": next })).into_response());
    }
    // Subscribed before the first page, so that nothing stored in between is missed.
    let watch = rt.logs.watch();
    let (entries, next) = rt.logs.query(&query);
    // Past the first page, pages as large as they come; a full one is followed by the
    // next at once, without waiting for a change.
    let query = LogQuery { after: Some(next), limit: LIMIT_MAX, ..query };
    let state = (rt, watch, query, VecDeque::from(entries), false);
    let lines = stream::unfold(state, |(rt, mut watch, mut query, mut pending, mut more)| async move {
        loop {
            if let Some(entry) = pending.pop_front() {
                return Some((Ok::<_, std::convert::Infallible>(line(&entry)), (rt, watch, query, pending, more)));
            }
            if !more {
                watch.changed().await.ok()?;
            }
            let (entries, next) = rt.logs.query(&query);
            more = entries.len() == query.limit;
            query.after = Some(next);
            pending.extend(entries);
        }
    });
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], axum::body::Body::from_stream(lines)).into_response())
}

fn line(entry: &LogEntry) -> Bytes {
    let mut bytes = serde_json::to_vec(entry).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}
