//! The check of every request: what a route asks for ([`demand`]), who asks
//! ([`authorize`]).
//!
//! The gateway's routes run this as a route layer, so the route and its parameters are
//! axum's own (the same percent-decoding, the same matching); the fallback (declared
//! routes of HTTP functions) runs it itself once it knows the function.
//!
//! | route                                          | needs                                 |
//! |------------------------------------------------|---------------------------------------|
//! | `GET /healthz`, the dashboard (`/ui`, `/ui/...`: its files, login, logout) | nothing |
//! | `GET /metrics`, `GET /v1/functions`, `GET /v1/schedules[/{name}]`, `GET /v1/books` | `read`, unscoped |
//! | `POST /v1/sql` (read-only queries over every book)  | `read`, unscoped               |
//! | `GET /v1/functions/{name}[/config]`            | `read` of the function                |
//! | `PUT`, `DELETE /v1/functions/{name}`, `PATCH .../config` | `deploy` of the function    |
//! | `POST /v1/functions/{name}/invoke?book=N`      | `invoke` of the function and book N   |
//! | `GET /v1/invocations?book=N&function=F`        | `read` of book N (and F)              |
//! | `GET`/`DELETE /v1/invocations/{id}?book=N`     | `read`/`invoke` of book N, any function |
//! | `GET /v1/invocations/{id}/steps?book=N`        | `read` of book N, any function        |
//! | `POST /v1/promises/{id}?book=N`                | `invoke` of book N, or a link to the promise |
//! | `POST /v1/promises/{id}/link?book=N`           | `invoke` of book N, any function      |
//! | `GET /v1/logs?function=F`                      | `read` (of F)                         |
//! | `PUT`/`DELETE /v1/schedules/{name}`, pause, resume | `deploy`, unscoped               |
//! | `POST /v1/schedules/{name}/trigger`            | `invoke`, unscoped                    |
//! | `GET /v1/books/{id}/...`, `PUT .../tables/{t}` | `read`, `deploy` of the book          |
//! | `/v1/tokens...`, `GET /v1/audit`               | `admin`, unscoped                     |
//! | an HTTP function (`/fn/{name}/...`, its routes)| nothing if deployed `public`, else `invoke` of it and its book |
//!
//! The metrics address of a process without an HTTP API (`node.toml`'s `metrics`, its
//! index roles' `GET /metrics`) is not the gateway's: it asks for the cluster's metrics
//! token, the one secret such a process holds (`node/metrics.rs`).
//!
//! A schedule names its function and book in its body, so a scoped token cannot reach
//! schedules; an invocation's ID does not say its function, so a token scoped to
//! functions cannot read or cancel by ID (it lists its function's invocations instead).
//!
//! **Local mode** (`tally dev` on loopback): a request without a token acts as the
//! admin, unless a web page could have forged it: its `Host` must be a loopback name or
//! address (a DNS-rebinding page sends its own name), and a browser's `Origin` must be
//! the gateway itself, and `Sec-Fetch-Site`, when sent, `same-origin` or `none` (a form
//! POST from another site carries both). A request with a token is checked as anywhere.
//!
//! **The dashboard's cookie** (`gateway/ui.rs` sets it at login): a request without
//! `Authorization` presents the token of its `tally_token` cookie, if it has one, and
//! only if no page of another site can have sent it: its `Sec-Fetch-Site`, when sent,
//! must be `same-origin` and its `Origin`, when sent, the gateway itself (403
//! otherwise; SameSite=Strict keeps the cookie off other sites' requests in the first
//! place). A malformed cookie, or two of them, is a 401 that says so. `Authorization`
//! always wins over the cookie, in either mode.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{FromRequestParts, MatchedPath, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use tally_runtime::runtime::Runtime;

use super::store::Refused;
use super::{Action, Denied, Role, Scope, Target, Tokens};
use crate::gateway::error_response;

/// Whether a request without a token is refused (`Token`: a cluster, a node listening
/// beyond loopback), or taken as the admin's unless a web page could have forged it
/// (`Local`: `tally dev` on loopback).
pub use tally_runtime::config::AuthMode as Mode;

/// What the gateway checks requests with.
pub struct Access {
    pub mode: Mode,
    pub tokens: Arc<Tokens>,
    pub runtime: Arc<Runtime>,
    /// Each token's rate, and the books' shares of the node's invocations.
    pub admission: crate::shares::Admission,
}

/// Who a request acts as: a token's ID, role and scope (`local` for a request without
/// one in local mode, `public` for one to a public function).
#[derive(Clone, Debug)]
pub struct Caller {
    pub id: String,
    pub role: Role,
    pub scope: Scope,
}

impl Caller {
    fn local() -> Caller {
        Caller { id: "local".into(), role: Role::Admin, scope: Scope::default() }
    }
}

/// What a request needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Demand {
    Nothing,
    /// A request to an HTTP function: what it needs depends on the function
    /// ([`http_function`]).
    Function {
        name: String,
    },
    Needs {
        action: Action,
        function: Option<String>,
        book: Option<u64>,
        promise: Option<String>,
    },
}

impl Demand {
    fn needs(action: Action) -> Demand {
        Demand::Needs { action, function: None, book: None, promise: None }
    }

    fn of_function(action: Action, function: &str) -> Demand {
        Demand::Needs { action, function: Some(function.to_string()), book: None, promise: None }
    }

    fn of_book(action: Action, book: u64) -> Demand {
        Demand::Needs { action, function: None, book: Some(book), promise: None }
    }
}

/// A query's single value of `key` (form-decoded, as the routes read it); two values
/// are refused, so that the check and the route cannot read different ones.
fn query_value(query: Option<&str>, key: &str) -> Result<Option<String>, String> {
    let mut values = form_urlencoded::parse(query.unwrap_or("").as_bytes()).filter(|(k, _)| k == key).map(|(_, v)| v);
    let first = values.next().map(|v| v.into_owned());
    if values.next().is_some() {
        return Err(format!("the query names `{key}` twice"));
    }
    Ok(first)
}

/// The book of a query (`?book=N`, default 0).
fn query_book(query: Option<&str>) -> Result<u64, String> {
    match query_value(query, "book")? {
        Some(text) => text.parse().map_err(|_| format!("book {text:?} is not a number")),
        None => Ok(0),
    }
}

/// What the route `pattern` (axum's, as matched) with parameters `params` asks for.
pub fn demand(method: &Method, pattern: &str, params: &HashMap<String, String>, query: Option<&str>) -> Result<Demand, String> {
    use Action::*;
    let param = |name: &str| params.get(name).map(String::as_str).unwrap_or("");
    let reading = method == Method::GET || method == Method::HEAD;
    Ok(match pattern {
        "/healthz" => Demand::Nothing,
        // The dashboard's files and its login: its pages read the API with a token.
        p if p == "/ui" || p.starts_with("/ui/") => Demand::Nothing,
        "/metrics" | "/v1/functions" | "/v1/schedules" | "/v1/books" => Demand::needs(Read),
        "/v1/sql" => Demand::needs(Read),
        "/v1/functions/{name}" | "/v1/functions/{name}/config" if reading => Demand::of_function(Read, param("name")),
        "/v1/functions/{name}" | "/v1/functions/{name}/config" => Demand::of_function(Deploy, param("name")),
        "/v1/functions/{name}/invoke" => Demand::Needs {
            action: Invoke,
            function: Some(param("name").to_string()),
            book: Some(query_book(query)?),
            promise: None,
        },
        "/v1/invocations" => Demand::Needs {
            action: Read,
            function: query_value(query, "function")?,
            book: Some(query_book(query)?),
            promise: None,
        },
        "/v1/invocations/{id}" => Demand::of_book(if reading { Read } else { Invoke }, query_book(query)?),
        "/v1/invocations/{id}/steps" => Demand::of_book(Read, query_book(query)?),
        "/v1/promises/{id}" => Demand::Needs {
            action: Invoke,
            function: None,
            book: Some(query_book(query)?),
            promise: Some(param("id").to_string()),
        },
        "/v1/promises/{id}/link" => Demand::of_book(Invoke, query_book(query)?),
        "/v1/logs" => Demand::Needs { action: Read, function: query_value(query, "function")?, book: None, promise: None },
        "/v1/schedules/{name}" if reading => Demand::needs(Read),
        "/v1/schedules/{name}" => Demand::needs(Deploy),
        "/v1/schedules/{name}/{action}" if param("action") == "trigger" => Demand::needs(Invoke),
        "/v1/schedules/{name}/{action}" => Demand::needs(Deploy),
        p if p.starts_with("/v1/books/{id}/") => {
            let book = param("id").parse().map_err(|_| format!("book {:?} is not a number", param("id")))?;
            Demand::of_book(if reading { Read } else { Deploy }, book)
        }
        p if p.starts_with("/v1/tokens") || p == "/v1/audit" => Demand::needs(Admin),
        "/fn/{name}" | "/fn/{name}/" | "/fn/{name}/{*path}" => Demand::Function { name: param("name").to_string() },
        // A route added without a line here needs the admin: a test lists every route.
        _ => Demand::needs(Admin),
    })
}

/// What a request to HTTP function `name` needs: nothing if its current version was
/// deployed public, else `invoke` of it and its book (the route's, else the
/// `Tally-Book` header's, else 0). An unknown function is not public.
pub async fn http_function(
    runtime: &Runtime,
    name: &str,
    route_book: Option<u64>,
    headers: &HeaderMap,
) -> Result<Demand, String> {
    if runtime.registry.lookup(name).await.is_ok_and(|l| l.info.public) {
        return Ok(Demand::Nothing);
    }
    let book = match (route_book, headers.get(crate::gateway::BOOK)) {
        (Some(book), _) => book,
        (None, Some(v)) => v.to_str().ok().and_then(|t| t.parse().ok()).ok_or("the tally-book header is not a book")?,
        (None, None) => 0,
    };
    Ok(Demand::Needs { action: Action::Invoke, function: Some(name.to_string()), book: Some(book), promise: None })
}

/// Whether `host` (a `Host` header: a name or address, maybe with a port) is loopback.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => {
            host.rsplit_once(':').map_or(host, |(name, port)| if port.bytes().all(|b| b.is_ascii_digit()) { name } else { host })
        }
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Why a request without a token may not act as the local admin, if it may not: what
/// a web page in a browser on this machine could have sent.
pub fn forged(headers: &HeaderMap) -> Option<String> {
    let text = |name: header::HeaderName| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let host = text(header::HOST).unwrap_or("");
    if !loopback_host(host) {
        return Some(format!("Host {host:?} is not a loopback name or address (a page may rebind its name to 127.0.0.1)"));
    }
    if let Some(site) = headers.get("sec-fetch-site").map(|v| v.to_str().unwrap_or("")) {
        if site != "same-origin" && site != "none" {
            return Some(format!("Sec-Fetch-Site {site:?}: a page of another site sent it"));
        }
    }
    foreign_origin(headers)
}

/// Why a browser's `Origin` says a page of another origin sent the request, if it does.
fn foreign_origin(headers: &HeaderMap) -> Option<String> {
    let text = |name: header::HeaderName| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let host = text(header::HOST).unwrap_or("");
    let origin = text(header::ORIGIN)?;
    let same = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) == Some(host);
    (!same).then(|| format!("Origin {origin:?} is not this gateway's"))
}

/// The dashboard's cookie, whose value is a token.
pub const COOKIE: &str = "tally_token";

/// Why a browser's request may come from a page other than the gateway's own, if it
/// may: a `Sec-Fetch-Site` other than `same-origin`, or an `Origin` not the gateway's.
/// A client that sends neither (not a browser) is not refused.
pub fn cross_site(headers: &HeaderMap) -> Option<String> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("\u{fffd}");
        if site != "same-origin" {
            return Some(format!("Sec-Fetch-Site {site:?}: not a page of this gateway"));
        }
    }
    foreign_origin(headers)
}

/// The value of cookie `name` among every `Cookie` header's `name=value` pairs; none if
/// absent or empty (a cleared cookie), an error if it comes twice (another page of the
/// site may set one for a longer path) or is not printable ASCII.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, String> {
    let mut found = None;
    for header in headers.get_all(header::COOKIE) {
        for pair in header.as_bytes().split(|&b| b == b';') {
            let Some(eq) = pair.iter().position(|&b| b == b'=') else { continue };
            if pair[..eq].trim_ascii() != name.as_bytes() {
                continue;
            }
            let value = std::str::from_utf8(pair[eq + 1..].trim_ascii())
                .ok()
                .filter(|v| v.bytes().all(|b| b.is_ascii_graphic()))
                .ok_or_else(|| format!("the {name} cookie is not printable ASCII"))?;
            if found.replace(value).is_some() {
                return Err(format!("the request sends the {name} cookie twice; log out and in again at /ui/"));
            }
        }
    }
    Ok(found.filter(|v| !v.is_empty()))
}

/// Why a request was refused before its token was looked up.
#[derive(Debug, PartialEq, Eq)]
struct Rejected {
    status: StatusCode,
    code: &'static str,
    why: String,
}

impl Rejected {
    fn answer(self) -> Box<Response> {
        let mut response = error_response(self.status, self.code, self.why);
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"tally\""));
        }
        Box::new(response)
    }
}

/// The token of the dashboard's cookie, if the request has the cookie: refused when a
/// page of another site may have sent it, or when it is not a token.
fn cookie_token(headers: &HeaderMap) -> Result<Option<&str>, Rejected> {
    let unauthenticated = |why: String| Rejected { status: StatusCode::UNAUTHORIZED, code: "unauthenticated", why };
    let Some(token) = cookie(headers, COOKIE).map_err(unauthenticated)? else { return Ok(None) };
    if let Some(why) = cross_site(headers) {
        let why = format!(
            "refused the {COOKIE} cookie: {why}; the cookie is for the dashboard's own requests (send \
             `Authorization: Bearer <token>` from elsewhere)"
        );
        return Err(Rejected { status: StatusCode::FORBIDDEN, code: "forbidden", why });
    }
    if let Err(denied) = super::parse(token) {
        return Err(unauthenticated(format!("the {COOKIE} cookie: {denied}; log in again at /ui/")));
    }
    Ok(Some(token))
}

/// Gives a request a cluster's gateway forwards the token it presents as
/// `Authorization`: its own, or the dashboard's cookie's, checked here, where the
/// browser's origin is this gateway's (the node that answers sees the gateway's request,
/// not the browser's). Refused (401, or 403 for a cookie another site's page may have
/// sent) without either.
pub fn forwarded_token(headers: &mut HeaderMap) -> Result<(), Box<Response>> {
    if headers.contains_key(header::AUTHORIZATION) {
        return Ok(());
    }
    let Some(token) = cookie_token(headers).map_err(Rejected::answer)? else {
        let why = "no valid token: send `Authorization: Bearer <token>`".to_string();
        return Err(Rejected { status: StatusCode::UNAUTHORIZED, code: "unauthenticated", why }.answer());
    };
    let bearer = HeaderValue::from_str(&format!("Bearer {token}")).expect("a token is printable ASCII");
    headers.insert(header::AUTHORIZATION, bearer);
    Ok(())
}

/// The bearer token of a request, if it carries one (a malformed header is refused).
fn bearer(headers: &HeaderMap) -> Result<Option<&str>, Denied> {
    let Some(value) = headers.get(header::AUTHORIZATION) else { return Ok(None) };
    let value = value.to_str().map_err(|_| Denied::Unauthenticated("the authorization header is not text"))?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => Ok(Some(token.trim())),
        _ => Err(Denied::Unauthenticated("the authorization header is not `Bearer <token>`")),
    }
}

fn refusal(denied: &Denied) -> Response {
    let (status, code) = match denied {
        Denied::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, "unauthenticated"),
        Denied::Forbidden => (StatusCode::FORBIDDEN, "forbidden"),
    };
    let mut response = error_response(status, code, denied.to_string());
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer realm=\"tally\""));
    }
    response
}

/// 429 with `Retry-After`, for a request over its share.
pub fn too_many(refusal: crate::shares::Refusal) -> Response {
    let mut response = error_response(StatusCode::TOO_MANY_REQUESTS, "busy", refusal.why);
    response.headers_mut().insert(header::RETRY_AFTER, refusal.retry_after_s.into());
    response
}

/// Who may do what `demand` says, or the answer that refuses the request.
pub async fn authorize(access: &Access, headers: &HeaderMap, demand: &Demand) -> Result<Caller, Box<Response>> {
    let token = bearer(headers).map_err(|d| Box::new(refusal(&d)))?;
    let (action, function, book, promise) = match demand {
        Demand::Needs { action, function, book, promise } => (action, function, book, promise),
        Demand::Nothing => return Ok(Caller { id: "public".into(), role: Role::Read, scope: Scope::default() }),
        Demand::Function { .. } => unreachable!("resolved by http_function"),
    };
    let token = match token {
        Some(token) => Some(token),
        None => cookie_token(headers).map_err(Rejected::answer)?,
    };
    let Some(token) = token else {
        if access.mode == Mode::Local {
            return match forged(headers) {
                None => Ok(Caller::local()),
                Some(why) => Err(Box::new(error_response(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    format!("refused without a token: {why}; send `Authorization: Bearer <token>`"),
                ))),
            };
        }
        return Err(Box::new(refusal(&Denied::Unauthenticated("send `Authorization: Bearer <token>`"))));
    };
    let target = Target { function: function.as_deref(), book: *book, promise: promise.as_deref() };
    let seen = match headers.get(crate::gateway::POSITION).map(|v| v.to_str().map(crate::gateway::parse_position)) {
        None => tally_logsvc::Context::new(),
        Some(Ok(Ok(seen))) => seen,
        Some(_) => {
            let why = format!("{}: not a position (TERM.INDEX,...)", crate::gateway::POSITION);
            return Err(Box::new(error_response(StatusCode::BAD_REQUEST, "invalid_argument", why)));
        }
    };
    match access.tokens.check(token, *action, &target, &seen).await {
        Ok(listed) => {
            access.admission.rate(&listed.grant.id).map_err(|r| Box::new(too_many(r)))?;
            Ok(Caller { id: listed.grant.id, role: listed.grant.role, scope: listed.grant.scope })
        }
        Err(Refused::Denied(d)) => Err(Box::new(refusal(&d))),
        // A position the log refuses is the client's error, as on every route.
        Err(Refused::Log(e @ tally_logsvc::Error::InvalidArgument(_))) => Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            "invalid_argument",
            format!("{}: {e}", crate::gateway::POSITION),
        ))),
        Err(Refused::Log(e)) => Err(Box::new(error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "log_unavailable",
            format!("the tokens cannot be read: {e}"),
        ))),
    }
}

/// The access check of a node over `platform`, its admin token granted (made first if
/// `make_token` and missing): the check, and the admin token.
pub async fn start(
    runtime: Arc<Runtime>,
    platform: tally_logsvc::LogClient,
    make_token: bool,
) -> anyhow::Result<(Arc<Access>, String)> {
    let config = &runtime.config;
    let tokens = Arc::new(Tokens::start(platform).await?);
    let file = config.admin_token_file.clone().unwrap_or_else(|| config.data_dir.join("admin.token"));
    let admin = super::bootstrap(&tokens, &file, make_token).await?;
    let admission = crate::shares::Admission::new(crate::shares::Policy::of(&config.node));
    Ok((Arc::new(Access { mode: config.auth, tokens, runtime: runtime.clone(), admission }), admin))
}

/// The route layer: checks the request against its route's demand and hands the
/// handler its [`Caller`].
pub async fn guard(State(access): State<Arc<Access>>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let pattern = parts.extensions.get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_default();
    let params = Path::<HashMap<String, String>>::from_request_parts(&mut parts, &()).await.map(|p| p.0).unwrap_or_default();
    let invalid = |why: String| error_response(StatusCode::BAD_REQUEST, "invalid_argument", why);
    let mut demand = match demand(&parts.method, &pattern, &params, parts.uri.query()) {
        Ok(d) => d,
        Err(why) => return invalid(why),
    };
    if let Demand::Function { name } = &demand {
        demand = match http_function(&access.runtime, name, None, &parts.headers).await {
            Ok(d) => d,
            Err(why) => return invalid(why.to_string()),
        };
    }
    match authorize(&access, &parts.headers, &demand).await {
        Ok(caller) => {
            parts.extensions.insert(caller);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(response) => *response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route the gateway registers has a line of its own in [`demand`]: none falls
    /// to the admin-only default unless it is the admin's.
    #[test]
    fn every_route_of_the_gateway_has_its_demand() {
        let source = include_str!("../gateway.rs");
        let patterns: Vec<&str> =
            source.split(".route(\"").skip(1).filter_map(|rest| rest.split('"').next()).filter(|p| p.starts_with('/')).collect();
        assert!(patterns.len() >= 25, "{patterns:?}");
        let params: HashMap<String, String> = [("name", "f"), ("id", "3"), ("table", "t"), ("action", "pause"), ("path", "x")]
            .map(|(k, v)| (k.into(), v.into()))
            .into();
        for pattern in patterns {
            for method in [Method::GET, Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
                let d = demand(&method, pattern, &params, None).unwrap_or_else(|e| panic!("{pattern}: {e}"));
                let admins = pattern.starts_with("/v1/tokens") || pattern == "/v1/audit";
                if !admins {
                    assert_ne!(d, Demand::needs(Action::Admin), "{method} {pattern} falls to the default");
                }
            }
        }
    }

    #[test]
    fn only_loopback_names_and_addresses_are_loopback() {
        for host in
            ["127.0.0.1", "127.0.0.1:8080", "127.9.9.9:1", "[::1]:8080", "[::1]", "localhost", "LOCALHOST:80", "a.localhost:8"]
        {
            assert!(loopback_host(host), "{host}");
        }
        for host in
            ["", "evil.example", "127.0.0.1.evil.example", "localhost.evil.example", "[::2]:80", "10.0.0.1:8080", "0.0.0.0"]
        {
            assert!(!loopback_host(host), "{host}");
        }
    }

    #[test]
    fn what_a_page_can_forge_is_refused_and_what_a_cli_sends_is_not() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().unwrap());
            }
            h
        };
        assert_eq!(forged(&headers(&[("host", "127.0.0.1:8080")])), None);
        assert_eq!(forged(&headers(&[("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:8080")])), None);
        assert_eq!(forged(&headers(&[("host", "localhost:1"), ("sec-fetch-site", "none")])), None);
        for bad in [
            &[("host", "evil.example:8080")][..],
            &[("host", "127.0.0.1:8080"), ("origin", "http://evil.example")],
            &[("host", "127.0.0.1:8080"), ("origin", "null")],
            &[("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:9999")],
            &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")],
            &[],
        ] {
            assert!(forged(&headers(bad)).is_some(), "{bad:?}");
        }
    }

    fn with(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(header::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    /// A token as `auth::parse` takes it (no grant behind it).
    const TOKEN: &str = "tally_0123456789abcdef_0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn the_dashboards_cookie_is_found_among_other_cookies() {
        let cookie = format!("theme=dark; {COOKIE}={TOKEN}; other=tally_token");
        let h = with(&[("cookie", "a=1"), ("cookie", &cookie)]);
        assert_eq!(cookie_token(&h), Ok(Some(TOKEN)));
        assert_eq!(cookie_token(&with(&[("cookie", "a=1; tally_tokens=x")])), Ok(None), "another name");
        assert_eq!(cookie_token(&with(&[("cookie", "tally_token=")])), Ok(None), "cleared");
        assert_eq!(cookie_token(&HeaderMap::new()), Ok(None));
        // A page of this gateway: same-origin, its own Origin on a POST.
        let cookie = format!("{COOKIE}={TOKEN}");
        let h = with(&[
            ("host", "node.example:8080"),
            ("origin", "https://node.example:8080"),
            ("sec-fetch-site", "same-origin"),
            ("cookie", &cookie),
        ]);
        assert_eq!(cookie_token(&h), Ok(Some(TOKEN)), "the host need not be loopback: a token is checked");
        let demand = demand(&Method::GET, "/ui/app.js", &HashMap::new(), None);
        assert_eq!(demand, Ok(Demand::Nothing), "the dashboard's files need no token");
    }

    #[test]
    fn a_gateway_forwards_the_dashboards_cookie_as_a_bearer_token() {
        let cookie = format!("{COOKIE}={TOKEN}");
        let mut h =
            with(&[("host", "gw:80"), ("origin", "http://gw:80"), ("sec-fetch-site", "same-origin"), ("cookie", &cookie)]);
        forwarded_token(&mut h).expect("forwarded");
        assert_eq!(h.get(header::AUTHORIZATION).unwrap(), &format!("Bearer {TOKEN}"));
        let mut own = with(&[("authorization", "Bearer mine"), ("cookie", &cookie)]);
        forwarded_token(&mut own).expect("its own");
        assert_eq!(own.get(header::AUTHORIZATION).unwrap(), "Bearer mine", "Authorization wins");
        let status = |r: Result<(), Box<Response>>| r.expect_err("refused").status();
        assert_eq!(status(forwarded_token(&mut HeaderMap::new())), StatusCode::UNAUTHORIZED);
        let mut foreign = with(&[("host", "gw:80"), ("origin", "http://evil.example"), ("cookie", &cookie)]);
        assert_eq!(status(forwarded_token(&mut foreign)), StatusCode::FORBIDDEN);
        assert!(!foreign.contains_key(header::AUTHORIZATION));
    }

    #[test]
    fn a_cookie_a_page_of_another_site_may_have_sent_is_refused() {
        let cookie = format!("{COOKIE}={TOKEN}");
        for bad in [
            &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")][..],
            &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")],
            &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "none")],
            &[("host", "127.0.0.1:8080"), ("origin", "http://evil.example")],
            &[("host", "127.0.0.1:8080"), ("origin", "http://127.0.0.1:9999"), ("sec-fetch-site", "same-origin")],
            &[("host", "127.0.0.1:8080"), ("origin", "null")],
        ] {
            let h = with(&[bad, &[("cookie", cookie.as_str())]].concat());
            let refused = cookie_token(&h).expect_err("refused");
            assert_eq!((refused.status, refused.code), (StatusCode::FORBIDDEN, "forbidden"), "{bad:?}");
            assert!(refused.why.starts_with("refused the tally_token cookie: "), "{}", refused.why);
        }
        assert!(cross_site(&with(&[("host", "h:1"), ("origin", "http://h:1"), ("sec-fetch-site", "same-origin")])).is_none());
        assert!(cross_site(&with(&[("host", "h:1")])).is_none(), "not a browser");
    }

    #[test]
    fn a_malformed_cookie_is_refused_with_a_clear_message() {
        for (cookie, says) in [
            ("tally_token=garbage", "the tally_token cookie: no valid token: not a Tally token"),
            ("tally_token=\"quoted\"", "not a Tally token"),
            ("tally_token=caf\u{e9}", "the tally_token cookie is not printable ASCII"),
            ("tally_token=a; x=1; tally_token=b", "the request sends the tally_token cookie twice"),
        ] {
            let mut h = HeaderMap::new();
            h.insert(header::COOKIE, HeaderValue::from_bytes(cookie.as_bytes()).unwrap());
            let refused = cookie_token(&h).expect_err(cookie);
            assert_eq!((refused.status, refused.code), (StatusCode::UNAUTHORIZED, "unauthenticated"), "{cookie}");
            assert!(refused.why.contains(says), "{cookie}: {}", refused.why);
        }
    }

    #[test]
    fn a_query_names_its_book_once() {
        assert_eq!(query_book(Some("book=3&async=true")), Ok(3));
        assert_eq!(query_book(Some("b%6Fok=4")), Ok(4), "decoded as the route decodes it");
        assert_eq!(query_book(None), Ok(0));
        assert!(query_book(Some("book=3&book=4")).is_err());
        assert!(query_book(Some("book=x")).is_err());
    }
}
