//! The dashboard at `/ui` (`docs/dashboard.md`): pages built on the public HTTP API
//! alone, embedded in the binary (`ui/index.html`, `ui/app.js`, `ui/app.css`), and the
//! login that trades a token for a cookie.
//!
//! | route                        | does                                                  |
//! |------------------------------|-------------------------------------------------------|
//! | `GET /ui`                    | redirects to `/ui/`                                   |
//! | `GET /ui/`, `/ui/app.js`, `/ui/app.css` | the page, its script and its style         |
//! | `POST /ui/login`             | `{"token": T}` or the form `token=T`: 204 and the cookie, 401 for a bad token |
//! | `POST /ui/logout`            | 204, the cookie cleared                               |
//! | anything else under `/ui/`   | 404, so that no HTTP function's route serves it       |
//!
//! Nothing the pages load leaves the node: no CDN, font or outside script, and every
//! answer carries a Content-Security-Policy that lets the page reach its own origin
//! only, run no inline script or style, and be framed by no one.
//!
//! The cookie, `tally_token`, is HttpOnly (no script reads it) and SameSite=Strict, and
//! `Secure` when the node serves HTTPS. It is set twice, for `/v1` and for `/metrics`,
//! the only paths the pages read with it: an HTTP function (`/fn/...`, declared routes)
//! gets every header of its requests, and so never gets the token. `auth/guard.rs`
//! takes the cookie as a token on a request from the node's own pages only. A token
//! whose role or scope reaches little still logs in: the pages show what it may not
//! read. Login and logout refuse another site's request too, so that a page elsewhere
//! cannot log the browser in as someone else.

use std::sync::Arc;

use axum::extract::{Extension, Request};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::auth::guard::{self, Access, COOKIE};
use crate::auth::store::Refused;
use crate::auth::{Action, Denied, Target};

use super::{error_response, ApiResult, NoBody, RequestBody};

const INDEX_HTML: &str = include_str!("../../ui/index.html");
const APP_JS: &str = include_str!("../../ui/app.js");
const APP_CSS: &str = include_str!("../../ui/app.css");

/// The pages reach their own origin only, run only the scripts and styles it serves,
/// show images of it or `data:` URLs, and are framed by no one.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
                   connect-src 'self'; frame-ancestors 'none'";
/// A login's body at most: a token is 87 bytes.
const LOGIN_BYTES_MAX: u64 = 4 << 10;
/// The paths the cookie is set for: those the pages read with it.
const COOKIE_PATHS: [&str; 2] = ["/v1", "/metrics"];

/// `GET /ui`: the page is at `/ui/`, so that its relative URLs resolve below it.
pub(super) async fn redirect(_: NoBody) -> Response {
    let mut response = StatusCode::PERMANENT_REDIRECT.into_response();
    response.headers_mut().insert(header::LOCATION, HeaderValue::from_static("/ui/"));
    with_policy(response)
}

pub(super) async fn index(_: NoBody) -> Response {
    file("text/html; charset=utf-8", INDEX_HTML)
}

pub(super) async fn script(_: NoBody) -> Response {
    file("text/javascript; charset=utf-8", APP_JS)
}

pub(super) async fn style(_: NoBody) -> Response {
    file("text/css; charset=utf-8", APP_CSS)
}

/// Any other path under `/ui/`.
pub(super) async fn not_found(request: Request) -> Response {
    let path = request.uri().path().to_string();
    with_policy(error_response(StatusCode::NOT_FOUND, "not_found", format!("the dashboard has no {path}")))
}

fn file(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    with_policy(response)
}

/// `response` with the dashboard's headers: the CSP, no sniffing, revalidated each time
/// (a new binary serves new pages at once).
fn with_policy(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    response
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    token: String,
}

/// The token of a login's body: JSON, or a form when its content type says so.
fn token_of(headers: &HeaderMap, body: &[u8]) -> Result<String, String> {
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    let token = if form {
        let mut tokens = form_urlencoded::parse(body).filter(|(k, _)| k == "token").map(|(_, v)| v.into_owned());
        let token = tokens.next().ok_or("the form has no `token`")?;
        if tokens.next().is_some() {
            return Err("the form names `token` twice".into());
        }
        token
    } else {
        serde_json::from_slice::<Login>(body).map_err(|e| format!("expected {{\"token\": \"tally_...\"}}: {e}"))?.token
    };
    Ok(token.trim().to_string())
}

/// `POST /ui/login`: 204 with the cookie for a token the node knows.
#[tracing::instrument(name = "http.ui_login", skip_all)]
pub(super) async fn login(
    Extension(access): Extension<Arc<Access>>,
    headers: HeaderMap,
    body: RequestBody,
) -> ApiResult<Response> {
    if let Some(why) = guard::cross_site(&headers) {
        return Ok(error_response(StatusCode::FORBIDDEN, "forbidden", format!("refused a login from another site: {why}")));
    }
    let body = body.read("the login", LOGIN_BYTES_MAX).await?;
    let token = match token_of(&headers, &body) {
        Ok(token) => token,
        Err(why) => return Ok(error_response(StatusCode::BAD_REQUEST, "invalid_argument", why)),
    };
    let seen = tally_logsvc::Context::new();
    match access.tokens.check(&token, Action::Read, &Target::default(), &seen).await {
        Ok(_) | Err(Refused::Denied(Denied::Forbidden)) => {}
        Err(Refused::Denied(denied)) => {
            return Ok(error_response(StatusCode::UNAUTHORIZED, "unauthenticated", denied.to_string()));
        }
        Err(Refused::Log(e)) => {
            let why = format!("the tokens cannot be read: {e}");
            return Ok(error_response(StatusCode::SERVICE_UNAVAILABLE, "log_unavailable", why));
        }
    }
    Ok(with_cookie(&access, Some(&token)))
}

/// `POST /ui/logout`: 204, the cookie cleared.
#[tracing::instrument(name = "http.ui_logout", skip_all)]
pub(super) async fn logout(Extension(access): Extension<Arc<Access>>, headers: HeaderMap, _: NoBody) -> Response {
    if let Some(why) = guard::cross_site(&headers) {
        return error_response(StatusCode::FORBIDDEN, "forbidden", format!("refused a logout from another site: {why}"));
    }
    with_cookie(&access, None)
}

/// 204 setting the cookie to `token` on each of [`COOKIE_PATHS`], or clearing it.
fn with_cookie(access: &Access, token: Option<&str>) -> Response {
    let secure = if access.runtime.config.tls_cert_file.is_some() { "; Secure" } else { "" };
    let mut response = StatusCode::NO_CONTENT.into_response();
    for path in COOKIE_PATHS {
        let cookie = match token {
            Some(token) => format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path={path}{secure}"),
            None => format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path={path}; Max-Age=0{secure}"),
        };
        // A token that parsed is letters, digits and `_`, all valid in a header.
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    with_policy(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_names_its_token_as_json_or_as_a_form() {
        let form = |value: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            h
        };
        let json = HeaderMap::new();
        assert_eq!(token_of(&json, br#"{"token": " tally_a_b "}"#), Ok("tally_a_b".into()));
        assert_eq!(token_of(&form("application/x-www-form-urlencoded"), b"token=tally_a_b&x=1"), Ok("tally_a_b".into()));
        assert!(token_of(&json, b"token=tally_a_b").is_err());
        assert!(token_of(&json, br#"{"token": "t", "role": "admin"}"#).is_err());
        assert!(token_of(&form("application/x-www-form-urlencoded"), b"token=a&token=b").is_err());
        assert!(token_of(&form("application/x-www-form-urlencoded"), b"").is_err());
    }

    /// No URL of another origin, no markup parsed from text, no inline script or style:
    /// what the CSP enforces in the browser, checked on the files themselves.
    #[test]
    fn the_embedded_pages_load_nothing_from_elsewhere() {
        for (name, text) in [("index.html", INDEX_HTML), ("app.js", APP_JS), ("app.css", APP_CSS)] {
            // SVG's namespace is a name, not a request.
            let text = text.replace("\"http://www.w3.org/2000/svg\"", "");
            for outside in [
                "http://",
                "https://",
                "//fonts.",
                "@import",
                "url(",
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "eval(",
                "new Function",
            ] {
                assert!(!text.contains(outside), "{name} holds {outside:?}");
            }
        }
        assert!(!INDEX_HTML.contains("<script>") && !INDEX_HTML.contains("style="), "nothing inline");
    }
}
