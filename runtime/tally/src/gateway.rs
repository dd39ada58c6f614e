//! The HTTP gateway, which owns the HTTP view of the core's errors. Every error is JSON,
//! `{"error": {"code", "message"}}` ([`ApiError`] renders it), with the status that
//! [`http_status`] maps the error to; so is every refusal of the gateway's own (a bad
//! path parameter, query string or body, an unknown route, a method a route does not
//! take).
//!
//! | route                                   | does                                        | body at most           |
//! |-----------------------------------------|---------------------------------------------|------------------------|
//! | `PUT /v1/functions/{name}`              | deploy the body as the next version         | `component_bytes_max`  |
//! | `GET /v1/functions`                     | list functions                              | none                   |
//! | `GET /v1/functions/{name}`              | inspect one, with its versions              | none                   |
//! | `DELETE /v1/functions/{name}`           | delete                                      | none                   |
//! | `GET /v1/functions/{name}/config`       | its settings, secrets without their values  | none                   |
//! | `PATCH /v1/functions/{name}/config`     | `{"set": {K: {"value", "secret"}}, "unset": [K]}` (`gateway/settings.rs`) | 1 MiB |
//! | `POST /v1/functions/{name}/invoke`      | invoke: `?book=N` (default 0), `&async=true`, `&delay_ms=N`, `&key=K` (`&shared=true`) | its `request_bytes_max`|
//! | `GET /v1/invocations/{id}`              | an invocation's status/output (`?book=N`)   | none                   |
//! | `DELETE /v1/invocations/{id}`           | `?book=N`: cancel it and its children (202; 409 once finished) | none |
//! | `POST /v1/promises/{id}`                | `?book=N`: complete a promise with the body, once | `PAYLOAD_MAX`  |
//! | `GET /v1/logs`                          | `?function=&id=&since_ms=&after=&limit=&follow=`: functions' logs on this node (`gateway/logs.rs`) | none |
//! | `GET /v1/invocations`                   | `?book=&function=&status=&limit=&after=`: a book's root invocations | none |
//! | `PUT/GET/DELETE /v1/schedules/{name}`, `GET /v1/schedules`, `POST /v1/schedules/{name}/{pause,resume,trigger}` | schedules (`gateway/schedules.rs`) | 6 × `PAYLOAD_MAX` |
//! | `GET /v1/books/{id}/records`            | `?tag=&from=&limit=`: a book's records      | none                   |
//! | `GET /v1/books/{id}/tables/{table}`     | a state table's protocol and switches       | none                   |
//! | `PUT /v1/books/{id}/tables/{table}`     | `{"protocol": P}`: switch, or `auto`        | 4 KiB                  |
//! | `GET /v1/books/{id}/objects/{name}`     | `?path=P`: a durable object's JSON value    | none                   |
//! | `GET /v1/books/{id}/queues/{name}`      | a queue's waiting messages, per shard       | none                   |
//! | `GET /v1/books/{id}/locks/{name}`       | the invocation holding a lock, if any       | none                   |
//! | `POST /v1/promises/{id}/link`, `/v1/tokens[/{id}]`, `GET /v1/audit` | tokens and the audit (`gateway/tokens.rs`) | 16 KiB |
//! | `GET /healthz`, `GET /metrics`          | liveness, Prometheus counters               | none                   |
//! | `GET /ui/...`, `POST /ui/login`, `/ui/logout` | the dashboard, its cookie (`gateway/ui.rs`) | 4 KiB            |
//! | any method, `/fn/{name}/...`            | an HTTP function serves the request (`gateway/web.rs`) | its `request_bytes_max` |
//! | any other path                          | the HTTP function whose route it is (`?routes=` at deploy), or 404 | its `request_bytes_max` |
//!
//! Every route but `/healthz` and the dashboard's (`/ui`) checks the caller's token
//! first (`auth/guard.rs`: a route layer, and the fallback itself), and hands the
//! handler its [`Caller`].
//!
//! A body's limit is enforced before the body is read: a Content-Length over it is
//! refused at once, and a body without one is cut off as soon as it passes the limit,
//! so no route buffers more than its own limit. An invocation looks its function up
//! first (an unknown function is refused without reading the body) and then reads at
//! most that version's `request_bytes_max`. Platform books (top bit set) are refused on
//! every route that names a book. A records page is bounded in bytes
//! (`RECORDS_PAGE_BYTES_MAX`, unless its first record alone is larger) as well as in
//! count, since every record's data and aux data are rendered both as text and as base64.
//!
//! A synchronous invocation that suspended (a durable sleep) is answered 202, as a
//! background one is, with its ID, status `sleeping` and wake time (`wake_at_ms`, null
//! for an await of a promise without a timeout), and its status URL in `Location`.
//!
//! Session consistency ([`POSITION`], `Tally-Position`): deploys, deletes, invocations,
//! and the status, cancellation, completion, listing and records routes answer with the
//! context they reached (`term.index` per physical log, [`format_position`]). A request
//! that sends it back starts from it: the invocation's context (so its reads wait for
//! that far in the index), and the registry, which reads its manifests that far before
//! a lookup (so a function deployed through another node, or redeployed, is the one
//! run). ARCHITECTURE.md's "Rules at the HTTP boundary" keeps the rules; this is the
//! mechanism.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use bytes::BytesMut;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tally_durable::{InvocationKey, InvocationStatus, ListedStatus, TableStatus, Transition};
use tally_host::{parse_routes, DeploySpec, Outbound, Setting};
use tally_logsvc::{BookId, Context, MetalogPosition, SeqNum, Tag};
use tally_runtime::config::{Limits, Protocol};
use tally_runtime::error::RuntimeError;
use tally_runtime::runtime::{InvokeOptions, Runtime};

use crate::auth::guard::{self, Access, Caller};

mod books;
mod invocations;
mod lineage;
mod logs;
mod observe;
mod schedules;
mod settings;
mod sql;
mod tokens;
mod ui;
mod web;

pub use books::parse_tag;

/// The JSON error body every refusal has, with its code also in the [`ERROR`] header,
/// which tells Tally's answers from an HTTP function's.
pub(crate) fn error_response(status: StatusCode, code: &str, message: String) -> Response {
    let mut response = (status, Json(json!({ "error": { "code": code, "message": message } }))).into_response();
    if let Ok(v) = HeaderValue::from_str(code) {
        response.headers_mut().insert(ERROR, v);
    }
    response
}

/// The HTTP status of an error: the gateway's business, not the runtime's.
pub fn http_status(e: &RuntimeError) -> StatusCode {
    match e {
        RuntimeError::InvalidComponent(_) | RuntimeError::WrongWorld(_) | RuntimeError::InvalidArgument(_) => {
            StatusCode::BAD_REQUEST
        }
        RuntimeError::FunctionNotFound(_)
        | RuntimeError::InvocationNotFound(_)
        | RuntimeError::PromiseNotFound(_)
        | RuntimeError::ScheduleNotFound(_) => StatusCode::NOT_FOUND,
        RuntimeError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        RuntimeError::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
        RuntimeError::Conflict(_) | RuntimeError::Cancelled => StatusCode::CONFLICT,
        RuntimeError::Trap(_)
        | RuntimeError::MemoryLimit(_)
        | RuntimeError::Failed(_)
        | RuntimeError::Internal(_)
        | RuntimeError::Superseded
        | RuntimeError::InjectedCrash => StatusCode::INTERNAL_SERVER_ERROR,
        RuntimeError::LogUnavailable(_) | RuntimeError::FunctionUnavailable(..) => StatusCode::SERVICE_UNAVAILABLE,
        RuntimeError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
        RuntimeError::Suspended { .. } => StatusCode::ACCEPTED,
    }
}

/// An error as the gateway answers it: JSON with the error's code and HTTP status.
#[derive(Debug)]
pub struct ApiError(pub RuntimeError);

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> Self {
        ApiError(e)
    }
}

impl From<tally_logsvc::Error> for ApiError {
    fn from(e: tally_logsvc::Error) -> Self {
        ApiError(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        error_response(http_status(&self.0), self.0.code(), self.0.to_string())
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// The client's key that makes an invocation exactly-once across its retries.
const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The key a cluster's gateway gives an invocation it may retry on another node.
pub const RETRY_KEY: &str = "tally-retry-key";
/// Test hook (with `[state] crash_injection`): stop after this many effects.
const CRASH_AFTER: &str = "tally-crash-after";
/// Session consistency: where the client's invocations got to in the log. Every
/// invocation's response carries it; a request that sends it back reads nothing older,
/// on whichever node serves it.
pub const POSITION: &str = "tally-position";
/// The code of an error the platform answered (not an HTTP function), on every error.
pub const ERROR: &str = "tally-error";
/// The book of an HTTP function's invocation (its query is the function's).
pub const BOOK: &str = "tally-book";
/// The header of a deploy's settings (`gateway/settings.rs`).
pub const SETTINGS: &str = "tally-settings";

/// The gateway's routes over `rt`, every one checked by `access` (`auth/guard.rs`).
pub fn router(rt: Arc<Runtime>, access: Arc<Access>) -> Router {
    Router::new()
        .route("/v1/functions", get(list))
        .route("/v1/functions/{name}", get(inspect).put(deploy).delete(delete))
        .route("/v1/functions/{name}/invoke", post(invoke))
        .route("/v1/functions/{name}/config", get(settings::list).patch(settings::change))
        .route("/v1/invocations", get(invocations::list))
        .route("/v1/invocations/{id}/steps", get(invocations::steps))
        .route("/v1/logs", get(logs::logs))
        .route("/v1/promises/{id}", post(complete_promise))
        .route("/v1/promises/{id}/link", post(tokens::link))
        .route("/v1/tokens", get(tokens::list).post(tokens::create))
        .route("/v1/tokens/{id}", axum::routing::delete(tokens::revoke))
        .route("/v1/audit", get(tokens::audit))
        .route("/v1/invocations/{id}", get(invocation).delete(cancel))
        .route("/v1/schedules", get(schedules::list))
        .route("/v1/schedules/{name}", get(schedules::get).put(schedules::put).delete(schedules::delete))
        .route("/v1/schedules/{name}/{action}", post(schedules::action))
        .route("/v1/sql", post(sql::query))
        .route("/v1/books", get(books::list))
        .route("/v1/books/{id}/tables", get(books::tables))
        .route("/v1/books/{id}/records", get(books::records))
        .route("/v1/books/{id}/tables/{table}", get(books::table_status).put(books::table_switch))
        .route("/v1/books/{id}/tables/{table}/why", get(lineage::value))
        .route("/v1/books/{id}/objects/{name}", get(books::object))
        .route("/v1/books/{id}/objects/{name}/why", get(lineage::object))
        .route("/v1/books/{id}/queues/{name}", get(books::queue))
        .route("/v1/books/{id}/locks/{name}", get(books::lock))
        .route("/healthz", get(|_: NoBody| async { "ok\n" }))
        .route("/ui", get(ui::redirect))
        .route("/ui/", get(ui::index))
        .route("/ui/app.js", get(ui::script))
        .route("/ui/app.css", get(ui::style))
        .route("/ui/login", post(ui::login))
        .route("/ui/logout", post(ui::logout))
        .route("/ui/{*path}", any(ui::not_found))
        .route("/metrics", get(metrics))
        .route("/fn/{name}", any(web::serve))
        .route("/fn/{name}/", any(web::serve))
        .route("/fn/{name}/{*path}", any(web::serve))
        // After the routes: these apply to the routes added before them. The fallback
        // (declared routes of HTTP functions) checks its requests itself.
        .route_layer(axum::middleware::from_fn_with_state(access.clone(), guard::guard))
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(web::routed)
        .layer(axum::Extension(Arc::new(sql::engine(&rt))))
        .layer(axum::Extension(access))
        .with_state(rt)
}

pub(crate) async fn route_not_found(method: Method, uri: Uri) -> Response {
    error_response(StatusCode::NOT_FOUND, "not_found", format!("no route for {method} {}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    error_response(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", format!("{} does not take {method}", uri.path()))
}

/// [`Path`], refusing a bad path parameter with a JSON `invalid_argument` (axum's
/// rejection is plain text).
struct ApiPath<T>(T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        let Path(value) =
            Path::<T>::from_request_parts(parts, state).await.map_err(|e| RuntimeError::InvalidArgument(e.body_text()))?;
        Ok(ApiPath(value))
    }
}

/// [`Query`], refusing a bad query string with a JSON `invalid_argument`.
struct ApiQuery<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        let Query(value) =
            Query::<T>::from_request_parts(parts, state).await.map_err(|e| RuntimeError::InvalidArgument(e.body_text()))?;
        Ok(ApiQuery(value))
    }
}

/// A request body not read yet. The handler reads it under the limit of what it
/// carries, which may depend on what the path names (the function an input is for).
struct RequestBody {
    /// The Content-Length header, when the client sent one.
    length: Option<u64>,
    body: Body,
}

impl<S: Send + Sync> FromRequest<S> for RequestBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> ApiResult<Self> {
        let length = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .map(|v| {
                v.to_str()
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| RuntimeError::InvalidArgument("the content-length header is not a number".into()))
            })
            .transpose()?;
        Ok(RequestBody { length, body: req.into_body() })
    }
}

impl RequestBody {
    /// The whole body, or `too_large` once it is over `limit`: before reading anything
    /// when its Content-Length says so, otherwise as soon as the bytes that came pass
    /// the limit. Nothing past the limit is buffered.
    async fn read(self, what: &'static str, limit: u64) -> ApiResult<Bytes> {
        if let Some(size) = self.length.filter(|&size| size > limit) {
            return Err(RuntimeError::TooLarge { what, size: Some(size), limit }.into());
        }
        let mut stream = self.body.into_data_stream();
        let mut bytes = BytesMut::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| RuntimeError::InvalidArgument(format!("reading {what}: {e}")))?;
            if (bytes.len() + chunk.len()) as u64 > limit {
                return Err(RuntimeError::TooLarge { what, size: None, limit }.into());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes.freeze())
    }
}

/// The body of a route that takes none: a non-empty one is refused as `too_large` (its
/// limit is 0 bytes), without reading more than the first piece of it.
struct NoBody;

impl<S: Send + Sync> FromRequest<S> for NoBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> ApiResult<Self> {
        RequestBody::from_request(req, state).await?.read("the request body (this route takes none)", 0).await?;
        Ok(NoBody)
    }
}

/// A book a request names; platform books (top bit set) are refused.
fn user_book(id: u64) -> ApiResult<BookId> {
    let book = BookId(id);
    if book.is_reserved() {
        return Err(RuntimeError::InvalidArgument(format!("book {id:#x} is reserved for the platform")).into());
    }
    Ok(book)
}

/// Limit overrides a deploy may give in its query string.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeployQuery {
    memory_bytes: Option<u64>,
    timeout_ms: Option<u64>,
    request_bytes_max: Option<u64>,
    response_bytes_max: Option<u64>,
    concurrency_max: Option<u32>,
    retry_attempts: Option<u32>,
    retry_backoff_ms: Option<u64>,
    retry_backoff_max_ms: Option<u64>,
    /// State table protocols: `table:protocol,table:protocol`.
    tables: Option<String>,
    /// Where the function may send requests: `https://host[:port],...` (none by default).
    outbound: Option<String>,
    /// An HTTP function's routes: `[host]/prefix[@book],...` (`tally_host::Route`).
    routes: Option<String>,
    /// An HTTP function anyone may call without a token.
    #[serde(default)]
    public: bool,
}

/// `accounts:write-optimized,log:read-optimized` as a map.
pub fn parse_tables(s: &str) -> Result<BTreeMap<String, Protocol>, RuntimeError> {
    let mut tables = BTreeMap::new();
    for item in s.split(',').filter(|i| !i.is_empty()) {
        let (table, protocol) = item
            .split_once(':')
            .ok_or_else(|| RuntimeError::InvalidArgument(format!("tables: {item:?} is not table:protocol")))?;
        tally_durable::check_table(table).map_err(RuntimeError::InvalidArgument)?;
        let protocol: Protocol = protocol.parse().map_err(RuntimeError::InvalidArgument)?;
        tables.insert(table.to_string(), protocol);
    }
    Ok(tables)
}

#[tracing::instrument(name = "http.deploy", skip_all)]
async fn deploy(
    State(rt): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<DeployQuery>,
    headers: HeaderMap,
    body: RequestBody,
) -> ApiResult<Response> {
    let settings = settings::of_deploy(&headers)?;
    let component = body.read("the component", rt.config.node.component_bytes_max).await?;
    let d = rt.config.limits;
    let limits = Limits {
        memory_bytes: q.memory_bytes.unwrap_or(d.memory_bytes),
        timeout_ms: q.timeout_ms.unwrap_or(d.timeout_ms),
        request_bytes_max: q.request_bytes_max.unwrap_or(d.request_bytes_max),
        response_bytes_max: q.response_bytes_max.unwrap_or(d.response_bytes_max),
        concurrency_max: q.concurrency_max.unwrap_or(d.concurrency_max),
        retry_attempts: q.retry_attempts.unwrap_or(d.retry_attempts),
        retry_backoff_ms: q.retry_backoff_ms.unwrap_or(d.retry_backoff_ms),
        retry_backoff_max_ms: q.retry_backoff_max_ms.unwrap_or(d.retry_backoff_max_ms),
    };
    let tables = parse_tables(q.tables.as_deref().unwrap_or(""))?;
    let outbound = Outbound::parse(q.outbound.as_deref().unwrap_or("")).map_err(RuntimeError::InvalidArgument)?;
    let routes = parse_routes(q.routes.as_deref().unwrap_or("")).map_err(RuntimeError::InvalidArgument)?;
    let spec = DeploySpec { limits, tables, outbound, routes, settings, public: q.public, by: Some(caller.id) };
    let info = rt.deploy_with(&name, component, spec).await?;
    let response = (StatusCode::CREATED, Json(json!({ "name": name, "version": info }))).into_response();
    Ok(with_position(response, &rt.registry.position().await))
}

#[tracing::instrument(name = "http.list", skip_all)]
async fn list(State(rt): State<Arc<Runtime>>, _: NoBody) -> ApiResult<Response> {
    rt.registry.sync().await?;
    Ok(Json(json!({ "functions": rt.registry.list() })).into_response())
}

#[tracing::instrument(name = "http.inspect", skip_all)]
async fn inspect(State(rt): State<Arc<Runtime>>, ApiPath(name): ApiPath<String>, _: NoBody) -> ApiResult<Response> {
    rt.registry.sync().await?;
    Ok(Json(rt.registry.inspect(&name)?).into_response())
}

#[tracing::instrument(name = "http.delete", skip_all)]
async fn delete(
    State(rt): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
    _: NoBody,
) -> ApiResult<Response> {
    rt.registry.delete(&name, Some(caller.id)).await?;
    Ok(with_position(StatusCode::NO_CONTENT.into_response(), &rt.registry.position().await))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct InvokeQuery {
    #[serde(default)]
    book: u64,
    #[serde(default, rename = "async")]
    background: bool,
    /// Milliseconds to wait before the function runs (durably: logged at once).
    #[serde(default)]
    delay_ms: u64,
    /// The key the invocation is addressed to: it runs alone among the function's
    /// invocations with that key, unless `shared`.
    key: Option<String>,
    #[serde(default)]
    shared: bool,
}

/// A header's value as text, if present.
fn header_text(headers: &HeaderMap, name: &str) -> ApiResult<Option<String>> {
    headers
        .get(name)
        .map(|v| {
            v.to_str()
                .map(str::to_string)
                .map_err(|_| RuntimeError::InvalidArgument(format!("the {name} header is not text")).into())
        })
        .transpose()
}

/// The options an invocation's headers give: its idempotency key, a cluster gateway's
/// retry key and the crash-injection hook.
fn header_options(headers: &HeaderMap) -> ApiResult<InvokeOptions> {
    let crash_after = header_text(headers, CRASH_AFTER)?
        .map(|v| v.parse::<u64>().map_err(|_| RuntimeError::InvalidArgument(format!("{CRASH_AFTER}: {v:?} is not a count"))))
        .transpose()?;
    Ok(InvokeOptions {
        idempotency_key: header_text(headers, IDEMPOTENCY_KEY)?,
        retry_key: header_text(headers, RETRY_KEY)?,
        crash_after,
        ..InvokeOptions::default()
    })
}

// At debug level: an info span is entered and left on every poll of the request and
// allocated in the subscriber's registry: ~1.5% of a loaded node's CPU samples.
#[tracing::instrument(name = "http.invoke", level = "debug", skip_all)]
async fn invoke(
    State(rt): State<Arc<Runtime>>,
    Extension(access): Extension<Arc<Access>>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<InvokeQuery>,
    headers: HeaderMap,
    body: RequestBody,
) -> ApiResult<Response> {
    let span = format!("POST /v1/functions/{name}/invoke");
    let (observer, parent) = (rt.clone(), observe::parent_of(&headers));
    observe::observed(&observer, parent, span, invoke_observed(rt, access, name, q, headers, body)).await
}

async fn invoke_observed(
    rt: Arc<Runtime>,
    access: Arc<Access>,
    name: String,
    q: InvokeQuery,
    headers: HeaderMap,
    body: RequestBody,
) -> ApiResult<Response> {
    let opts = InvokeOptions {
        delay_ms: q.delay_ms,
        key: match q.key {
            Some(key) => Some(InvocationKey::new(key, !q.shared)?),
            None if q.shared => {
                return Err(RuntimeError::InvalidArgument("shared=true is for a keyed invocation (key=...)".into()).into())
            }
            None => None,
        },
        ..header_options(&headers)?
    };
    let position = position_of(&headers)?;
    if q.background && opts.crash_after.is_some() {
        return Err(RuntimeError::InvalidArgument(format!("{CRASH_AFTER} is for synchronous invocations")).into());
    }
    // The function is looked up first: an unknown one is refused (404) before the book
    // is (400, as the runtime does) and before its input is read, under that version's
    // limit. The runtime looks it up again (a cheap hit) and checks the input against
    // the version it runs.
    let loaded = rt.registry.lookup_at(&name, &position).await?;
    let book = user_book(q.book)?;
    let input = body.read("the request", loaded.info.limits.request_bytes_max).await?;
    // Admitted before anything is logged: a refusal loses and repeats nothing.
    let _place = match observe::queued(access.admission.admit(book.0)).await {
        Ok(place) => place,
        Err(refusal) => return Ok(guard::too_many(refusal)),
    };
    if q.background {
        // A background invocation is initialised before it is answered anyway.
        let mut ctx = position;
        let key = opts.idempotency_key.or(opts.retry_key);
        let id = rt.invoke_async(&mut ctx, name, book, input, key, opts.delay_ms, opts.key).await?;
        return Ok(with_position(accepted(&id.to_string(), book, json!({ "invocation_id": id.to_string() })), &ctx));
    }
    let (output, reached) = rt.invoke_at(&name, book, input, opts, position).await;
    let response = match output {
        // An HTTP function took the input as a `POST /` and answers as it would there.
        Ok(output) if loaded.pre.is_http() => web::response(output),
        Ok(output) => ([(header::CONTENT_TYPE, "application/octet-stream")], output).into_response(),
        // Asleep: answered like a background invocation, with where its result will be.
        Err(RuntimeError::Suspended { id, wake_ms }) => {
            accepted(&id, book, json!({ "invocation_id": id, "status": "sleeping", "wake_at_ms": wake_at(wake_ms) }))
        }
        Err(e) => ApiError(e).into_response(),
    };
    Ok(with_position(response, &reached))
}

/// A wake time as the API shows it: null for none (an await of a promise with no
/// timeout waits for the completion only).
fn wake_at(wake_ms: u64) -> serde_json::Value {
    if wake_ms == u64::MAX {
        serde_json::Value::Null
    } else {
        json!(wake_ms)
    }
}

/// 202 Accepted with `body` and the invocation's status URL in `Location`.
fn accepted(id: &str, book: BookId, body: serde_json::Value) -> Response {
    let mut response = (StatusCode::ACCEPTED, Json(body)).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("/v1/invocations/{id}?book={}", book.0)) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    response
}

/// The client's `Tally-Position`, or a context that has seen nothing.
fn position_of(headers: &HeaderMap) -> ApiResult<Context> {
    match header_text(headers, POSITION)? {
        Some(text) => Ok(parse_position(&text).map_err(|e| RuntimeError::InvalidArgument(format!("{POSITION}: {e}")))?),
        None => Ok(Context::new()),
    }
}

/// `response` with a `Tally-Position` header saying `ctx`.
fn with_position(mut response: Response, ctx: &Context) -> Response {
    if let Ok(v) = HeaderValue::from_str(&format_position(ctx)) {
        response.headers_mut().insert(POSITION, v);
    }
    response
}

/// A context as the `Tally-Position` header carries it: `term.index` per physical
/// log, comma-separated, log 0 first.
pub fn format_position(ctx: &Context) -> String {
    let parts: Vec<String> = ctx.positions().iter().map(|p| format!("{}.{}", p.term, p.index)).collect();
    parts.join(",")
}

/// Parses a `Tally-Position` header (see [`format_position`]).
pub fn parse_position(text: &str) -> Result<Context, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Context::new());
    }
    let parts: Vec<&str> = text.split(',').collect();
    if parts.len() > usize::from(u8::MAX) + 1 {
        return Err(format!("{} positions; a cluster has at most 256 physical logs", parts.len()));
    }
    let positions = parts
        .iter()
        .map(|p| {
            let (term, index) = p.trim().split_once('.').ok_or_else(|| format!("{p:?} is not TERM.INDEX"))?;
            let term = term.parse::<u16>().map_err(|_| format!("{p:?}: the term is not a number up to 65535"))?;
            let index = index.parse::<u64>().map_err(|_| format!("{p:?}: the index is not a number"))?;
            Ok(MetalogPosition { term, index })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Context::from_positions(positions))
}

/// Bytes in JSON: as text when they are UTF-8, and always in base64.
#[derive(Serialize)]
struct Blob {
    text: Option<String>,
    base64: String,
}

impl Blob {
    fn new(bytes: &[u8]) -> Blob {
        Blob { text: std::str::from_utf8(bytes).ok().map(str::to_string), base64: base64(bytes) }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct InvocationQuery {
    #[serde(default)]
    book: u64,
}

#[tracing::instrument(name = "http.invocation", skip_all)]
async fn invocation(
    State(rt): State<Arc<Runtime>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<InvocationQuery>,
    headers: HeaderMap,
    _: NoBody,
) -> ApiResult<Response> {
    let mut ctx = position_of(&headers)?;
    let status = rt.invocation(&mut ctx, user_book(q.book)?, &id).await?;
    let body = match &status {
        InvocationStatus::Running => json!({ "invocation_id": id, "status": "running" }),
        InvocationStatus::Sleeping { wake_ms } => {
            json!({ "invocation_id": id, "status": "sleeping", "wake_at_ms": wake_at(*wake_ms) })
        }
        InvocationStatus::Finished(Ok(output)) => {
            json!({ "invocation_id": id, "status": "succeeded", "output": Blob::new(output) })
        }
        InvocationStatus::Finished(Err(e)) => json!({
            "invocation_id": id,
            "status": "failed",
            "error": { "code": e.code(), "message": e.to_string(), "http_status": http_status(e).as_u16() },
        }),
    };
    Ok(with_position(Json(body).into_response(), &ctx))
}

/// Cancels an invocation and its children: 202 while it winds down (its status says
/// when it has: `failed` with code `cancelled`), 409 for one that has finished, 404 for
/// an unknown one.
#[tracing::instrument(name = "http.cancel", skip_all)]
async fn cancel(
    State(rt): State<Arc<Runtime>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<InvocationQuery>,
    headers: HeaderMap,
    _: NoBody,
) -> ApiResult<Response> {
    let book = user_book(q.book)?;
    let mut ctx = position_of(&headers)?;
    rt.invocations().cancel(&mut ctx, book, &id).await?;
    Ok(with_position(accepted(&id, book, json!({ "invocation_id": id, "book": book.0, "status": "cancelling" })), &ctx))
}

/// Completes a promise of a book with the request's body: 200 once, 409 for a promise
/// completed already, 404 for one no invocation of the book created.
#[tracing::instrument(name = "http.promise", skip_all)]
async fn complete_promise(
    State(rt): State<Arc<Runtime>>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<InvocationQuery>,
    headers: HeaderMap,
    body: RequestBody,
) -> ApiResult<Response> {
    let book = user_book(q.book)?;
    let mut ctx = position_of(&headers)?;
    let value = body.read("the value of a promise", tally_durable::PAYLOAD_MAX as u64).await?;
    rt.invocations().complete_promise(&mut ctx, book, &id, value).await?;
    Ok(with_position(Json(json!({ "promise": id, "book": book.0, "completed": true })).into_response(), &ctx))
}

#[tracing::instrument(name = "http.metrics", skip_all)]
async fn metrics(State(rt): State<Arc<Runtime>>, _: NoBody) -> Response {
    let text = rt.metrics.render(rt.invocations().replayed()) + &rt.index_metrics();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// `text` with every byte but unreserved URL characters percent-encoded.
pub fn url_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        let cases = [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("foobar", "Zm9vYmFy")];
        for (raw, encoded) in cases {
            assert_eq!(base64(raw.as_bytes()), encoded);
        }
    }

    #[test]
    fn tags_parse_as_numbers_or_names() {
        assert_eq!(parse_tag("42"), Tag(42));
        assert_eq!(parse_tag("0x10"), Tag(16));
        assert_eq!(parse_tag("orders"), Tag::from_name("orders"));
    }
}
