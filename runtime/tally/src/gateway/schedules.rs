//! The schedules' routes: a function invoked on a book at every tick of an interval or
//! a cron expression (see `tally_durable`'s `schedule.rs` for how each tick fires once).
//!
//! | route                                   | does                                                   |
//! |-----------------------------------------|--------------------------------------------------------|
//! | `PUT /v1/schedules/{name}`              | create or replace: 201 when new, 200 otherwise         |
//! | `GET /v1/schedules/{name}`, `GET /v1/schedules` | one; or a page by name (`?limit=&after=`), inputs as their size |
//! | `DELETE /v1/schedules/{name}`           | no tick fires after it (started invocations run on)    |
//! | `POST /v1/schedules/{name}/pause`, `/resume` | ticks due while paused never fire                 |
//! | `POST /v1/schedules/{name}/trigger`     | 202: starts the invocation now, whatever the policies  |
//!
//! A definition is JSON: `{"function": F, "book": N, "input": I, "every_ms": MS}` or
//! `"cron": "EXPR"` instead of `every_ms`, with `"overlap"` (`skip`, `buffer_one`,
//! `allow_all`), `"catch_up"` (`latest`, `all`, `none`) and `"paused"` optional. The
//! input is a JSON string (its UTF-8 is the invocation's input) or any other JSON value
//! (its JSON text is), at most `SCHEDULE_INPUT_MAX`; none is empty. For an HTTP function,
//! `"request": {"method", "path", "headers": [[NAME, VALUE], ...], "body"}` instead of an
//! input makes each tick that request (all optional: `POST /`, no headers, empty).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;
use tally_durable::{CatchUp, Overlap, Schedule, ScheduleSpec, Timing};
use tally_runtime::error::RuntimeError;
use tally_runtime::runtime::Runtime;

use super::{accepted, user_book, ApiPath, ApiQuery, ApiResult, Blob, NoBody, RequestBody};

/// Bytes of a definition at most: an input of `SCHEDULE_INPUT_MAX` bytes, escaped
/// (`\u00XX` for a control byte), and the rest.
const DEFINITION_BYTES_MAX: u64 = 6 * tally_durable::SCHEDULE_INPUT_MAX as u64 + 4096;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Definition {
    function: String,
    #[serde(default)]
    book: u64,
    #[serde(default)]
    input: serde_json::Value,
    /// The request each tick makes of an HTTP function.
    request: Option<TickRequest>,
    every_ms: Option<u64>,
    cron: Option<String>,
    overlap: Option<String>,
    catch_up: Option<String>,
    paused: Option<bool>,
}

/// An HTTP function's request in a schedule.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TickRequest {
    #[serde(default = "post")]
    method: String,
    #[serde(default = "root")]
    path: String,
    #[serde(default)]
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: String,
}

fn post() -> String {
    "POST".into()
}

fn root() -> String {
    "/".into()
}

impl TickRequest {
    fn encode(self) -> Result<Bytes, RuntimeError> {
        let bad = |m: String| RuntimeError::InvalidArgument(format!("the schedule's request: {m}"));
        let method = axum::http::Method::from_bytes(self.method.as_bytes()).map_err(|e| bad(e.to_string()))?;
        if !self.path.starts_with('/') {
            return Err(bad(format!("the path {:?} does not start with /", self.path)));
        }
        let path: axum::http::uri::PathAndQuery = self.path.parse().map_err(|e| bad(format!("{e}")))?;
        let mut headers = Vec::with_capacity(self.headers.len());
        for (name, value) in self.headers {
            let name = axum::http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(e.to_string()))?;
            axum::http::HeaderValue::from_str(&value).map_err(|e| bad(e.to_string()))?;
            headers.push((name.as_str().to_owned(), value.into_bytes()));
        }
        let request = tally_host::HttpRequest {
            method: method.as_str().to_owned(),
            scheme: "http".into(),
            authority: "localhost".into(),
            path_with_query: path.as_str().to_owned(),
            headers,
            body: self.body.into_bytes(),
        };
        Ok(Bytes::from(request.encode()))
    }
}

impl Definition {
    fn spec(self) -> ApiResult<(ScheduleSpec, Option<bool>)> {
        let bad = |m: String| RuntimeError::InvalidArgument(m);
        let timing = match (self.every_ms, self.cron) {
            (Some(ms), None) => Timing::EveryMs(ms),
            (None, Some(expr)) => Timing::Cron(expr),
            _ => return Err(bad("a schedule has exactly one of \"every_ms\" and \"cron\"".into()).into()),
        };
        let overlap = match self.overlap.as_deref() {
            None => Overlap::default(),
            Some(o) => Overlap::parse(o).ok_or_else(|| bad(format!("overlap {o:?}: one of {}", Overlap::NAMES)))?,
        };
        let catch_up = match self.catch_up.as_deref() {
            None => CatchUp::default(),
            Some(c) => CatchUp::parse(c).ok_or_else(|| bad(format!("catch_up {c:?}: one of {}", CatchUp::NAMES)))?,
        };
        let input = match (self.input, self.request) {
            (serde_json::Value::Null, Some(request)) => request.encode()?,
            (_, Some(_)) => return Err(bad("a schedule has an \"input\" or a \"request\", not both".into()).into()),
            (serde_json::Value::Null, None) => Bytes::new(),
            (serde_json::Value::String(s), None) => Bytes::from(s),
            (other, None) => Bytes::from(other.to_string()),
        };
        tally_host::check_name(&self.function)?;
        let spec = ScheduleSpec { function: self.function, book: user_book(self.book)?, input, timing, overlap, catch_up };
        Ok((spec, self.paused))
    }
}

/// A schedule as every route but the listing shows it: with its input.
fn schedule_json(s: &Schedule) -> serde_json::Value {
    let mut v = schedule_summary(s);
    v["input"] = json!(Blob::new(&s.spec.input));
    v
}

/// A schedule as the listing shows it: its input's size, not the input (up to
/// `SCHEDULE_INPUT_MAX`, twice over as text and base64), so that a page stays small.
fn schedule_summary(s: &Schedule) -> serde_json::Value {
    let mut v = json!({
        "name": s.name,
        "function": s.spec.function,
        "book": s.spec.book.0,
        "input_bytes": s.spec.input.len(),
        "overlap": s.spec.overlap.name(),
        "catch_up": s.spec.catch_up.name(),
        "paused": s.paused,
        "revision": s.revision,
        "next_tick_ms": s.next_tick_ms,
        "last_tick_ms": s.last_tick_ms,
        "last_invocation_id": s.last_invocation,
        "buffered_tick_ms": s.buffered_tick_ms,
        "ticks_fired": s.ticks_fired,
        "ticks_skipped": s.ticks_skipped,
        "triggered": s.triggered,
        "last_error": s.last_error,
    });
    match &s.spec.timing {
        Timing::EveryMs(ms) => v["every_ms"] = json!(ms),
        Timing::Cron(expr) => v["cron"] = json!(expr),
    }
    v
}

#[tracing::instrument(name = "http.schedule_put", skip_all)]
pub(super) async fn put(
    State(rt): State<Arc<Runtime>>,
    ApiPath(name): ApiPath<String>,
    body: RequestBody,
) -> ApiResult<Response> {
    tally_durable::check_schedule_name(&name)?;
    let body = body.read("a schedule's definition", DEFINITION_BYTES_MAX).await?;
    let def: Definition = serde_json::from_slice(&body).map_err(|e| {
        RuntimeError::InvalidArgument(format!(
            "expected {{\"function\": F, \"book\": N, \"input\": I, \"every_ms\": MS or \"cron\": EXPR, ...}}: {e}"
        ))
    })?;
    let (spec, paused) = def.spec()?;
    let (schedule, created) = rt.schedules().put(&name, spec, paused).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(schedule_json(&schedule))).into_response())
}

#[tracing::instrument(name = "http.schedule", skip_all)]
pub(super) async fn get(State(rt): State<Arc<Runtime>>, ApiPath(name): ApiPath<String>, _: NoBody) -> ApiResult<Response> {
    Ok(Json(schedule_json(&rt.schedules().get(&name).await?)).into_response())
}

/// Schedules a listing page holds at most.
const LIST_LIMIT_MAX: usize = 1_000;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    limit: Option<usize>,
    /// The `next` of the page before.
    #[serde(default)]
    after: String,
}

/// A page of schedules by name, without their inputs: `{"schedules": [...], "next"}`,
/// `next` being the `after` of the next page (null at the end).
#[tracing::instrument(name = "http.schedules", skip_all)]
pub(super) async fn list(State(rt): State<Arc<Runtime>>, ApiQuery(q): ApiQuery<ListQuery>, _: NoBody) -> ApiResult<Response> {
    let limit = q.limit.unwrap_or(100);
    if limit == 0 || limit > LIST_LIMIT_MAX {
        return Err(RuntimeError::InvalidArgument(format!("limit {limit}: 1 to {LIST_LIMIT_MAX}")).into());
    }
    let (page, next) = rt.schedules().list(&q.after, limit).await?;
    let schedules: Vec<serde_json::Value> = page.iter().map(schedule_summary).collect();
    Ok(Json(json!({ "schedules": schedules, "next": next })).into_response())
}

#[tracing::instrument(name = "http.schedule_delete", skip_all)]
pub(super) async fn delete(State(rt): State<Arc<Runtime>>, ApiPath(name): ApiPath<String>, _: NoBody) -> ApiResult<Response> {
    rt.schedules().delete(&name).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `pause`, `resume` or `trigger`.
#[tracing::instrument(name = "http.schedule_action", skip_all)]
pub(super) async fn action(
    State(rt): State<Arc<Runtime>>,
    ApiPath((name, action)): ApiPath<(String, String)>,
    _: NoBody,
) -> ApiResult<Response> {
    match action.as_str() {
        "pause" | "resume" => {
            let schedule = rt.schedules().pause(&name, action == "pause").await?;
            Ok(Json(schedule_json(&schedule)).into_response())
        }
        "trigger" => {
            let (id, book) = rt.schedules().trigger(&name).await?;
            let id = id.to_string();
            Ok(accepted(&id, book, json!({ "invocation_id": id, "book": book.0, "schedule": name })))
        }
        other => {
            Err(RuntimeError::InvalidArgument(format!("{other:?} is not an action on a schedule: pause, resume or trigger"))
                .into())
        }
    }
}
