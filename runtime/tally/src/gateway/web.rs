//! HTTP functions on the web: `/fn/{name}` and everything below it, with any method,
//! reach the function `name` (a component exporting `wasi:http/incoming-handler`) as
//! an HTTP request whose path is the part below `/fn/{name}` (always starting with `/`),
//! with the query, the headers and the body as the client sent them.
//!
//! The request is one exactly-once invocation: it is encoded whole into the
//! invocation's input (`tally_host::HttpRequest`), and the function's response, whole,
//! is its output, so a re-execution or a retry with the same `Idempotency-Key` answers
//! the logged response. The headers that speak to Tally rather than to the function:
//! `Tally-Book` (the book, default 0), `Tally-Position`, `Tally-Retry-Key`,
//! `Tally-Crash-After`; they are not passed on. `Idempotency-Key` is both Tally's and
//! the function's. Hop-by-hop headers (`Connection`, `Transfer-Encoding`, ...) are not
//! passed either way.
//!
//! `request_bytes_max` bounds the request as the function gets it (the body plus its
//! method, path and headers), `response_bytes_max` the response. A durable sleep
//! answers 202 as `POST /v1/functions/{name}/invoke` does; an error is Tally's JSON
//! error, with its status.

use axum::body::Body;
use http_body_util::StreamBody;
use tally_host::{Fields, HttpRequest, HttpResponse};

use super::*;

/// Headers of one connection, not of the request (RFC 9110 §7.6.1), and `Host`, which
/// the request carries as its authority.
const HOP_BY_HOP: &[&str] =
    &["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "upgrade", "trailer", "host", "http2-settings"];

/// The function's name and the path below `/fn/{name}`, as the client sent them
/// (percent-encoded: the function gets its path so), the path without its leading `/`.
fn route(uri: &Uri) -> (&str, &str) {
    let rest = uri.path().strip_prefix("/fn/").unwrap_or("");
    rest.split_once('/').unwrap_or((rest, ""))
}

/// `/fn/{name}`, `/fn/{name}/` and `/fn/{name}/{*path}`, any method.
#[tracing::instrument(name = "http.fn", level = "debug", skip_all)]
pub(super) async fn serve(
    State(rt): State<Arc<Runtime>>,
    Extension(access): Extension<Arc<Access>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: RequestBody,
) -> ApiResult<Response> {
    let (name, path) = route(&uri);
    let path = format!("/{path}");
    serve_as(rt, &access, name.to_owned(), &path, None, method, &uri, headers, body).await
}

/// Any path no other route took: the HTTP function whose declared route it is, or 404.
#[tracing::instrument(name = "http.routed", level = "debug", skip_all)]
pub(super) async fn routed(
    State(rt): State<Arc<Runtime>>,
    Extension(access): Extension<Arc<Access>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: RequestBody,
) -> Response {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let Some((name, route, below)) = rt.registry.route(host, uri.path()) else {
        return route_not_found(method, uri).await;
    };
    // The route layer does not run for the fallback: the function's demand is checked here.
    let demand = match guard::http_function(&rt, &name, route.book, &headers).await {
        Ok(demand) => demand,
        Err(why) => return error_response(StatusCode::BAD_REQUEST, "invalid_argument", why.to_string()),
    };
    if let Err(refused) = guard::authorize(&access, &headers, &demand).await {
        return *refused;
    }
    let below = below.to_owned();
    serve_as(rt, &access, name, &below, route.book, method, &uri, headers, body).await.unwrap_or_else(IntoResponse::into_response)
}

/// Serves a request to HTTP function `name`, whose path below its route is `path`; the
/// book is `book`, else the `Tally-Book` header's, else 0.
#[allow(clippy::too_many_arguments)]
async fn serve_as(
    rt: Arc<Runtime>,
    access: &Access,
    name: String,
    path: &str,
    book: Option<u64>,
    method: Method,
    uri: &Uri,
    headers: HeaderMap,
    body: RequestBody,
) -> ApiResult<Response> {
    let span = format!("{method} /fn/{name}");
    let (observer, parent) = (rt.clone(), observe::parent_of(&headers));
    observe::observed(&observer, parent, span, serve_observed(rt, access, name, path, book, method, uri, headers, body)).await
}

#[allow(clippy::too_many_arguments)]
async fn serve_observed(
    rt: Arc<Runtime>,
    access: &Access,
    name: String,
    path: &str,
    book: Option<u64>,
    method: Method,
    uri: &Uri,
    headers: HeaderMap,
    body: RequestBody,
) -> ApiResult<Response> {
    let position = position_of(&headers)?;
    let loaded = rt.registry.lookup_at(&name, &position).await?;
    if !loaded.pre.is_http() {
        return Err(RuntimeError::InvalidArgument(format!(
            "{name} is not an HTTP function (it exports `handle`): invoke it with POST /v1/functions/{name}/invoke"
        ))
        .into());
    }
    let book = match (book, header_text(&headers, BOOK)?) {
        (Some(book), _) => user_book(book)?,
        (None, Some(text)) => {
            user_book(text.parse().map_err(|_| RuntimeError::InvalidArgument(format!("{BOOK}: {text:?} is not a book")))?)?
        }
        (None, None) => BookId(0),
    };
    let opts = header_options(&headers)?;
    let body = body.read("the request", loaded.info.limits.request_bytes_max).await?;
    let _place = match observe::queued(access.admission.admit(book.0)).await {
        Ok(place) => place,
        Err(refusal) => return Ok(guard::too_many(refusal)),
    };
    let request = HttpRequest {
        method: method.as_str().to_owned(),
        scheme: "http".into(),
        authority: authority(&headers),
        path_with_query: match uri.query() {
            Some(query) => format!("{path}?{query}"),
            None => path.to_owned(),
        },
        headers: headers
            .iter()
            .filter(|(name, _)| passed_on(name.as_str()) && !name.as_str().starts_with("tally-"))
            .filter_map(|(name, value)| Some((name.as_str().to_owned(), caller_free(name, value.as_bytes())?)))
            .collect(),
        body: body.to_vec(),
    };
    let (output, reached) = rt.invoke_at(&name, book, request.encode().into(), opts, position).await;
    let response = match output {
        Ok(output) => response(output),
        Err(RuntimeError::Suspended { id, wake_ms }) => {
            accepted(&id, book, json!({ "invocation_id": id, "status": "sleeping", "wake_at_ms": wake_at(wake_ms) }))
        }
        Err(e) => ApiError(e).into_response(),
    };
    Ok(with_position(response, &reached))
}

/// An HTTP function's output as the response it encodes; the bytes as they are if they
/// encode none (the version that ran, deployed after the lookup, was not an HTTP
/// function).
pub(super) fn response(output: Vec<u8>) -> Response {
    match HttpResponse::decode(&output) {
        Some(response) => to_axum(response),
        None => ([(header::CONTENT_TYPE, "application/octet-stream")], output).into_response(),
    }
}

/// The host the client named, as the request's authority.
fn authority(headers: &HeaderMap) -> String {
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|host| host.parse::<axum::http::uri::Authority>().is_ok())
        .unwrap_or("localhost")
        .to_owned()
}

fn passed_on(name: &str) -> bool {
    !HOP_BY_HOP.contains(&name)
}

/// A header's value as the function gets it: without the caller's Tally token (an
/// `Authorization` that holds one, the dashboard's cookie among the cookies), which is
/// the caller's, not the function's; `None` drops the header.
fn caller_free(name: &header::HeaderName, value: &[u8]) -> Option<Vec<u8>> {
    if *name == header::AUTHORIZATION {
        let token = std::str::from_utf8(value).ok().and_then(|v| v.split_once(' ')).map(|(_, t)| t.trim());
        return match token {
            Some(t) if crate::auth::parse(t).is_ok() => None,
            _ => Some(value.to_vec()),
        };
    }
    if *name == header::COOKIE {
        let kept: Vec<&[u8]> = value
            .split(|&b| b == b';')
            .filter(|pair| {
                let name = pair.split(|&b| b == b'=').next().unwrap_or_default();
                name.trim_ascii() != guard::COOKIE.as_bytes()
            })
            .collect();
        let joined = kept.join(&b';');
        return (!joined.trim_ascii().is_empty()).then_some(joined);
    }
    Some(value.to_vec())
}

/// The function's response as the gateway sends it: its status, headers, body and
/// trailers.
fn to_axum(r: HttpResponse) -> Response {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut headers = header_map(&r.headers);
    let body = match r.trailers {
        None => Body::from(r.body),
        Some(trailers) => {
            // A client gets the trailers the response declares (hyper sends no others).
            let names: Vec<&str> = trailers.iter().map(|(n, _)| n.as_str()).collect();
            if let Ok(v) = HeaderValue::from_str(&names.join(", ")) {
                headers.insert(header::TRAILER, v);
            }
            let frames = [
                Ok::<_, std::convert::Infallible>(http_body::Frame::data(Bytes::from(r.body))),
                Ok(http_body::Frame::trailers(header_map(&trailers))),
            ];
            Body::new(StreamBody::new(futures_util::stream::iter(frames)))
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// Fields as a header map, without hop-by-hop headers or what is not a valid header.
fn header_map(fields: &Fields) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in fields {
        if let (Ok(name), Ok(value)) = (axum::http::HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(value)) {
            if passed_on(name.as_str()) {
                map.append(name, value);
            }
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Grant, Role, Scope};

    #[test]
    fn a_function_never_gets_its_callers_tally_token() {
        let (_, token) = Grant::mint(Role::Admin, Scope::default(), None, [7; 40]);
        let auth = header::AUTHORIZATION;
        assert_eq!(caller_free(&auth, format!("Bearer {token}").as_bytes()), None);
        assert_eq!(caller_free(&auth, b"Bearer someone-elses-token"), Some(b"Bearer someone-elses-token".to_vec()));
        assert_eq!(caller_free(&auth, b"Basic dXNlcjpwdw=="), Some(b"Basic dXNlcjpwdw==".to_vec()));
        let cookie = header::COOKIE;
        let sent = format!("a=1; {}={token}; b=2", guard::COOKIE);
        assert_eq!(caller_free(&cookie, sent.as_bytes()), Some(b"a=1; b=2".to_vec()));
        assert_eq!(caller_free(&cookie, format!("{}={token}", guard::COOKIE).as_bytes()), None);
        assert_eq!(caller_free(&cookie, b"x_tally_token=1"), Some(b"x_tally_token=1".to_vec()));
        assert_eq!(caller_free(&header::ACCEPT, b"*/*"), Some(b"*/*".to_vec()));
    }
}
